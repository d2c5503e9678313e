"""Pure figures of ``synapse bench agent``: what an agent's own stored turns do to a ranking.

A ranking is a list of episode ids, best first; ``stored`` the ids of the turns the agent
recorded itself (the questions it was asked and its acknowledgements). They are never
evidence, but they take places in the ranking like any other turn.

* :func:`stored_in_top`: how many of the first ``k`` are stored turns;
* :func:`question_above_evidence`: for a question whose evidence reached the first ``k``,
  whether a stored turn ranks above its first evidence turn (``None`` when no evidence
  turn reached the first ``k``: the question does not count);
* :func:`hub_share`: the largest share of questions whose first ``n`` hold one same turn;
* :func:`mean_by_group` (from :mod:`.metrics`): means per key plus pooled means (values of any range, unlike
  :func:`~.metrics.mean_by_key`, which holds recalls in [0, 1]).

>>> ranked = ["q1", "e1", "t", "a1"]
>>> stored_in_top(ranked, {"q1", "a1"}, 3), question_above_evidence(ranked, ["e1"], {"q1"}, 3)
(1, True)
>>> hub_share([["x", "y"], ["y", "z"], ["w"]], n=2)
(0.6666666666666666, 'y')
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence

from ..errors import InvalidInputError
from .metrics import mean_by_group

__all__ = ["HUB_DEPTH", "hub_share", "mean_by_group", "question_above_evidence",
           "stored_in_top"]

#: The hub share looks at the first 5 results of each question (the issue's definition).
HUB_DEPTH = 5


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be a positive integer, got {k!r}")
    return k


def stored_in_top(ranked: Sequence[str], stored: Collection[str], k: int) -> int:
    """How many of the first ``k`` ranked ids are stored turns.

    >>> stored_in_top(["a", "s1", "s2", "b"], {"s1", "s2"}, 2)
    1
    """
    return sum(1 for d in ranked[:_check_k(k)] if d in stored)


def question_above_evidence(ranked: Sequence[str], evidence: Iterable[str],
                            stored: Collection[str], k: int) -> bool | None:
    """Whether a stored turn ranks above the first evidence turn among the first ``k``;
    ``None`` when no evidence turn is among them (the question is not counted).

    >>> question_above_evidence(["e", "s"], ["e"], {"s"}, 2)
    False
    >>> question_above_evidence(["s", "x"], ["e"], {"s"}, 2) is None
    True
    """
    wanted = set(evidence)
    for d in ranked[:_check_k(k)]:
        if d in wanted:
            return False
        if d in stored:
            # a stored turn came first: True if evidence follows within k, else not counted
            return True if any(e in wanted for e in ranked[:k]) else None
    return None


def hub_share(tops: Iterable[Sequence[str]], *, n: int = HUB_DEPTH) -> tuple[float, str | None]:
    """``(share, turn)``: the largest share of the rankings whose first ``n`` ids hold the
    same turn, and that turn (the first to reach the count, in order of appearance);
    ``(0.0, None)`` for no ranking. A turn repeated within one ranking counts once.

    >>> hub_share([["a"], ["b"]], n=5)
    (0.5, 'a')
    >>> hub_share([])
    (0.0, None)
    """
    _check_k(n)
    counts: Counter[str] = Counter()
    total = 0
    for ranked in tops:
        total += 1
        counts.update(list(dict.fromkeys(ranked[:n])))
    if not counts:
        return 0.0, None
    turn, best = counts.most_common(1)[0]  # ties: first inserted wins (Counter keeps order)
    return best / total, turn
