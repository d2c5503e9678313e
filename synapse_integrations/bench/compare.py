"""The reference method against the baselines: by the average, per category (the best
baseline and the margin over it), and question by question (what the average hides: the
questions a baseline answers better). Both read the per-method results or records of
:mod:`~synapse_integrations.bench.retrieval`'s loop; the counting rules are
:mod:`~synapse_integrations.bench.metrics`'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .baselines import is_baseline
from .metrics import head_to_head, loses, recall_at_k
from .records import QuestionRecord

__all__ = ["best_baseline_section", "head_to_head_section"]


def best_baseline_section(methods: Mapping[str, Mapping[str, Any]], metrics: Sequence[str],
                          reference: str | None) -> dict[str, Any] | None:
    """Per metric and category: the best baseline, its value, ``reference``'s value and
    ``reference``'s margin over it (``None`` when no baseline or no reference ran)."""
    base = [m for m in methods if is_baseline(m)]
    if not base or reference is None or reference not in methods:
        return None
    out: dict[str, Any] = {"method": reference}
    for metric in metrics:
        per: dict[str, Any] = {}
        for cat, value in methods[reference][metric].items():
            cands = [(methods[b][metric].get(cat), b) for b in base]
            cands = [(v, b) for v, b in cands if v is not None]
            if value is None or not cands:
                continue
            best_v = max(v for v, _ in cands)
            best = next(b for v, b in cands if v == best_v)  # ties: the first listed
            per[cat] = {"baseline": best, "baseline_value": float(best_v),
                        "value": float(value), "margin": float(value - best_v)}
        out[metric] = per
    return out


def head_to_head_section(records: Mapping[str, Sequence[QuestionRecord]], reference: str | None,
                         ks: Sequence[int], counted: Callable[[QuestionRecord], bool]
                         ) -> dict[str, Any] | None:
    """``reference`` against each baseline, question by question, by recall@k for each of
    ``ks`` (:func:`~.metrics.head_to_head` over the questions with evidence that
    ``counted`` keeps), in all and per category, with the ids of the questions it lost;
    ``"best"``: against the best baseline *of each question*. ``None`` when no baseline or
    no reference ran."""
    base = [m for m in records if is_baseline(m)]
    if not base or reference is None or reference not in records:
        return None
    mine = [r for r in records[reference] if r.evidence and counted(r)]
    theirs = {b: {r.qid: r for r in records[b]} for b in base}
    cats: dict[str, list[int]] = {}
    for i, r in enumerate(mine):
        cats.setdefault(str(r.category), []).append(i)

    def compare(own: list[float], other: list[float]) -> dict[str, Any]:
        return {**head_to_head(zip(own, other)),
                "categories": {c: head_to_head((own[i], other[i]) for i in idx)
                               for c, idx in sorted(cats.items())},
                "lost_ids": [r.qid for r, a, b in zip(mine, own, other) if loses(a, b)]}

    out: dict[str, Any] = {"method": reference, "questions": len(mine)}
    for k in ks:
        recall = {b: [recall_at_k(theirs[b][r.qid].ranked, r.evidence, k) for r in mine]
                  for b in base}
        best = [max(recall[b][i] for b in base) for i in range(len(mine))]
        own = [recall_at_k(r.ranked, r.evidence, k) for r in mine]
        out[f"recall@{k}"] = {"baselines": {b: compare(own, recall[b]) for b in base},
                              "best": compare(own, best)}
    return out
