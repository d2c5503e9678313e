"""The ``as_of`` probe set: questions whose answer changed, asked before and after the
change, in real LoCoMo conversations and LongMemEval haystacks (issue 50).

The questions are each knowledge-update probe of the probe file (an older and a newer
statement of one attribute inserted into a real conversation, sessions apart:
:mod:`.probes`) and each LongMemEval knowledge-update question whose evidence turns were
said on different days (:func:`longmemeval_updates`: the earliest evidence turn is the
older version, the latest the newer; a question about the earlier value, "What was my
previous goal...", is left out: its right answer does not change with time). Each is
asked three ways of the ``synapse`` engine:

* **before**: ``as_of`` halfway between the two statements' event times. The right
  version is the older one;
* **after**: as of now (the default). The right version is the newer one;
* **current_only**: as of now, replaced versions hidden. The older one is wrong.

The metrics, over the ranking of the first 10 episodes:

* ``right_first``: the right version ranked above the wrong one (a wrong version not
  returned counts as below);
* ``right_top1``: the right version ranked first of all;
* ``wrong_absent``: the wrong version not returned at all.

Without a write that links the two versions (``Synapse.update``, ``supersede``, or the
reconsolidation rule), ``current_only`` has nothing to hide: the ``linked`` variant asks
the same questions after linking each pair with ``supersede``, as an agent that calls
``update`` would leave them, and ``reconsolidation`` with the offline rule on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.state.validation import to_epoch
from ..core.text.lexicon import PAST_CUES

__all__ = ["AS_OF_VARIANTS", "DEPTH", "ask_memory", "format_as_of", "longmemeval_updates",
           "run_as_of"]

#: How many episodes each question ranks.
DEPTH = 10

#: The memories the questions are asked of: as ingested, with every probe pair linked by
#: ``supersede``, and with the reconsolidation rule on at ingestion.
AS_OF_VARIANTS = ("plain", "linked", "reconsolidation")


def _rank(ids: Sequence[str], turn: str) -> int | None:
    return ids.index(turn) + 1 if turn in ids else None


def _asked(mem: Any, text: str, **kw: Any) -> list[str]:
    return [it.id for it in mem.retrieve(text, k=DEPTH, **kw).items]


def _score(ids: Sequence[str], right: str, wrong: str) -> dict[str, bool]:
    r, w = _rank(ids, right), _rank(ids, wrong)
    return {"right_first": r is not None and (w is None or r < w), "right_top1": r == 1,
            "wrong_absent": w is None}


def _share(rows: Sequence[Mapping[str, bool]], key: str) -> float | None:
    return sum(r[key] for r in rows) / len(rows) if rows else None


def ask_memory(mem: Any, questions: Sequence[Any], times: Mapping[str, float]) -> list[dict[str, Any]]:
    """The three askings of each update question (see the module docstring)."""
    out = []
    for q in questions:
        old, new = q.extra["older"], q.extra["newer"]
        mid = (times[old] + times[new]) / 2
        out.append({"qid": q.qid,
                    "before": _score(_asked(mem, q.text, as_of=mid), old, new),
                    "after": _score(_asked(mem, q.text), new, old),
                    "current_only": _score(_asked(mem, q.text, current_only=True), new, old)})
    return out


def longmemeval_updates(path: Any) -> list[Any]:
    """The LongMemEval knowledge-update questions of the file at ``path`` whose answer
    changed (module docstring), one memory each, as :func:`run_as_of` asks them."""
    from .longmemeval import load_longmemeval
    from .retrieval import BenchMemory, BenchQuestion

    out = []
    for q in load_longmemeval(path, types=["knowledge-update"]).questions:
        when = {t.id: to_epoch(t.timestamp) for t in q.turns}
        ev = sorted((e for e in q.evidence if e in when), key=lambda e: when[e])
        if q.abstention or q.evidence_source != "has_answer" or len(ev) < 2 \
                or when[ev[-1]] - when[ev[0]] < 86400 \
                or PAST_CUES.search(q.question):
            continue
        out.append(BenchMemory(q.question_id, q.rows, (BenchQuestion(
            q.question_id, q.question, q.category, tuple(ev), extra={"older": ev[0], "newer": ev[-1]}),)))
    return out


def run_as_of(memories: Sequence[Any], embedder: Any, *, config: Any = None,
              variants: Sequence[str] = AS_OF_VARIANTS,
              progress: Callable[..., Any] | None = None) -> dict[str, Any]:
    """Every update question of ``memories`` (:func:`.probes.build_memories`, update
    groups) asked before and after its change, per variant: ``{variant: {"n",
    "before"/"after"/"current_only": {metric: share}, "pooled_right_first", "questions"}}``."""
    from ..config import SynapseConfig
    from .retrieval import CachingEmbedder, ingest_memory

    emb = embedder if isinstance(embedder, CachingEmbedder) else CachingEmbedder(embedder)
    base = config or SynapseConfig()
    out: dict[str, Any] = {}
    bar = progress(total=len(memories) * len(variants), desc="as_of memories") if progress else None
    try:
        for variant in variants:
            cfg = base.replace(reconsolidation=True) if variant == "reconsolidation" else base
            rows: list[dict[str, Any]] = []
            for memory in memories:
                times = {t["id"]: to_epoch(t["timestamp"]) for t in memory.turns}
                mem = ingest_memory(memory, cfg, emb)
                try:
                    if variant == "linked":
                        for q in memory.questions:
                            if not mem.get(q.extra["older"]).get("superseded_by"):
                                mem.supersede(q.extra["older"], q.extra["newer"])
                    rows += ask_memory(mem, memory.questions, times)
                finally:
                    mem.close()
                if bar is not None:
                    bar.update(1)
            asked = {how: {m: _share([r[how] for r in rows], m)
                           for m in ("right_first", "right_top1", "wrong_absent")}
                     for how in ("before", "after", "current_only")}
            both = [r[h] for r in rows for h in ("before", "after")]
            out[variant] = {"n": len(rows), **asked,
                            "pooled_right_first": _share(both, "right_first"),
                            "questions": rows}
    finally:
        if bar is not None:
            bar.close()
    return out


def format_as_of(results: Mapping[str, Any], where: str = "LoCoMo") -> str:
    """One line per variant (percentages); ``where``: the data the questions come from."""
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    lines = [f"as_of probes, {where} (%; {next(iter(results.values()))['n']} changed facts, each asked "
             "before and after): right version above the wrong one / first of all; wrong one "
             "absent under current_only"]
    for variant, r in results.items():
        lines.append(f"  {variant:<16} before {pct(r['before']['right_first'])} / "
                     f"{pct(r['before']['right_top1'])}, after {pct(r['after']['right_first'])} / "
                     f"{pct(r['after']['right_top1'])}, pooled {pct(r['pooled_right_first'])}; "
                     f"current_only: wrong absent {pct(r['current_only']['wrong_absent'])}, "
                     f"right first {pct(r['current_only']['right_first'])}")
    return "\n".join(lines)
