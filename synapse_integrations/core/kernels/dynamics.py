"""Spreading activation kernels (SYNAPSE section 3.2, Eqs. 2-4).

Pure functions: arrays and keyword-only hyperparameters in, arrays out. They know
nothing about the engine, the graph object or any framework; the engine builds the
edge arrays from its graph and calls these.

The slow reference the tests check :func:`spread_activation` against is
:func:`~synapse_integrations.core.kernels.dynamics_reference.spread_activation_reference`.

Edges are directed ``j -> i`` and given as three parallel arrays ``src`` (``j``),
``dst`` (``i``) and ``weight`` (``w_ji``). Activation flows along edge direction.

>>> import numpy as np
>>> P = propagation_matrix(np.array([0, 0]), np.array([1, 2]), np.array([1.0, 1.0]), 3)
>>> P.toarray()
array([[0. , 0. , 0. ],
       [0.5, 0. , 0. ],
       [0.5, 0. , 0. ]])
>>> res = spread_activation(np.array([1.0, 0.0, 0.0]), P, iterations=1, spreading_factor=0.8,
...                         decay=0.5, inhibition_beta=0.0, inhibition_top_m=7,
...                         gamma=5.0, theta=0.5, track_parents=True)
>>> res.potential.round(2)
array([0.5, 0.4, 0.4])
>>> res.parent
array([-1,  0,  0])
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from ...errors import InvalidInputError

__all__ = [
    "SpreadResult",
    "lateral_inhibition",
    "propagation_by_source",
    "propagation_matrix",
    "sigmoid_firing",
    "spread_activation",
    "strongest_inflow",
]

logger = logging.getLogger(__name__)

#: Anything :func:`spread_activation` accepts as a propagation matrix.
MatrixLike = sp.sparray | sp.spmatrix | np.ndarray


@dataclass(frozen=True)
class SpreadResult:
    """Outcome of :func:`spread_activation`.

    Attributes:
        activation: firing rates ``a^(T)`` after the last iteration (``a0`` itself when
            ``iterations == 0``).
        potential: inhibited potentials ``û^(T)`` of the last iteration (a copy of ``a0``
            when ``iterations == 0``: the injected energy is the only potential there is).
        parent: for each node first reached by spreading, the in-neighbour ``j`` that pushed
            the most energy ``P[i, j] * a_j`` into it on the iteration it was reached; ``-1``
            for anchors, unreached nodes, and everywhere when parents were not tracked.
            Following ``parent`` from a node walks back to an anchor.
    """

    activation: np.ndarray
    potential: np.ndarray
    parent: np.ndarray


# --------------------------------------------------------------------------------------------
# Eq. 2 operator
# --------------------------------------------------------------------------------------------
def propagation_matrix(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    n: int,
    *,
    use_fan_effect: bool = True,
    fan_exponent: float = 1.0,
    fan_in_exponent: float = 0.0,
) -> sp.csr_array:
    """The propagation operator ``P`` of Eq. 2, so that the spread term is ``S * P @ a``.

    ``P[i, j] = w_ji / fan(j)`` where ``fan(j)`` is the out-degree of ``j`` -- the *number*
    of its out-edges, not the sum of their weights (ACT-R's fan effect: attention is divided
    among associations). With ``use_fan_effect=False``, ``P[i, j] = w_ji``. A
    ``fan_exponent`` ``p`` other than 1 divides by ``fan(j) ** p`` instead (0.5: a softer
    fan effect, so that a concept shared by many episodes still passes some energy on).

    Callers pass each directed edge once: duplicate ``(j, i)`` pairs would have their weights
    summed by the sparse constructor while counting twice in ``fan(j)``.

    Args:
        src: int array, tail ``j`` of each edge.
        dst: int array, head ``i`` of each edge.
        weight: float array, ``w_ji >= 0`` of each edge.
        n: number of nodes; every index must lie in ``[0, n)``.
        use_fan_effect: divide by the out-degree of the source.
        fan_exponent: power of the out-degree in that division (1 in the paper).
        fan_in_exponent: ``q > 0`` also divides by ``in_degree(i) ** q`` (the receiver's
            number of in-edges; 0, the paper, leaves it out), so a node's inflow is a
            (power) mean over its in-neighbours rather than a sum: a node linked to many
            active concepts does not collect energy just by having many links.

    Raises:
        InvalidInputError: mismatched lengths, indices out of range, NaN/inf or negative weights.

    >>> P = propagation_matrix(np.array([0, 0, 1]), np.array([1, 2, 2]),
    ...                        np.array([0.8, 0.4, 1.0]), 3)
    >>> P.toarray()
    array([[0. , 0. , 0. ],
           [0.4, 0. , 0. ],
           [0.2, 1. , 0. ]])
    """
    src, dst, values = _propagation_values(src, dst, weight, n, use_fan_effect=use_fan_effect,
                                           fan_exponent=fan_exponent,
                                           fan_in_exponent=fan_in_exponent)
    return sp.csr_array((values, (dst, src)), shape=(n, n))


def propagation_by_source(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    n: int,
    *,
    use_fan_effect: bool = True,
    fan_exponent: float = 1.0,
    fan_in_exponent: float = 0.0,
) -> sp.csc_array:
    """:func:`propagation_matrix`'s ``P`` stored by column (a node's out-edges are its
    column), for edges given in ``(src, dst)`` order, each once (the compiled view's):
    built without sorting, in time linear in the edges, so the operator a write changes
    is cheap to build again; and :func:`spread_activation` with it reads only the columns
    of the active nodes. Same arguments and checks as :func:`propagation_matrix`.

    >>> P = propagation_by_source(np.array([0, 0, 1]), np.array([1, 2, 2]),
    ...                           np.array([0.8, 0.4, 1.0]), 3)
    >>> P.format, P.toarray()[:, 0].tolist()
    ('csc', [0.0, 0.4, 0.2])
    >>> propagation_by_source(np.array([1, 0]), np.array([0, 1]), np.ones(2), 2)
    Traceback (most recent call last):
    ...
    synapse_integrations.errors.InvalidInputError: edges must be in (src, dst) order, each once
    """
    src, dst, values = _propagation_values(src, dst, weight, n, use_fan_effect=use_fan_effect,
                                           fan_exponent=fan_exponent,
                                           fan_in_exponent=fan_in_exponent)
    key = src * max(n, 1) + dst
    if key.size > 1 and not (np.diff(key) > 0).all():
        raise InvalidInputError("edges must be in (src, dst) order, each once")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    return sp.csc_array((values, dst, indptr), shape=(n, n))


def _propagation_values(
    src: np.ndarray, dst: np.ndarray, weight: np.ndarray, n: int, *, use_fan_effect: bool,
    fan_exponent: float, fan_in_exponent: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The checked edges and each one's entry ``P[dst, src]`` (:func:`propagation_matrix`)."""
    src, dst, weight = _check_edges(src, dst, weight, n)
    if not (math.isfinite(fan_exponent) and fan_exponent >= 0):
        raise InvalidInputError(f"fan_exponent must be a finite number >= 0, got {fan_exponent!r}")
    if not (math.isfinite(fan_in_exponent) and fan_in_exponent >= 0):
        raise InvalidInputError(
            f"fan_in_exponent must be a finite number >= 0, got {fan_in_exponent!r}")
    if use_fan_effect and src.size and fan_exponent != 0:  # powers per node, not per edge
        fan = np.bincount(src, minlength=n).astype(np.float64)
        values = weight / (fan if fan_exponent == 1 else np.power(fan, fan_exponent))[src]
    else:
        values = weight
    if use_fan_effect and src.size and fan_in_exponent != 0:
        fan_in = np.bincount(dst, minlength=n).astype(np.float64)
        values = values / np.power(fan_in, fan_in_exponent)[dst]
    return src, dst, values


def _check_edges(
    src: np.ndarray, dst: np.ndarray, weight: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate parallel edge arrays; return them as (int64, int64, float64) 1-D arrays."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise InvalidInputError(f"n must be an int >= 0, got {n!r}")
    src = np.asarray(src)
    dst = np.asarray(dst)
    weight = np.asarray(weight, dtype=np.float64)
    if not (src.ndim == dst.ndim == weight.ndim == 1 and src.size == dst.size == weight.size):
        raise InvalidInputError(
            "src, dst and weight must be 1-D arrays of equal length, got shapes "
            f"{src.shape}, {dst.shape}, {weight.shape}"
        )
    for name, idx in (("src", src), ("dst", dst)):
        if idx.size and not np.issubdtype(idx.dtype, np.integer):
            raise InvalidInputError(f"{name} must hold integer node indices, got dtype {idx.dtype}")
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise InvalidInputError(
                f"{name} holds node indices outside [0, {n}): min {idx.min()}, max {idx.max()}"
            )
    if weight.size and not np.isfinite(weight).all():
        raise InvalidInputError("edge weights must be finite; found NaN or inf")
    if weight.size and weight.min() < 0:
        raise InvalidInputError(f"edge weights must be >= 0; found {weight.min()!r}")
    return src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False), weight


# --------------------------------------------------------------------------------------------
# Eq. 3 and Eq. 4
# --------------------------------------------------------------------------------------------
def lateral_inhibition(u: np.ndarray, *, beta: float, top_m: int) -> np.ndarray:
    """Eq. 3: ``û_i = max(0, u_i - beta * sum_{k in T_M, u_k > u_i} (u_k - u_i))``.

    ``T_M`` holds the ``top_m`` highest potentials. Every node is inhibited by the members of
    ``T_M`` that lie strictly above it -- members of ``T_M`` included (the highest node is
    never inhibited). Which of several tied nodes belongs to ``T_M`` does not matter: only
    the values enter the sum.

    Runs in ``O(n log M)``: the top ``M`` values are sorted once and each node finds, with a
    binary search, how many of them exceed it and their sum (a suffix of a cumulative sum).

    ``beta == 0`` or ``top_m == 0`` leaves ``u`` unchanged apart from the clip at 0.

    >>> lateral_inhibition(np.array([1.0, 0.6, 0.2, 0.0]), beta=0.5, top_m=2)
    array([1. , 0.4, 0. , 0. ])
    """
    u = np.asarray(u, dtype=np.float64)
    if not (math.isfinite(beta) and beta >= 0):
        raise InvalidInputError(f"beta must be a finite number >= 0, got {beta!r}")
    if isinstance(top_m, bool) or not isinstance(top_m, (int, np.integer)) or top_m < 0:
        raise InvalidInputError(f"top_m must be an int >= 0, got {top_m!r}")
    n = u.size
    m = min(int(top_m), n)
    if m == 0 or beta == 0:
        return np.maximum(u, 0.0)
    top = np.sort(np.partition(u, n - m)[n - m:])  # the M highest values, ascending
    csum = np.concatenate(([0.0], np.cumsum(top)))
    below = np.searchsorted(top, u, side="right")  # how many of T_M are <= u_i
    above_count = m - below
    above_sum = csum[m] - csum[below]
    penalty = above_sum - above_count * u  # sum of (u_k - u_i) over u_k > u_i
    return np.maximum(u - beta * penalty, 0.0)


def sigmoid_firing(
    u: np.ndarray, *, gamma: float, theta: float, silent_zero: bool = True
) -> np.ndarray:
    """Eq. 4: firing rate ``sigma(u) = 1 / (1 + exp(-gamma * (u - theta)))``.

    DECISION (silent_zero): read literally, Eq. 4 makes every node of the graph fire at
    ``sigma(0) = 1 / (1 + exp(gamma * theta))`` (0.076 with the paper's gamma=5,
    theta=0.5) even when no energy ever reached it or inhibition drove it to 0; that
    background then spreads on the next iteration and floods the graph. With
    ``silent_zero=True`` (default) a node whose potential is not positive -- in the cycle
    exactly 0, since Eq. 3 clips at 0 -- stays silent at 0. ``silent_zero=False`` is the
    paper-literal form.

    Computed with :func:`scipy.special.expit`: no overflow for large ``|u|``.

    >>> sigmoid_firing(np.array([0.0, 0.5]), gamma=5.0, theta=0.5)
    array([0. , 0.5])
    >>> sigmoid_firing(np.array([0.0]), gamma=5.0, theta=0.5, silent_zero=False).round(4)
    array([0.0759])
    """
    u = np.asarray(u, dtype=np.float64)
    a = expit(gamma * (u - theta))
    if silent_zero:
        a[u <= 0] = 0.0
    return a


# --------------------------------------------------------------------------------------------
# The cycle Eq. 2 -> Eq. 3 -> Eq. 4
# --------------------------------------------------------------------------------------------
def spread_activation(
    a0: np.ndarray,
    P: MatrixLike,
    *,
    iterations: int,
    spreading_factor: float,
    decay: float,
    inhibition_beta: float,
    inhibition_top_m: int,
    gamma: float,
    theta: float,
    use_inhibition: bool = True,
    silent_zero: bool = True,
    track_parents: bool = False,
) -> SpreadResult:
    """Run ``iterations`` cycles of propagation (Eq. 2), inhibition (Eq. 3) and firing (Eq. 4).

    Each cycle computes::

        u = (1 - decay) * a + spreading_factor * (P @ a)
        û = lateral_inhibition(u) if use_inhibition else max(0, u)
        a = sigmoid_firing(û)

    starting from the raw injected energy ``a^(0) = a0`` (not passed through the sigmoid).

    Args:
        a0: initial activation, non-zero on the anchors (Eq. 1).
        P: ``n x n`` propagation matrix, see :func:`propagation_matrix` (by row) and
            :func:`propagation_by_source` (by column: only active columns are read).
        iterations: ``T``; 0 returns ``a0`` unchanged.
        spreading_factor: ``S``.
        decay: ``delta``; the engine passes 0 to ablate decay.
        inhibition_beta, inhibition_top_m: ``beta`` and ``M`` of Eq. 3.
        gamma, theta: steepness and threshold of Eq. 4.
        use_inhibition: apply Eq. 3 (otherwise only clip at 0).
        silent_zero: see :func:`sigmoid_firing`.
        track_parents: record, for each node first reached (``û > 0`` for the first time)
            on iteration ``t`` and not already active, ``argmax_j P[i, j] * a_j^(t-1)`` --
            the neighbour that pushed most energy into it (lowest ``j`` on ties). Anchors
            (``a0 > 0``) have parent -1, as does a node reached with no positive inflow.

    Returns:
        :class:`SpreadResult`.
    """
    a, P = check_spread_inputs(a0, P, iterations)
    n = a.size
    parent = np.full(n, -1, dtype=np.int64)
    potential = a.copy()
    reached = a > 0
    for _ in range(iterations):
        u = (1.0 - decay) * a + spreading_factor * _product(P, a)
        if silent_zero and not (u < 0).any():
            # Fast path, bit-for-bit the same values: with u >= 0 a node at u = 0 stays at
            # potential 0 (inhibition only lowers, the clip keeps 0) and fires 0 (silent
            # zero), and zeros never inhibit anyone (only values strictly above count). So
            # Eqs. 3-4 need only the support of u -- the few nodes energy has reached --
            # instead of the whole graph (np.partition over a mostly-zero array is slow).
            support = np.flatnonzero(u != 0.0)  # (a float's own nonzero is ~9x slower)
            sub = u[support]
            if use_inhibition:
                sub = lateral_inhibition(sub, beta=inhibition_beta, top_m=inhibition_top_m)
            potential = np.zeros(n)
            potential[support] = sub
            if track_parents:
                hit = support[sub > 0]
                fresh = hit[~reached[hit]]
                if fresh.size:
                    parent[fresh] = strongest_inflow(P, a, fresh)
                reached[hit] = True
            a = np.zeros(n)
            a[support] = sigmoid_firing(sub, gamma=gamma, theta=theta, silent_zero=True)
            continue
        if use_inhibition:
            potential = lateral_inhibition(u, beta=inhibition_beta, top_m=inhibition_top_m)
        else:
            potential = np.maximum(u, 0.0)
        if track_parents:
            fresh = np.flatnonzero((potential > 0) & ~reached)
            if fresh.size:
                parent[fresh] = strongest_inflow(P, a, fresh)
            reached |= potential > 0
        a = sigmoid_firing(potential, gamma=gamma, theta=theta, silent_zero=silent_zero)
    if logger.isEnabledFor(logging.DEBUG):  # the count reads every node
        logger.debug("spread_activation: %d nodes, %d iterations, %d active",
                     n, iterations, int(np.count_nonzero(a != 0.0)))
    return SpreadResult(activation=a, potential=potential, parent=parent)


def check_spread_inputs(
    a0: np.ndarray, P: MatrixLike, iterations: int
) -> tuple[np.ndarray, sp.csr_array | sp.csc_array]:
    a = np.array(a0, dtype=np.float64)  # always a copy: a0 is never aliased by the result
    if a.ndim != 1:
        raise InvalidInputError(f"a0 must be a 1-D array, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise InvalidInputError("a0 must be finite; found NaN or inf")
    if P.shape != (a.size, a.size):
        raise InvalidInputError(
            f"P must have shape ({a.size}, {a.size}) to match a0, got {P.shape}"
        )
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) \
            or iterations < 0:
        raise InvalidInputError(f"iterations must be an int >= 0, got {iterations!r}")
    by_column = sp.issparse(P) and P.format == "csc"  # propagation_by_source's operator
    return a, sp.csc_array(P) if by_column else sp.csr_array(P)


def _slices(indptr: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the compressed rows (or columns) ``which`` of a sparse matrix lie in its
    ``indices``/``data``, in order, and how many entries each has: the same entries as
    ``P[which]``, without scipy's fancy-indexing overhead."""
    starts = indptr[which]
    counts = indptr[which + 1] - starts
    first = np.concatenate(([0], np.cumsum(counts)))
    return np.arange(first[-1]) - np.repeat(first[:-1] - starts, counts), counts


def _columns(P: sp.csc_array, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries of ``P``'s columns where ``a > 0``, as ``(row, column, P[row, column])``,
    column by column (rows ascending in each): what an active node sends."""
    cols = np.flatnonzero(a > 0)
    take, counts = _slices(P.indptr, cols)
    return P.indices[take], np.repeat(cols, counts), P.data[take]


def _product(P: sp.csr_array | sp.csc_array, a: np.ndarray) -> np.ndarray:
    """``P @ a``. With ``P`` by column and ``a`` zero but on a few nodes (activation starts
    on the anchors and inhibition keeps it narrow), only the active nodes' columns are
    read: each row's products are summed in column order, as a row-wise product sums
    them, so the values are the same to the bit."""
    if P.format != "csc" or (a < 0).any() or 8 * np.count_nonzero(a != 0.0) > a.size:
        return P @ a
    rows, cols, values = _columns(P, a)
    return np.bincount(rows, weights=values * a[cols], minlength=a.size)


def strongest_inflow(P: sp.csr_array | sp.csc_array, a: np.ndarray,
                     rows: np.ndarray) -> np.ndarray:
    """For each of the distinct rows ``i`` in ``rows``: ``argmax_j P[i, j] * a[j]``
    (lowest ``j`` on ties), or -1 where no ``P[i, j] * a[j]`` is positive: the node that
    passed ``i`` the most energy (the parent an explanation shows). ``P`` by row or by
    column (sorted indices); the seed models' spreading reads it too.

    >>> P = sp.csr_array(np.array([[0.0, 0.5, 0.5], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    >>> strongest_inflow(P, np.array([0.0, 1.0, 1.0]), np.array([0, 1, 2])).tolist()
    [1, -1, -1]
    >>> strongest_inflow(sp.csc_array(P), np.array([0.0, 1.0, 1.0]), np.array([0, 2])).tolist()
    [1, -1]
    """
    if P.format == "csc":  # by column: from what the active nodes send to the rows asked
        r, cols, values = _columns(P, a)
        position = np.full(a.size, -1, dtype=np.int64)
        position[rows] = np.arange(rows.size)
        group = position[r]
        asked = group >= 0
        group, cols, inflow = group[asked], cols[asked], values[asked] * a[cols[asked]]
    else:  # by row: the rows' own entries
        take, counts = _slices(P.indptr, rows)
        group = np.repeat(np.arange(rows.size), counts)
        cols = P.indices[take]
        inflow = P.data[take] * a[cols]
    # the positive inflows sorted by row, then inflow descending, then column ascending:
    # the first entry of each row is its argmax with the lowest-index tie-break
    positive = inflow > 0
    group, cols, inflow = group[positive], cols[positive], inflow[positive]
    order = np.lexsort((cols, -inflow, group))
    firsts = order[np.flatnonzero(np.diff(group[order], prepend=-1))]
    out = np.full(rows.size, -1, dtype=np.int64)
    out[group[firsts]] = cols[firsts]
    return out
