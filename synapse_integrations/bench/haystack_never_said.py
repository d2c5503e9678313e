"""Never-said questions in long chat histories: the gate's probe set over LongMemEval.

``synapse bench probes --longmemeval FILE --out FILE`` asks the questions shipped in
``synapse_integrations/data/haystack_never_said_v1.json`` (or another file:
``--haystack-probes``) of LongMemEval haystacks. LongMemEval has few abstention questions
(10 in the dev slice), too few to choose a gate on; LoCoMo's never-said probes sit in
conversations between two named people. These questions are an agent's day: one user,
hundreds of turns with an assistant, and a question about something the user never
mentioned ("What is the name of my parrot?").

The file (the contract): ``{"format": "synapse-haystack-never-said", "version": 1,
"questions": [question, ...]}``; a question is ``{"id", "split" ("dev" or "held-out"),
"question", "absent_terms": [str, ...]}``: the words its subject needs, none of which the
chosen haystack may hold.

Placement (decisions, so that results can be reproduced):

* questions are placed in file order; each takes the first haystack of the LongMemEval file
  (file order) not yet taken whose turns, user's and assistant's, hold none of its absent
  terms; a question no haystack fits is reported as ``unplaced``, never dropped silently;
* a term is found case-insensitively as whole words, with a plural ``s`` or ``es`` allowed
  after it (``tattoo`` finds "tattoos"; ``opera`` does not find "operation");
* absence is lexical: a haystack may speak of the subject in other words ("my spouse" for
  ``husband``), which is part of what the probe measures.

Each placed question is its own memory (the haystack's turns, as :mod:`.retrieval` ingests
LongMemEval), and the haystack's own LongMemEval question is asked of it too: its answerable
questions are the false-refusal check on the same memories.

Metrics per engine method (the baselines have no gate): ``rejected`` per split and in all,
the checks that rejected, the haystack questions ``refused`` (answerable ones) and
``rejected`` (LongMemEval abstention ones), and one row per question (haystack, verdict,
check, the first memory's confidence).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from .baselines import is_baseline
from .probes import read_data_file, run_scored

__all__ = [
    "HAYSTACK_FILE",
    "HAYSTACK_METHODS",
    "SPLITS",
    "format_haystack_table",
    "load_haystack_probes",
    "mentions",
    "place",
    "run_haystack_never_said",
    "score_haystack",
    "validate_haystack_probes",
]

HAYSTACK_FILE = "haystack_never_said_v1.json"
HAYSTACK_METHODS: tuple[str, ...] = ("synapse",)
SPLITS = ("dev", "held-out")
_FORMAT = "synapse-haystack-never-said"
#: ranking depth recorded per question (the gate reads the first memory; a few more are
#: kept to show what the question found)
_DEPTH = 10


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise InvalidInputError(f"haystack never-said file: {what}")


def validate_haystack_probes(data: Any) -> None:
    """Check the file's structure; raises :class:`ValueError` naming the problem."""
    _need(isinstance(data, dict) and data.get("format") == _FORMAT,
          f"expected an object with format {_FORMAT!r}")
    _need(isinstance(data.get("version"), int), "'version' must be an int")
    qs = data.get("questions")
    _need(isinstance(qs, list) and bool(qs), "'questions' must be a non-empty list")
    seen: set[str] = set()
    for q in qs:
        qid = q.get("id") if isinstance(q, dict) else None
        _need(isinstance(qid, str) and bool(qid) and qid not in seen,
              f"a question has no id, or a repeated one: {str(q)[:80]}")
        seen.add(qid)
        _need(q.get("split") in SPLITS, f"question {qid!r}: split must be one of {SPLITS}")
        _need(isinstance(q.get("question"), str) and bool(q["question"].strip()),
              f"question {qid!r}: no question text")
        terms = q.get("absent_terms")
        _need(isinstance(terms, list) and bool(terms)
              and all(isinstance(t, str) and t.strip() for t in terms),
              f"question {qid!r}: 'absent_terms' must be a non-empty list of words")


def load_haystack_probes(path: str | Path | None = None) -> dict[str, Any]:
    """The packaged file (``path`` None) or another one, checked by
    :func:`validate_haystack_probes`."""
    data = read_data_file(path, HAYSTACK_FILE)
    validate_haystack_probes(data)
    return data


def _pattern(term: str) -> re.Pattern[str]:
    words = [re.escape(w) for w in term.lower().split()]
    return re.compile(r"\b" + r"\s+".join(words) + r"(?:s|es)?\b")


def mentions(text: str, terms: Sequence[str]) -> list[str]:
    """The ``terms`` that ``text`` holds (whole words, any case, plural allowed).

    >>> mentions("Two tattoos and a blood  type test", ["tattoo", "blood type", "opera"])
    ['tattoo', 'blood type']
    >>> mentions("the operation went well", ["opera"])
    []
    """
    low = text.lower()
    return [t for t in terms if _pattern(t).search(low)]


def place(questions: Sequence[Mapping[str, Any]], haystacks: Sequence[Any]) -> dict[str, Any]:
    """Which haystack each question is asked of: ``{question id: haystack}`` for the placed
    ones (in file order, the first haystack not yet taken that holds none of the question's
    absent terms), and ``None`` for a question no haystack fits. ``haystacks`` are
    :class:`~.longmemeval.LongMemEvalQuestion` (anything with ``turns`` of ``text``).

    >>> from types import SimpleNamespace as NS
    >>> hs = [NS(turns=(NS(text="user: my parrot Kiwi"),)), NS(turns=(NS(text="user: hi"),))]
    >>> placed = place([{"id": "p", "absent_terms": ["parrot"]},
    ...                 {"id": "q", "absent_terms": ["hamster"]}], hs)
    >>> placed["p"] is hs[1], placed["q"] is hs[0]
    (True, True)
    """
    joined = [" \n".join(t.text for t in h.turns).lower() for h in haystacks]
    taken: set[int] = set()
    out: dict[str, Any] = {}
    for q in questions:
        pats = [_pattern(t) for t in q["absent_terms"]]
        out[q["id"]] = None
        for i, text in enumerate(joined):
            if i not in taken and not any(p.search(text) for p in pats):
                taken.add(i)
                out[q["id"]] = haystacks[i]
                break
    return out


def _memories(questions: Sequence[Mapping[str, Any]], placed: Mapping[str, Any]) -> list[Any]:
    from .retrieval import BenchMemory, BenchQuestion

    out = []
    for q in questions:
        h = placed[q["id"]]
        if h is None:
            continue
        own = ("haystack-abstention" if h.abstention else "haystack-answerable")
        out.append(BenchMemory(
            f"{q['id']}@{h.question_id}",
            h.rows,
            (BenchQuestion(q["id"], q["question"], "never_said", (), True,
                           {"split": q["split"], "haystack": h.question_id}),
             BenchQuestion(f"{q['id']}/{h.question_id}", h.question, own, h.evidence,
                           h.abstention, {"haystack": h.question_id}))))
    return out


def score_haystack(records: Sequence[Any], engine: bool) -> dict[str, Any]:
    """One engine method's metrics from its question records (see the module docstring)."""
    if not engine:
        return {}
    never = [r for r in records if r.category == "never_said"]
    out: dict[str, Any] = {}
    for split in (*SPLITS, "all"):
        rs = [r for r in never if split == "all" or r.extra["split"] == split]
        out[split] = {"n": len(rs), "rejected": sum(bool(r.rejected) for r in rs)}
    out["checks"] = dict(Counter(r.gate["check"] for r in never
                                 if r.rejected and r.gate is not None))
    ans = [r for r in records if r.category == "haystack-answerable"]
    abst = [r for r in records if r.category == "haystack-abstention"]
    out["haystack_questions"] = {
        "answerable": len(ans), "refused": sum(bool(r.rejected) for r in ans),
        "abstention": len(abst), "rejected": sum(bool(r.rejected) for r in abst)}
    out["questions"] = [
        {"id": r.qid, "split": r.extra["split"], "haystack": r.extra["haystack"],
         "rejected": bool(r.rejected),
         "check": r.gate["check"] if r.gate is not None else None,
         "confidence": r.confidence, "first": r.ranked[0] if r.ranked else None}
        for r in never]
    return out


def run_haystack_never_said(
    longmemeval: str | Path,
    *,
    data: str | Path | None = None,
    methods: Sequence[str] = HAYSTACK_METHODS,
    embedder: Any | None = None,
    progress: Callable[..., Any] | None = None,
    keep_records: bool = False,
) -> dict[str, Any]:
    """Place every question of the file (``data``, default the packaged one) in a haystack
    of the ``longmemeval`` file and ask it, with every engine method of ``methods``.

    Example::

        out = run_haystack_never_said("longmemeval_s_dev.json.gz")
        out["methods"]["synapse"]["all"]   # {"n": 39, "rejected": ...}
    """
    from .longmemeval import load_longmemeval

    engine = [m for m in methods if not is_baseline(m)]
    if not engine:
        raise InvalidInputError(
            f"never-said questions measure the gate, which only engine methods have; got "
            f"{list(methods)} (e.g. 'synapse')")
    t0 = time.perf_counter()
    loaded = load_haystack_probes(data)
    ds = load_longmemeval(longmemeval)
    placed = place(loaded["questions"], ds.questions)
    state, scored = run_scored(_memories(loaded["questions"], placed), engine, _DEPTH, embedder,
                               progress, "haystack never-said", score_haystack)
    out: dict[str, Any] = {
        "data": str(data) if data else f"package data {HAYSTACK_FILE}",
        "version": loaded["version"],
        "dataset": str(longmemeval),
        "counts": {s: sum(q["split"] == s for q in loaded["questions"]) for s in SPLITS},
        "placed": {qid: (h.question_id if h is not None else None) for qid, h in placed.items()},
        "unplaced": [qid for qid, h in placed.items() if h is None],
        "methods": scored,
    }
    out["timing_s"] = {"total": time.perf_counter() - t0, **state.seconds}
    if keep_records:
        out["records"] = state.records
    return out


def format_haystack_table(results: Mapping[str, Any]) -> str:
    """The results as text: per method, never-said questions rejected (dev, held-out, all),
    the checks that rejected, and the haystacks' own answerable questions refused; then the
    questions each method accepted, with the first memory's confidence."""
    c = results["counts"]
    lines = [f"never said in long histories: {c['dev']} dev + {c['held-out']} held-out "
             f"questions, {len(results['unplaced'])} unplaced "
             f"{results['unplaced'] or ''}".rstrip(),
             f"{'method':14s} {'dev rej':>9s} {'held rej':>9s} {'all rej':>9s} "
             f"{'haystack q refused':>19s}  checks"]
    for m, e in results["methods"].items():
        hq = e["haystack_questions"]
        cells = [f"{e[s]['rejected']}/{e[s]['n']}" for s in (*SPLITS, "all")]
        checks = ", ".join(f"{k} {v}" for k, v in sorted(e["checks"].items()))
        lines.append(f"{m:14s} " + " ".join(f"{x:>9s}" for x in cells)
                     + f" {hq['refused']:>9d}/{hq['answerable']:<9d}  {checks}")
    for m, e in results["methods"].items():
        acc = [f"{q['id']} ({q['confidence']:.2f})" for q in e["questions"] if not q["rejected"]]
        lines.append(f"{m} accepted: " + (", ".join(acc) or "none"))
    return "\n".join(lines)
