"""SynapticRAG's stimulus, passed generation by generation (seed paper 002, Eqs. 4-6): the
query's stimulus reaches its nearest nodes, each stimulated node is a leaky
integrate-and-fire neuron (:mod:`.lif`), a node that fires is a result and a node that does
not passes the stimulus on once, when it is strong enough. The rules are in
:mod:`.synaptic`'s docstring; :func:`propagate_stimulus` is the fast path and
:func:`propagate_stimulus_reference` its slow reference, one pair and one neuron at a time,
which the tests check it against.

>>> import numpy as np
>>> nbr, cos = np.array([[-1], [-1]]), np.full((2, 1), -np.inf)
>>> out = propagate_stimulus(np.array([0, 1]), np.array([0.9, 0.3]), nbr, cos,
...                          lambda p, c, cs: cs, v=np.zeros(2), i=np.zeros(2),
...                          tau=np.ones(2), idle=np.zeros(2), cos_th=0.5, stim_th=0.5,
...                          v_th=10.0)
>>> out.stimulus.tolist(), out.generation.tolist()
([0.9, 0.0], [1, 0])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .lif import lif_advance, lif_peak, tau_increment

__all__ = ["Binding", "Propagation", "propagate_stimulus", "propagate_stimulus_reference"]


@dataclass(frozen=True)
class Propagation:
    """Outcome of :func:`propagate_stimulus`, per node.

    Attributes:
        stimulus: total stimulus received.
        peak: the highest membrane potential reached (at firing, for fired nodes).
        fired: whether the node fired.
        parent: the node whose chain brought the strongest stimulus (-1: the query, or not
            stimulated).
        generation: the generation that first stimulated the node (0: not stimulated).
    """

    stimulus: np.ndarray
    peak: np.ndarray
    fired: np.ndarray
    parent: np.ndarray
    generation: np.ndarray


#: ``binding(parents, children, cos) -> B`` for arrays of pairs (parent -1: the query).
Binding = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def propagate_stimulus(
    first: np.ndarray,
    first_cos: np.ndarray,
    neighbors: np.ndarray,
    neighbor_cos: np.ndarray,
    binding: Binding,
    *,
    v: np.ndarray,
    i: np.ndarray,
    tau: np.ndarray,
    idle: np.ndarray,
    cos_th: float,
    stim_th: float,
    v_th: float,
    v_rest: float = 0.0,
    i_rest: float = 0.0,
    max_generations: int = 5,
) -> Propagation:
    """Pass the query's stimulus through the nodes (module docstring: the rules).

    Args:
        first, first_cos: the query's children (node indices) and their cosines with it.
        neighbors, neighbor_cos: ``(n, k)`` each node's nearest nodes (-1: padding) and
            cosines: the candidates for its children.
        binding: ``B`` for arrays of (parent, child, cosine) pairs.
        v, i, tau: each neuron's state right after its last recorded stimulus.
        idle: time from that stimulus to the query (0 for a node never stimulated).
        cos_th, stim_th, v_th, v_rest, i_rest: the thresholds and the reset.
        max_generations: stop after this many generations.

    On its first stimulus a neuron evolves freely over ``idle`` (:func:`lif_advance`) and
    ``tau`` gains ``tau_increment(idle)``; each stimulus ``S`` raises ``I`` by ``S / tau``;
    after each generation a neuron whose peak potential reaches ``v_th`` fires.
    """
    n = neighbors.shape[0]
    V = np.array(v, dtype=np.float64)
    I_ = np.array(i, dtype=np.float64)
    TAU = np.array(tau, dtype=np.float64)
    idle = np.asarray(idle, dtype=np.float64)
    touched = np.zeros(n, dtype=bool)
    fired = np.zeros(n, dtype=bool)
    spread = np.zeros(n, dtype=bool)
    stimulus = np.zeros(n)
    peak = np.zeros(n)
    parent = np.full(n, -1, dtype=np.int64)
    generation = np.zeros(n, dtype=np.int64)
    senders = np.array([-1], dtype=np.int64)
    sent = np.array([1.0])
    for g in range(1, max_generations + 1):
        if g == 1:
            kids = np.asarray(first, dtype=np.int64)
            cs = np.asarray(first_cos, dtype=np.float64)
            par = np.full(kids.size, -1, dtype=np.int64)
            s_par = np.ones(kids.size)
        else:
            kids = neighbors[senders].ravel()
            cs = neighbor_cos[senders].ravel().astype(np.float64)
            par = np.repeat(senders, neighbors.shape[1])
            s_par = np.repeat(sent, neighbors.shape[1])
        ok = (kids >= 0) & (cs >= cos_th)
        kids, cs, par, s_par = kids[ok], cs[ok], par[ok], s_par[ok]
        if kids.size == 0:
            break
        s = s_par * np.asarray(binding(par, kids, cs), dtype=np.float64)
        # strongest chain per child (lowest parent on ties), total input per child
        order = np.lexsort((par, -s, kids))
        kids, par, s = kids[order], par[order], s[order]
        head = np.ones(kids.size, dtype=bool)
        head[1:] = kids[1:] != kids[:-1]
        uk, best, best_par = kids[head], s[head], par[head]
        total = np.add.reduceat(s, np.flatnonzero(head))
        new = uk[~touched[uk]]
        if new.size:
            V[new], I_[new], _ = lif_advance(V[new], I_[new], tau=TAU[new], dt=idle[new],
                                             v_th=v_th, v_rest=v_rest, i_rest=i_rest)
            TAU[new] += tau_increment(idle[new])
            touched[new] = True
            generation[new] = g
            fresh = generation[uk] == g
            parent[uk[fresh]] = best_par[fresh]
        I_[uk] += total / TAU[uk]
        stimulus[uk] += total
        pk = lif_peak(V[uk], I_[uk], tau=TAU[uk])
        peak[uk] = np.maximum(peak[uk], pk)
        fire = (pk >= v_th) & ~fired[uk]
        fired[uk[fire]] = True
        V[uk[fire]], I_[uk[fire]] = v_rest, i_rest
        go = ~fired[uk] & ~spread[uk] & (best >= stim_th)
        senders, sent = uk[go], best[go]
        spread[senders] = True
        if senders.size == 0:
            break
    return Propagation(stimulus, peak, fired, parent, generation)


def propagate_stimulus_reference(first: np.ndarray, first_cos: np.ndarray,
                                 neighbors: np.ndarray, neighbor_cos: np.ndarray,
                                 binding: Binding, *, v: np.ndarray, i: np.ndarray,
                                 tau: np.ndarray, idle: np.ndarray, cos_th: float,
                                 stim_th: float, v_th: float, v_rest: float = 0.0,
                                 i_rest: float = 0.0, max_generations: int = 5) -> Propagation:
    """:func:`propagate_stimulus` one pair and one neuron at a time (tests only)."""
    n = len(neighbors)
    V, I_, TAU = [float(x) for x in v], [float(x) for x in i], [float(x) for x in tau]
    touched, fired, spread = [False] * n, [False] * n, [False] * n
    stimulus, peak = [0.0] * n, [0.0] * n
    parent, generation = [-1] * n, [0] * n
    senders: list[tuple[int, float]] = [(-1, 1.0)]
    for g in range(1, max_generations + 1):
        pairs = []
        for p, sp_ in senders:
            if p < 0:
                cands = list(zip(np.asarray(first).tolist(), np.asarray(first_cos).tolist()))
            else:
                cands = list(zip(neighbors[p].tolist(), neighbor_cos[p].tolist()))
            for c, cs in cands:
                if c >= 0 and cs >= cos_th:
                    b = float(binding(np.array([p]), np.array([c]), np.array([cs]))[0])
                    pairs.append((p, c, sp_ * b))
        if not pairs:
            break
        inbox: dict[int, list[tuple[float, int]]] = {}
        for p, c, s in pairs:
            inbox.setdefault(c, []).append((s, p))
        nxt = []
        for c in sorted(inbox):
            msgs = inbox[c]
            best = max(s for s, _ in msgs)
            best_par = min(p for s, p in msgs if s == best)
            if not touched[c]:
                va, ia, _ = lif_advance(np.array([V[c]]), np.array([I_[c]]),
                                        tau=np.array([TAU[c]]), dt=np.array([idle[c]]),
                                        v_th=v_th, v_rest=v_rest, i_rest=i_rest)
                V[c], I_[c] = float(va[0]), float(ia[0])
                TAU[c] += (1 - math.exp(-idle[c])) / (1 + math.exp(-idle[c]))
                touched[c], generation[c], parent[c] = True, g, best_par
            total = sum(s for s, _ in msgs)
            I_[c] += total / TAU[c]
            stimulus[c] += total
            pk = float(lif_peak(np.array([V[c]]), np.array([I_[c]]), tau=np.array([TAU[c]]))[0])
            peak[c] = max(peak[c], pk)
            if pk >= v_th and not fired[c]:
                fired[c] = True
                V[c], I_[c] = v_rest, i_rest
            if not fired[c] and not spread[c] and best >= stim_th:
                spread[c] = True
                nxt.append((c, best))
        senders = nxt
        if not senders:
            break
    return Propagation(np.array(stimulus), np.array(peak), np.array(fired),
                       np.array(parent, dtype=np.int64), np.array(generation, dtype=np.int64))
