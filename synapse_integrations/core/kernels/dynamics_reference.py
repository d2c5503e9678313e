"""The slow reference of the spreading activation kernel (tests only).

:func:`spread_activation_reference` has the contract of
:func:`~synapse_integrations.core.kernels.dynamics.spread_activation`, written as plain loops
over nodes and edges, so that the tests can check the fast kernel against an implementation
whose correctness can be read off line by line.

>>> import numpy as np
>>> from synapse_integrations.core.kernels.dynamics import propagation_matrix
>>> P = propagation_matrix(np.array([0, 0]), np.array([1, 2]), np.array([1.0, 1.0]), 3)
>>> res = spread_activation_reference(np.array([1.0, 0.0, 0.0]), P, iterations=1,
...                                   spreading_factor=0.8, decay=0.5, inhibition_beta=0.0,
...                                   inhibition_top_m=7, gamma=5.0, theta=0.5,
...                                   track_parents=True)
>>> res.potential.round(2), res.parent
(array([0.5, 0.4, 0.4]), array([-1,  0,  0]))
"""

from __future__ import annotations

import math

import numpy as np

from .dynamics import MatrixLike, SpreadResult, check_spread_inputs

__all__ = ["spread_activation_reference"]


def spread_activation_reference(
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
    """Same contract as :func:`spread_activation`, written as plain loops over nodes and edges.

    Quadratic in places and slow on purpose: it exists only so the tests can check the fast
    kernel against an implementation whose correctness can be read off line by line.
    """
    a_arr, P = check_spread_inputs(a0, P, iterations)
    n = a_arr.size
    # in_edges[i] = list of (j, P[i, j])
    coo = P.tocoo()
    in_edges: dict[int, list[tuple[int, float]]] = {i: [] for i in range(n)}
    for i, j, p in zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist()):
        in_edges[i].append((j, p))

    a = a_arr.tolist()
    potential = list(a)
    parent = [-1] * n
    reached = [x > 0 for x in a]
    for _ in range(iterations):
        # Eq. 2
        u = []
        for i in range(n):
            total = 0.0
            for j, p in in_edges[i]:
                total += p * a[j]
            u.append((1.0 - decay) * a[i] + spreading_factor * total)
        # Eq. 3
        if use_inhibition and inhibition_top_m > 0:
            by_height = sorted(range(n), key=lambda k: u[k], reverse=True)
            top = by_height[: inhibition_top_m]
            u_hat = []
            for i in range(n):
                penalty = 0.0
                for k in top:
                    if u[k] > u[i]:
                        penalty += u[k] - u[i]
                u_hat.append(max(0.0, u[i] - inhibition_beta * penalty))
        else:
            u_hat = [max(0.0, x) for x in u]
        # parents: strongest contributor on the iteration a node is first reached
        if track_parents:
            for i in range(n):
                if u_hat[i] > 0 and not reached[i]:
                    best_j, best = -1, 0.0
                    for j, p in sorted(in_edges[i]):
                        if p * a[j] > best:
                            best_j, best = j, p * a[j]
                    parent[i] = best_j
                    reached[i] = True
        # Eq. 4
        new_a = []
        for i in range(n):
            if silent_zero and u_hat[i] <= 0:
                new_a.append(0.0)
                continue
            z = gamma * (u_hat[i] - theta)
            if z >= 0:
                new_a.append(1.0 / (1.0 + math.exp(-z)))
            else:
                e = math.exp(z)
                new_a.append(e / (1.0 + e))
        a = new_a
        potential = u_hat
    return SpreadResult(
        activation=np.array(a, dtype=np.float64),
        potential=np.array(potential, dtype=np.float64),
        parent=np.array(parent, dtype=np.int64),
    )
