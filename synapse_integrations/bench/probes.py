"""Probe sets: per-question trust checks inside real LoCoMo conversations.

``synapse bench probes --locomo FILE --out FILE`` runs the probe file shipped in the
package (``synapse_integrations/data/probes_v1.json``, made by
:mod:`synapse_integrations.bench.probe_gen`) or another one (``--probes``). Each probe
lives in a real LoCoMo conversation of the dev split: its turns are inserted at named
points of the conversation, the conversation (with every probe of the same group) is
ingested as one memory, and the probe's question is asked of it.

The file (the contract):

``{"format": "synapse-probes", "version": 1, "groups": [group, ...], ...}``; a group is
``{"id", "kind", "conversation", "inserts": [insert, ...], "probes": [probe, ...]}``; an
insert ``{"id", "after" (the dia_id it follows), "speaker", "text"}`` becomes the turn
``"<speaker>: <text>"``, stamped one millisecond per insert after the turn it follows; a
probe ``{"id", "kind", "question", "targets": [turn id, ...]}`` plus, by kind:
``bridge``: ``bridge_type``, ``chain`` (subject, bridge and answer turn ids);
``update``: ``older``, ``newer``; ``never_said``: ``subject``, ``absent_terms``.

Metrics per method (on the ranking of episodes, first 30 considered):

* ``identifier``: ``rank1`` (share of probes whose target is ranked first) and ``mrr``;
* ``bridge``: ``hit@10`` (answer turn among the first 10) and its rank per probe;
* ``update``: ``newer_above_older`` (the changed fact ranked above the old one; an unranked
  turn counts as below every ranked one) and ``newer_top5``;
* ``never_said``: ``rejected`` (engine methods: the gate refused), with ``false_refusal``,
  the share of the other probes the same gate refused.

With the ``synapse`` method and update groups, the update questions are also asked before
and after their change (``as_of``, ``current_only``): :mod:`.as_of`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from .baselines import is_baseline

__all__ = [
    "KINDS",
    "PROBE_METHODS",
    "build_memories",
    "content_words",
    "load_probes",
    "read_data_file",
    "run_probes",
    "run_scored",
    "shares_word",
    "validate_probes",
]

KINDS = ("identifier", "bridge", "never_said", "update")
PROBE_METHODS: tuple[str, ...] = ("bm25", "dense", "hybrid_rrf", "fusion", "ppr", "synapse",
                                  "synapse-paper")
PROBE_FILE = "probes_v1.json"
_DEPTH = 30


def read_data_file(path: str | Path | None, packaged: str) -> Any:
    """The JSON at ``path``, or the package's ``data/<packaged>`` when ``path`` is None;
    a file that is not JSON raises :class:`ValueError` naming it. The probe files' reader
    (here and :mod:`.haystack_never_said`)."""
    if path is None:
        text = resources.files("synapse_integrations").joinpath(f"data/{packaged}") \
            .read_text("utf-8")
        where = f"package data {packaged}"
    else:
        text = Path(path).read_text("utf-8")
        where = str(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{where}: not JSON: {exc}") from None


def load_probes(path: str | Path | None = None) -> dict[str, Any]:
    """The probe file at ``path``, or the packaged one; checked by :func:`validate_probes`."""
    data = read_data_file(path, PROBE_FILE)
    validate_probes(data)
    return data


# --------------------------------------------------------------------------- validation
_SUFFIXES = ("ingly", "ings", "ing", "edly", "ed", "ers", "er", "est", "es", "s", "ly")


def content_words(text: str) -> set[str]:
    """The engine's BM25 tokens of ``text`` (stopwords out), crudely stemmed.

    >>> sorted(content_words("Pickle swallowed a hair tie"))
    ['hair', 'pickle', 'swallow', 'tie']
    """
    from ..core.text.tokens import tokenize

    out = set()
    for tok in tokenize(text):
        for suffix in _SUFFIXES:
            if tok.endswith(suffix) and len(tok) - len(suffix) >= 3:
                tok = tok[: -len(suffix)]
                break
        out.add(tok)
    return out


def shares_word(a: str, b: str) -> set[str]:
    """Content words of ``a`` that ``b`` shares (equal stems, or one stem a prefix of the
    other, 3 letters at least): deliberately eager, so that a probe that passes really
    has no lexical way from question to answer.

    >>> sorted(shares_word("How old is the horse?", "the oldest mare"))
    ['old']
    """
    wa, wb = content_words(a), content_words(b)
    return {x for x in wa for y in wb
            if x == y or (min(len(x), len(y)) >= 3 and (x.startswith(y) or y.startswith(x)))}


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise InvalidInputError(f"invalid probe file: {what}")


def validate_probes(data: Any, dataset: Any | None = None) -> None:
    """Check a probe file's structure (and, with the LoCoMo ``dataset``, that every
    conversation and insertion point exists, that each bridge name has a word the
    conversation never uses, and that never-said terms do not occur in it). Raises :class:`ValueError` naming the problem."""
    _need(isinstance(data, dict) and data.get("format") == "synapse-probes",
          "expected an object with format 'synapse-probes'")
    _need(isinstance(data.get("version"), int), "'version' must be an int")
    groups = data.get("groups")
    _need(isinstance(groups, list) and bool(groups), "'groups' must be a non-empty list")
    turn_ids: set[str] = set()
    probe_ids: set[str] = set()
    convs = {c.sample_id: c for c in dataset.conversations} if dataset is not None else None
    for g in groups:
        gid = g.get("id") if isinstance(g, dict) else None
        _need(isinstance(gid, str), f"a group has no 'id': {str(g)[:80]}")
        _need(g.get("kind") in KINDS, f"group {gid!r}: kind must be one of {KINDS}")
        _need(isinstance(g.get("conversation"), str), f"group {gid!r}: no 'conversation'")
        _need(isinstance(g.get("inserts"), list) and isinstance(g.get("probes"), list)
              and bool(g["probes"]), f"group {gid!r}: 'inserts' and 'probes' must be lists "
                                     "(probes non-empty)")
        conv = None
        if convs is not None:
            _need(g["conversation"] in convs,
                  f"group {gid!r}: conversation {g['conversation']!r} is not in the LoCoMo file")
            conv = convs[g["conversation"]]
        dia = {t.dia_id for t in conv.turns} if conv is not None else None
        texts = {}
        for ins in g["inserts"]:
            _need(isinstance(ins, dict) and all(isinstance(ins.get(k), str) and ins[k]
                                                for k in ("id", "after", "speaker", "text")),
                  f"group {gid!r}: an insert needs id, after, speaker, text: {str(ins)[:80]}")
            _need(ins["id"] not in turn_ids, f"turn id {ins['id']!r} is used twice")
            turn_ids.add(ins["id"])
            texts[ins["id"]] = f"{ins['speaker']}: {ins['text']}"
            if dia is not None:
                _need(ins["after"] in dia, f"insert {ins['id']!r}: no turn {ins['after']!r} "
                                           f"in {g['conversation']}")
                _need(ins["id"] not in dia, f"insert {ins['id']!r} reuses a LoCoMo dia_id")
        for p in g["probes"]:
            pid = p.get("id") if isinstance(p, dict) else None
            _need(isinstance(pid, str) and pid not in probe_ids,
                  f"group {gid!r}: a probe has no id, or a repeated one: {str(p)[:80]}")
            probe_ids.add(pid)
            _need(p.get("kind") == g["kind"], f"probe {pid!r}: kind differs from its group's")
            _need(isinstance(p.get("question"), str) and bool(p["question"].strip()),
                  f"probe {pid!r}: no question")
            targets = p.get("targets")
            _need(isinstance(targets, list) and all(t in texts for t in targets),
                  f"probe {pid!r}: targets must name inserted turns of its group")
            _need(bool(targets) == (g["kind"] != "never_said"),
                  f"probe {pid!r}: never_said probes have no target, the others at least one")
            if g["kind"] == "bridge":
                _check_bridge(p, texts, conv)
            elif g["kind"] == "update":
                _need(p.get("older") in texts and p.get("newer") in texts
                      and p["newer"] in targets, f"probe {pid!r}: older/newer must be turns "
                                                 "of its group, newer a target")
            elif g["kind"] == "never_said":
                terms = p.get("absent_terms")
                _need(isinstance(p.get("subject"), str) and isinstance(terms, list)
                      and bool(terms), f"probe {pid!r}: needs subject and absent_terms")
                if conv is not None:
                    _need(p["subject"] in conv.speakers,
                          f"probe {pid!r}: {p['subject']!r} is not a speaker of the conversation")
                    said = " ".join(t.text.lower() for t in conv.turns)
                    for term in terms:
                        _need(re.search(rf"\b{re.escape(term.lower())}\b", said) is None,
                              f"probe {pid!r}: {term!r} does occur in {g['conversation']}")


def _check_bridge(p: Mapping[str, Any], texts: Mapping[str, str], conv: Any) -> None:
    pid = p["id"]
    chain = p.get("chain")
    _need(isinstance(chain, list) and len(chain) == 3 and all(c in texts for c in chain)
          and chain[2] in p["targets"] and isinstance(p.get("bridge_type"), str),
          f"probe {pid!r}: a bridge needs bridge_type and a chain of 3 turns ending in the target")
    subject, bridge, answer = (texts[c] for c in chain)
    q = p["question"]
    common = shares_word(q, answer)
    _need(not common, f"probe {pid!r}: question and answer turn share {sorted(common)}")
    _need(bool(shares_word(q, subject) | shares_word(q, bridge)),
          f"probe {pid!r}: the question shares no word with the subject or bridge turn")
    alias = shares_word(answer, bridge) - content_words(answer.split(":", 1)[0])
    _need(bool(alias), f"probe {pid!r}: the bridge turn does not name the answer's subject")
    if conv is not None:
        from ..core.text.tokens import tokenize

        said = {w for t in conv.turns for w in tokenize(t.text)}
        name = [w for w in tokenize(answer.split(":", 1)[1]) if w in set(tokenize(bridge))]
        _need(any(w not in said for w in name),
              f"probe {pid!r}: every word of the bridge name {name} already occurs in "
              f"{conv.sample_id}")


# --------------------------------------------------------------------------- running
def build_memories(data: Mapping[str, Any], dataset: Any) -> list[Any]:
    """One :class:`~synapse_integrations.bench.retrieval.BenchMemory` per group: the
    conversation's turns with the group's inserts after their points."""
    from .retrieval import BenchMemory, BenchQuestion

    convs = {c.sample_id: c for c in dataset.conversations}
    memories = []
    for g in data["groups"]:
        conv = convs[g["conversation"]]
        after: dict[str, list[Mapping[str, Any]]] = {}
        for ins in g["inserts"]:
            after.setdefault(ins["after"], []).append(ins)
        turns: list[dict[str, Any]] = []
        for t in conv.turns:
            turns.append({"text": t.text, "speaker": t.speaker, "timestamp": t.timestamp,
                          "id": t.dia_id})
            for j, ins in enumerate(after.get(t.dia_id, ()), 1):
                turns.append({"text": f"{ins['speaker']}: {ins['text']}",
                              "speaker": ins["speaker"],
                              "timestamp": t.timestamp + timedelta(milliseconds=j),
                              "id": ins["id"]})
        questions = tuple(
            BenchQuestion(p["id"], p["question"], g["kind"], tuple(p["targets"]),
                          g["kind"] == "never_said",
                          {"group": g["id"], **{k: p[k] for k in ("older", "newer",
                                                                   "bridge_type") if k in p}})
            for p in g["probes"])
        memories.append(BenchMemory(g["id"], tuple(turns), questions))
    return memories


def _rank(ranked: Sequence[str], turn: str) -> int | None:
    try:
        return ranked.index(turn) + 1
    except ValueError:
        return None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def score_records(records: Sequence[Any], engine: bool) -> dict[str, Any]:
    """One method's metrics per kind from its :class:`QuestionRecord` list."""
    by_kind: dict[str, list[Any]] = {k: [] for k in KINDS}
    for r in records:
        by_kind[r.category].append(r)
    out: dict[str, Any] = {}
    ident = by_kind["identifier"]
    if ident:
        ranks = [_rank(r.ranked, r.evidence[0]) for r in ident]
        groups: dict[str, list[int | None]] = {}
        for r, rank in zip(ident, ranks):
            groups.setdefault(r.extra["group"], []).append(rank)
        out["identifier"] = {
            "n": len(ident), "rank1": _mean([float(x == 1) for x in ranks]),
            "mrr": _mean([1.0 / x if x else 0.0 for x in ranks]),
            "groups": {g: {"n": len(v), "rank1": _mean([float(x == 1) for x in v]),
                           "mrr": _mean([1.0 / x if x else 0.0 for x in v])}
                       for g, v in groups.items()}}
    bridge = by_kind["bridge"]
    if bridge:
        ranks = [_rank(r.ranked, r.evidence[0]) for r in bridge]
        found = sorted(x for x in ranks if x)
        types: dict[str, list[int | None]] = {}
        for r, rank in zip(bridge, ranks):
            types.setdefault(r.extra.get("bridge_type", "?"), []).append(rank)
        out["bridge"] = {
            "n": len(bridge), "hit@10": _mean([float(bool(x) and x <= 10) for x in ranks]),
            "mrr": _mean([1.0 / x if x else 0.0 for x in ranks]),
            "median_rank_found": found[len(found) // 2] if found else None,
            "types": {t: _mean([float(bool(x) and x <= 10) for x in v])
                      for t, v in sorted(types.items())}}
    upd = by_kind["update"]
    if upd:
        above, top5 = [], []
        for r in upd:
            new, old = _rank(r.ranked, r.extra["newer"]), _rank(r.ranked, r.extra["older"])
            above.append(float(new is not None and (old is None or new < old)))
            top5.append(float(new is not None and new <= 5))
        out["update"] = {"n": len(upd), "newer_above_older": _mean(above),
                         "newer_top5": _mean(top5)}
    never = by_kind["never_said"]
    if never:
        answerable = [r for k in ("identifier", "bridge", "update") for r in by_kind[k]]
        out["never_said"] = {
            "n": len(never),
            "rejected": _mean([float(bool(r.rejected)) for r in never]) if engine else None,
            "false_refusal": _mean([float(bool(r.rejected)) for r in answerable])
            if engine and answerable else None}
    out["ranks"] = {r.qid: _rank(r.ranked, r.evidence[0]) if r.evidence else None
                    for r in records}
    return out


def run_scored(memories: Sequence[Any], methods: Sequence[str], depth: int, embedder: Any,
               progress: Callable[..., Any] | None, desc: str,
               score: Callable[[Sequence[Any], bool], dict[str, Any]]) -> tuple[Any, dict[str, Any]]:
    """Every method on every question of ``memories`` (ranked ``depth`` deep), one
    progress bar step per memory, then each method's ``score(records, engine)`` with its
    latency percentiles: ``(run state, {method: metrics})``. The loop of the probe sets
    (here and :mod:`.small`)."""
    from .metrics import percentiles
    from .retrieval import CachingEmbedder, run_memories

    emb = embedder if isinstance(embedder, CachingEmbedder) else CachingEmbedder(embedder)
    bar = progress(total=len(memories), desc=desc, unit="memory") if progress else None
    try:
        state = run_memories(memories, methods=methods, ks=(depth,), embedder=emb,
                             on_memory=(lambda _m: bar.update(1)) if bar else None)
    finally:
        if bar is not None:
            bar.close()
    scored = {}
    for m, recs in state.records.items():
        scored[m] = {**score(recs, not is_baseline(m)),
                     "latency_ms": percentiles([r.latency_ms for r in recs])}
    return state, scored


def run_probes(
    locomo: str | Path,
    *,
    probes: str | Path | None = None,
    methods: Sequence[str] = PROBE_METHODS,
    embedder: Any | None = None,
    kinds: Sequence[str] | None = None,
    progress: Callable[..., Any] | None = None,
    keep_records: bool = False,
) -> dict[str, Any]:
    """Run every probe group (of ``kinds``, default all) with every method."""
    from .locomo import load_locomo

    t0 = time.perf_counter()
    data = load_probes(probes)
    if kinds is not None:
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown:
            raise InvalidInputError(f"unknown probe kind(s) {unknown}; choose from {KINDS}")
        data = {**data, "groups": [g for g in data["groups"] if g["kind"] in kinds]}
    wanted = sorted({g["conversation"] for g in data["groups"]})
    ds = load_locomo(locomo, conversations=wanted)
    validate_probes(data, ds)
    memories = build_memories(data, ds)
    state, scored = run_scored(memories, methods, _DEPTH, embedder, progress,
                               "probe memories", score_records)
    out: dict[str, Any] = {
        "probes": str(probes) if probes else f"package data {PROBE_FILE}",
        "version": data["version"],
        "dataset": str(locomo),
        "counts": {k: sum(len(g["probes"]) for g in data["groups"] if g["kind"] == k)
                   for k in KINDS},
        "methods": scored,
    }
    updates = [m for m, g in zip(memories, data["groups"]) if g["kind"] == "update"]
    if updates and "synapse" in methods:  # the same questions asked before and after (as_of)
        from .as_of import run_as_of

        out["as_of"] = run_as_of(updates, embedder, progress=progress)
    out["timing_s"] = {"total": time.perf_counter() - t0, **state.seconds}
    if keep_records:
        out["records"] = state.records
    return out
