"""Small memories: day one, when a memory holds a handful of turns.

``synapse bench small --out FILE`` asks the questions of the hand-written memories shipped
in ``synapse_integrations/data/small_memories_v1.json`` (6 to 8 turns each, user /
assistant turns and named speakers; or another file with ``--data``). LoCoMo and
LongMemEval ask of hundreds of turns; in a handful every node is near the top of every
list, and mechanisms tuned on large memories can rank below a plain vector search
(docs/benchmarks.md, "Small memories").

The file (the contract): ``{"format": "synapse-small-memories", "version": 1,
"memories": [memory, ...]}``; a memory is ``{"id", "split" ("tuned" or "held-out"),
"turns": [{"speaker", "text"}, ...], "questions": [{"question", "answer_turn"}, ...]}``,
``answer_turn`` the index of the turn that answers (``null``: never said). Turns are
stored a minute apart (:data:`TURN_GAP_S`), as the adapters store them (the bare text, the
speaker a field).

Metrics per method and split, over the answerable questions: ``top1`` (the answer turn
ranked first), ``top3``; for engine methods also ``refused`` (answerable questions the gate
refused) and, over the never-said questions, ``rejected``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from .probes import run_scored

__all__ = ["SMALL_FILE", "SMALL_METHODS", "load_small", "run_small", "score_small"]

SMALL_FILE = "small_memories_v1.json"
SMALL_METHODS: tuple[str, ...] = ("dense", "bm25", "fusion", "ppr", "synapse")
_T0 = 1_700_000_000
#: Seconds between two turns of a small memory: a chat's pace (the adapters stamp a turn
#: when it arrives), so an answer is a reply to the question before it
#: (core/signals/replies.py, ``REPLY_WINDOW``). An hour until 2026-11-27.
TURN_GAP_S = 60
_SPLITS = ("tuned", "held-out")


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise InvalidInputError(f"small memories file: {what}")


def load_small(path: str | Path | None = None) -> dict[str, Any]:
    """The packaged file (``path`` None) or another one, checked."""
    if path is None:
        text = resources.files("synapse_integrations").joinpath(f"data/{SMALL_FILE}").read_text("utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    data = json.loads(text)
    _need(isinstance(data, dict) and data.get("format") == "synapse-small-memories",
          "expected an object with format 'synapse-small-memories'")
    mems = data.get("memories")
    _need(isinstance(mems, list) and bool(mems), "'memories' must be a non-empty list")
    seen: set[str] = set()
    for m in mems:
        mid = m.get("id") if isinstance(m, dict) else None
        _need(isinstance(mid, str) and mid not in seen, f"a memory has no id or a repeated one: {str(m)[:80]}")
        seen.add(mid)
        _need(m.get("split") in _SPLITS, f"memory {mid!r}: split must be one of {_SPLITS}")
        turns, qs = m.get("turns"), m.get("questions")
        _need(isinstance(turns, list) and bool(turns) and all(
            isinstance(t, dict) and isinstance(t.get("speaker"), str) and isinstance(t.get("text"), str)
            and t["text"].strip() for t in turns), f"memory {mid!r}: turns need speaker and text")
        _need(isinstance(qs, list) and bool(qs), f"memory {mid!r}: no questions")
        for q in qs:
            a = q.get("answer_turn") if isinstance(q, dict) else "?"
            _need(isinstance(q, dict) and isinstance(q.get("question"), str) and q["question"].strip()
                  and (a is None or (isinstance(a, int) and not isinstance(a, bool)
                                     and 0 <= a < len(turns))),
                  f"memory {mid!r}: a question needs text and answer_turn (a turn index or "
                  f"null): {str(q)[:80]}")
    return data


def _memories(data: Mapping[str, Any]) -> list[Any]:
    from .retrieval import BenchMemory, BenchQuestion

    out = []
    for m in data["memories"]:
        ids = [f"{m['id']}:{i}" for i in range(len(m["turns"]))]
        turns = tuple({"text": t["text"], "speaker": t["speaker"],
                       "timestamp": _T0 + TURN_GAP_S * i, "id": ids[i]}
                      for i, t in enumerate(m["turns"]))
        questions = tuple(
            BenchQuestion(f"{m['id']}/{j}", q["question"],
                          "never_said" if q["answer_turn"] is None else "answerable",
                          () if q["answer_turn"] is None else (ids[q["answer_turn"]],),
                          q["answer_turn"] is None, {"split": m["split"]})
            for j, q in enumerate(m["questions"]))
        out.append(BenchMemory(m["id"], turns, questions))
    return out


def score_small(records: Sequence[Any], engine: bool) -> dict[str, Any]:
    """One method's metrics per split (and ``"all"``) from its question records."""
    out: dict[str, Any] = {}
    for split in (*_SPLITS, "all"):
        recs = [r for r in records if split == "all" or r.extra.get("split") == split]
        ans = [r for r in recs if r.evidence]
        never = [r for r in recs if not r.evidence]
        row: dict[str, Any] = {
            "answerable": len(ans), "never_said": len(never),
            "top1": sum(bool(r.ranked) and r.ranked[0] == r.evidence[0] for r in ans),
            "top3": sum(r.evidence[0] in r.ranked[:3] for r in ans)}
        if engine:
            row["refused"] = sum(bool(r.rejected) for r in ans)
            row["rejected"] = sum(bool(r.rejected) for r in never)
        out[split] = row
    return out


def run_small(
    *,
    data: str | Path | None = None,
    methods: Sequence[str] = SMALL_METHODS,
    embedder: Any | None = None,
    progress: Callable[..., Any] | None = None,
    keep_records: bool = False,
) -> dict[str, Any]:
    """Every method on every question of every small memory."""
    t0 = time.perf_counter()
    loaded = load_small(data)
    state, scored = run_scored(_memories(loaded), methods, 5, embedder, progress,
                               "small memories", score_small)
    out: dict[str, Any] = {"data": str(data) if data else f"package data {SMALL_FILE}",
                           "version": loaded["version"], "methods": scored}
    out["timing_s"] = {"total": time.perf_counter() - t0, **state.seconds}
    if keep_records:
        out["records"] = state.records
    return out


def format_small_table(results: Mapping[str, Any]) -> str:
    """The results as a text table: per method, answer first / in the top 3 (tuned,
    held-out), answerable refused and never-said rejected (all memories)."""
    lines = ["small memories: answer turn first / top 3 (tuned | held-out); gate over all memories",
             f"{'method':12s} {'tuned':>12s} {'held-out':>12s} {'refused':>9s} {'rejected':>9s}"]
    for m, e in results["methods"].items():
        t, h, a = e["tuned"], e["held-out"], e["all"]
        gate = (f"{a['refused']:>4d}/{a['answerable']:<4d} {a['rejected']:>4d}/{a['never_said']:<4d}"
                if "refused" in a else f"{'-':>9s} {'-':>9s}")
        lines.append(f"{m:12s} {t['top1']:>4d}/{t['top3']:<3d}/{t['answerable']:<3d}"
                     f" {h['top1']:>4d}/{h['top3']:<3d}/{h['answerable']:<3d} {gate}")
    return "\n".join(lines)
