"""Usage feedback: learned edge weights (Evermind, seed paper 003, section 4.5, Eq. 2).

After an answer, the caller says which retrieved memories it used and which it did not;
:func:`learn` turns that into Evermind's update on the edges the configured model spreads
over (:class:`~.models.base.LearnableEdges`)::

    w <- clip(w + alpha * signal, 0, 1)

with ``signal = +1`` on an edge whose two ends were both *used* (the used memories and
the nodes on the activation paths that brought them: the concepts or neighbours that
carried the energy), ``-1`` on an edge from a node active in the retrieval into an
*unused* memory that spreading (not the triggers' seeding) brought in, ``0`` otherwise
(:func:`~.models.evermind.update_edge_weights`).

Where the weights live, so that nothing undoes them:

- ``synapse`` and ``ppr`` spread over the memory graph: the edge's ``weight`` is set and
  the edge marked ``learned``; consolidation never raises that weight again nor prunes the
  edge (:meth:`~.graph.MemoryGraph.add_edge`, :meth:`~.graph.MemoryGraph.prune_incoming`).
- ``evermind`` spreads over a k-NN graph derived from the embeddings (rebuilt as the
  memory grows): the learned weights are a table ``(src id, dst id) -> weight`` in
  :attr:`~.graph.MemoryGraph.learned`, which the model applies over the cosines whenever it
  builds its graph.
- ``synaptic`` and ``mnemos`` learn nothing (no weighted graph of their own to change);
  the report says so with ``graph=None``.

Both are in the graph snapshot (durable at the next :meth:`Synapse.save`, or on close);
forgetting a memory drops its learned links.

The retrieval is replayed for the query (same memory, same config) to know which nodes
were active and which spreading brought in: the caller passes the query, not the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ...config import SynapseConfig
from ...errors import InvalidInputError, InvalidTypeError, NodeNotFoundError
from ...types import FeedbackReport
from ..models import LearnsEdges
from ..models.evermind import feedback_signal, learn_edge_weights
from ..retrieval.passes import run_pass
from ..retrieval.pipeline import Retriever
from ..retrieval.triggers import cosines
from ..state.state import MemoryState
from ..state.validation import check_query

__all__ = ["DEFAULT_ALPHA", "check", "learn", "path_nodes", "prepare"]

#: Evermind's learning rate (4.5).
DEFAULT_ALPHA = 0.1


def _ids(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidTypeError(f"{what} must be a list of memory ids, got {type(value).__name__}")
    out = tuple(dict.fromkeys(value))
    bad = [i for i in out if not isinstance(i, str)]
    if bad:
        raise InvalidTypeError(f"{what} must hold str ids, got {type(bad[0]).__name__}: {bad[0]!r}")
    return out


def check(used_ids: Any, unused_ids: Any, alpha: Any,
          config: Any) -> tuple[tuple[str, ...], tuple[str, ...], float]:
    """Validated ``(used, unused, alpha)`` (types and overlap; the ids' existence is checked
    against the memory by :func:`learn`)."""
    used, unused = _ids(used_ids, "used_ids"), _ids(unused_ids, "unused_ids")
    both = sorted(set(used) & set(unused))
    if both:
        raise InvalidInputError(f"an id cannot be both used and unused: {both[:5]}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) \
            or not (np.isfinite(alpha) and 0 <= alpha <= 1):
        raise InvalidInputError(f"alpha must be a number in [0, 1], got {alpha!r}")
    if config is not None and not isinstance(config, SynapseConfig):
        raise InvalidTypeError(f"config must be a SynapseConfig, got {type(config).__name__}")
    return used, unused, float(alpha)


def prepare(query: Any, used_ids: Any, unused_ids: Any, alpha: Any, config: Any,
            embedder: Any) -> tuple[str, np.ndarray, tuple[str, ...], tuple[str, ...], float]:
    """Checked arguments of ``Synapse.feedback`` and the query's embedding (outside the
    engine's lock): ``(query, vector, used, unused, alpha)``."""
    check_query(query)
    used, unused, alpha = check(used_ids, unused_ids, alpha, config)
    return query, np.asarray(embedder.embed_query(query), dtype=np.float32), used, unused, alpha


def path_nodes(parents: np.ndarray | None, nodes: Sequence[int]) -> np.ndarray:
    """``nodes`` and every node on their parent chains (the activation paths).

    >>> path_nodes(np.array([-1, 0, 1, -1]), [2, 3]).tolist()
    [0, 1, 2, 3]
    """
    out = set(int(i) for i in nodes)
    if parents is not None:
        for i in nodes:
            j = int(parents[i])
            while j >= 0 and j not in out:
                out.add(j)
                j = int(parents[j])
    return np.array(sorted(out), dtype=np.int64)


def learn(state: MemoryState, retriever: Retriever, query: str, qv: np.ndarray,
          used: tuple[str, ...], unused: tuple[str, ...], alpha: float,
          cfg: SynapseConfig) -> FeedbackReport:
    """Apply one feedback (module docstring) to the memory; returns what changed.
    :class:`NodeNotFoundError` names ids that are not active memories."""
    missing = [i for i in (*used, *unused) if i not in state]
    if missing:
        raise NodeNotFoundError(f"not active memory id(s): {missing[:5]}")
    model = retriever.model(cfg.model)
    if not isinstance(model, LearnsEdges) or not (used or unused):
        return FeedbackReport(query, cfg.model, None if not isinstance(model, LearnsEdges)
                              else model.learnable_edges(state.compiled(), cfg).graph,
                              used, unused)
    view = state.compiled()
    sim = cosines(view, qv, cfg, retriever.names(view, query, cfg))
    run = run_pass(view, state, cfg, model, query, qv, sim, cfg.top_k)
    parents = None if run is None else run.parents
    active = np.zeros(0, dtype=np.int64) if run is None else run.cand[run.activation > 0]
    used_idx = [view.index[i] for i in used]
    unused_idx = np.array([view.index[i] for i in unused], dtype=np.int64)
    useful = np.setdiff1d(path_nodes(parents, used_idx), unused_idx)
    spread = (np.zeros(0, dtype=np.int64) if parents is None
              else unused_idx[parents[unused_idx] >= 0])
    edges = model.learnable_edges(view, cfg)
    signal = feedback_signal(edges.src, edges.dst, useful=useful, spread_unused=spread,
                             active=active)
    hit = np.flatnonzero(signal)
    weights = learn_edge_weights(edges.weight[hit], signal[hit], alpha=alpha)
    pairs = [(view.ids[a], view.ids[b]) for a, b in zip(edges.src[hit], edges.dst[hit])]
    created = 0
    if edges.grow and alpha > 0:
        linked = set(zip(edges.src.tolist(), edges.dst.tolist()))
        new = [(a, b) for a in used_idx for b in used_idx if a != b and (a, b) not in linked]
        pairs += [(view.ids[a], view.ids[b]) for a, b in new]
        weights = np.concatenate([weights, np.full(len(new), min(alpha, 1.0))])
        created = len(new)
    state.learn_weights(edges.graph, pairs, weights.tolist())
    return FeedbackReport(query, cfg.model, edges.graph, used, unused,
                          int((signal > 0).sum()), int((signal < 0).sum()), created)
