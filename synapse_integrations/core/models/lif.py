"""SynapticRAG's dynamic leaky integrate-and-fire neuron (seed paper 002, Eqs. 5-6 and the
time-constant update): each memory node integrates the stimuli it receives, fires when its
membrane potential crosses the threshold, and its time constant grows with every stimulus
by ``(1 - e^-dt) / (1 + e^-dt)``. Pure kernels, integrated exactly between stimuli, with a
slow reference (:func:`lif_run_reference`) the tests compare against. Used by
:mod:`.synaptic`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import lambertw

from ...errors import InvalidInputError

__all__ = ["LIFState", "lif_advance", "lif_free", "lif_peak", "lif_run", "lif_run_reference",
           "tau_after", "tau_increment"]


# --------------------------------------------------------------------------------------------
# Eq. 4: the time constant
# --------------------------------------------------------------------------------------------
def tau_increment(dt: np.ndarray | float) -> np.ndarray:
    """``(1 - exp(-dt)) / (1 + exp(-dt))`` (= ``tanh(dt / 2)``): what ``tau`` gains at a
    stimulus arriving ``dt`` after the previous one; 0 for simultaneous stimuli, towards
    1 for rare ones."""
    dt = np.asarray(dt, dtype=np.float64)
    return np.tanh(dt / 2.0)


def tau_after(times: Sequence[float], *, tau_init: float) -> float:
    """``tau`` after a spike train (times in the model's unit, sorted): ``tau_init`` plus
    the increment of Eq. 4 for each stimulus after the first.

    >>> round(tau_after([0.0, 1.0, 1.0], tau_init=1.0), 4)
    1.4621
    """
    t = np.asarray(times, dtype=np.float64)
    if t.size < 2:
        return float(tau_init)
    return float(tau_init + tau_increment(np.diff(t)).sum())




# --------------------------------------------------------------------------------------------
# Eqs. 5-6: the leaky integrate-and-fire neuron, integrated exactly between stimuli
# --------------------------------------------------------------------------------------------
def lif_free(v: np.ndarray, i: np.ndarray, *, tau: np.ndarray,
             dt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(V, I)`` after ``dt`` without input: ``I = i e^(-dt/tau)``,
    ``V = (v + i dt / tau) e^(-dt/tau)`` (the exact solution of Eqs. 5-6, one ``tau``)."""
    v, i, tau, dt = (np.asarray(a, dtype=np.float64) for a in (v, i, tau, dt))
    decay = np.exp(-dt / tau)
    return (v + i * dt / tau) * decay, i * decay


def lif_peak(v: np.ndarray, i: np.ndarray, *, tau: np.ndarray,
             horizon: np.ndarray | float = np.inf) -> np.ndarray:
    """Largest ``V`` (its supremum) over ``[0, horizon]`` of the free evolution from
    ``(v, i)``. With ``i > v`` and ``i > 0``, ``V`` rises to ``i * exp(-(1 - v/i))`` at
    ``s* = tau (1 - v/i)``, then decays; otherwise it only falls or creeps towards 0.

    >>> lif_peak(np.array([0.0, 0.5]), np.array([1.0, 0.2]), tau=np.array([2.0, 2.0])).round(4)
    array([0.3679, 0.5   ])
    """
    v, i, tau = (np.asarray(a, dtype=np.float64) for a in (v, i, tau))
    h = np.broadcast_to(np.asarray(horizon, dtype=np.float64), v.shape)
    rising = (i > 0) & (i > v)
    s_star = tau * (1.0 - v / np.where(rising, i, 1.0))
    s = np.where(rising, np.minimum(s_star, h), h)
    finite = np.isfinite(s)
    at_s, _ = lif_free(v, i, tau=tau, dt=np.where(finite, s, 0.0))
    return np.maximum(v, np.where(finite, at_s, 0.0))  # V tends to 0 as s grows


def _crossing(v: np.ndarray, i: np.ndarray, tau: np.ndarray, v_th: float) -> np.ndarray:
    """First ``s >= 0`` with ``V(s) = v_th`` on the rising side (callers make sure it
    exists): ``(v + i u) e^-u = v_th`` with ``u = s / tau`` solves to
    ``u = -W0(-(v_th / i) e^(-v / i)) - v / i`` (Lambert W, principal branch)."""
    v, i, tau = (np.asarray(a, dtype=np.float64) for a in (v, i, tau))
    out = np.zeros_like(v)
    need = v < v_th
    if need.any():
        vi = v[need] / i[need]
        arg = np.maximum(-(v_th / i[need]) * np.exp(-vi), -math.exp(-1.0))
        out[need] = tau[need] * np.maximum(-np.real(lambertw(arg, 0)) - vi, 0.0)
    return out


def lif_advance(v: np.ndarray, i: np.ndarray, *, tau: np.ndarray, dt: np.ndarray,
                v_th: float, v_rest: float = 0.0, i_rest: float = 0.0,
                max_resets: int = 16) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Advance ``(V, I)`` by ``dt`` without input, firing (and resetting at the crossing)
    whenever ``V`` reaches ``v_th``. Returns ``(V, I, spikes)``, ``spikes`` the number of
    firings per neuron."""
    v, i, tau, dt = (np.array(a, dtype=np.float64) for a in np.broadcast_arrays(v, i, tau, dt))
    spikes = np.zeros(v.shape, dtype=np.int64)
    left = dt.copy()
    for _ in range(max_resets):
        fires = lif_peak(v, i, tau=tau, horizon=left) >= v_th
        if not fires.any():
            break
        s = _crossing(v[fires], i[fires], tau[fires], v_th)
        spikes[fires] += 1
        left[fires] = np.maximum(left[fires] - s, 0.0)
        v[fires], i[fires] = v_rest, i_rest
        if v_rest >= v_th:  # a reset at or above threshold would fire forever: stop here
            break
    v, i = lif_free(v, i, tau=tau, dt=left)
    return v, i, spikes


@dataclass(frozen=True)
class LIFState:
    """A neuron right after its last stimulus: potential, current, time constant, the time
    of that stimulus, and how often it fired on the way."""

    v: float
    i: float
    tau: float
    t_last: float
    spikes: int


def lif_run(times: Sequence[float], values: Sequence[float], *, tau_init: float, v_th: float,
            v_rest: float = 0.0, i_rest: float = 0.0) -> LIFState:
    """Feed a spike train (times sorted, in the model's unit) to a neuron at rest
    (``V = I = 0``, ``tau = tau_init``): before each stimulus the neuron evolves freely
    (firing on the way, :func:`lif_advance`), ``tau`` gains :func:`tau_increment` of the
    gap, and the current jumps by ``value / tau``.

    >>> s = lif_run([0.0, 1.0], [1.0, 1.0], tau_init=1.0, v_th=10.0)
    >>> round(s.tau, 4), round(s.i, 4), round(s.v, 4)
    (1.4621, 1.0518, 0.3679)
    """
    t = np.asarray(times, dtype=np.float64)
    w = np.asarray(values, dtype=np.float64)
    if t.shape != w.shape or t.ndim != 1:
        raise InvalidInputError("times and values must be 1-D arrays of the same length")
    if t.size > 1 and (np.diff(t) < 0).any():
        raise InvalidInputError("times must be sorted")
    v = i = 0.0
    tau = float(tau_init)
    spikes = 0
    for k in range(t.size):
        if k:
            gap = t[k] - t[k - 1]
            va, ia, sa = lif_advance(np.array([v]), np.array([i]), tau=np.array([tau]),
                                     dt=np.array([gap]), v_th=v_th, v_rest=v_rest,
                                     i_rest=i_rest)
            v, i, spikes = float(va[0]), float(ia[0]), spikes + int(sa[0])
            tau += float(tau_increment(gap))
        i += float(w[k]) / tau
    return LIFState(v, i, tau, float(t[-1]) if t.size else -math.inf, spikes)


def lif_run_reference(times: Sequence[float], values: Sequence[float], *, tau_init: float,
                      v_th: float, v_rest: float = 0.0, i_rest: float = 0.0,
                      step: float = 1e-4) -> LIFState:
    """:func:`lif_run` by forward Euler steps of ``step`` (slow, approximate; tests only)."""
    v = i = 0.0
    tau = float(tau_init)
    spikes = 0
    for k, (t, w) in enumerate(zip(times, values)):
        if k:
            gap = t - times[k - 1]
            steps = int(round(gap / step))
            for _ in range(steps):
                v, i = v + step * (-v + i) / tau, i + step * (-i) / tau
                if v >= v_th:
                    v, i = v_rest, i_rest
                    spikes += 1
            tau += (1 - math.exp(-gap)) / (1 + math.exp(-gap))
        i += w / tau
    return LIFState(v, i, tau, float(times[-1]) if len(times) else -math.inf, spikes)
