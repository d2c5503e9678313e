"""The supersession set: how often the reconsolidation rule is right (issue 50).

``tests/data/supersession_pairs.jsonl`` holds labelled pairs of real turns of the dev data,
one JSON object a line: ``source`` (``"locomo"`` or ``"longmemeval"``), ``conversation``
(a LoCoMo sample id, or the LongMemEval question whose haystack holds both turns),
``old_id`` and ``new_id`` (turn ids as the benchmarks name them; a LoCoMo update probe's
inserted turns, ``P:upNN:older`` / ``P:upNN:newer``, by the probe file's ids), ``speaker``,
both texts, ``label`` (``true``: the new turn states a new value of the same attribute of
the same subject, so the old one no longer holds), ``why`` and ``split`` (``"tune"`` or
``"held_out"``).

The measurement runs the real mechanism: each conversation is ingested as the benchmarks
ingest it (LoCoMo conversations with their update probes inserted, :mod:`.probes`), with
``reconsolidation`` on, and a pair counts as *predicted* when the memory's version chain
leads from the old turn to the new one (``superseded_by``, followed through intermediate
versions). Per split: ``precision`` (labelled pairs predicted that are true), ``recall``
(true pairs predicted), the pairs behind each error, and ``unlabelled_fired``: every
supersession the rule made on these conversations that is not in the set (to be read and
labelled; precision on the set says nothing about them).

The rule reads no vector, so the offline :class:`~synapse_integrations.embeddings.hashing.HashingEmbedder`
is the default embedder (candidates come from the BM25 index)::

    python -m synapse_integrations.bench.supersession --locomo locomo_dev.json \\
        --longmemeval longmemeval_s_dev.json.gz --out supersession.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError

__all__ = ["PAIRS_FILE", "SPLITS", "format_supersession", "load_pairs", "measure",
           "run_supersession", "score"]

#: The labelled set, in a source checkout.
PAIRS_FILE = Path(__file__).resolve().parents[2] / "tests" / "data" / "supersession_pairs.jsonl"
SPLITS = ("tune", "held_out")
_KEYS = ("source", "conversation", "old_id", "new_id", "speaker", "old_text", "new_text",
         "label", "why", "split")


def load_pairs(path: str | Path = PAIRS_FILE) -> list[dict[str, Any]]:
    """The pairs of a JSONL file, each checked for the keys above."""
    out = []
    for n, line in enumerate(Path(path).read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        missing = [k for k in _KEYS if k not in row]
        if missing or row["source"] not in ("locomo", "longmemeval") \
                or row["split"] not in SPLITS or not isinstance(row["label"], bool):
            raise InvalidInputError(f"{path}:{n}: not a supersession pair (missing {missing})")
        out.append(row)
    return out


def _chain(mem: Any, old: str, limit: int = 50) -> list[str]:
    """The versions that replaced ``old``, in order."""
    out, at = [], old
    for _ in range(limit):
        at = (mem.get(at) or {}).get("superseded_by")
        if not at or at in out:
            break
        out.append(at)
    return out


def measure(memories: Mapping[str, Any], pairs: Sequence[Mapping[str, Any]], *,
            config: Any = None, embedder: Any = None,
            lifecycle: Any = None) -> dict[str, Any]:
    """Ingest each memory (``{conversation: BenchMemory}``) with reconsolidation on and
    say, for every pair of that conversation, whether the old turn's version chain reaches
    the new one. Returns ``{"predicted": {(conversation, old, new): bool}, "fired":
    [(conversation, old, new), ...]}`` (every direct supersession made)."""
    from ..config import SynapseConfig
    from ..embeddings.hashing import HashingEmbedder
    from .retrieval import ingest_memory

    cfg = (config or SynapseConfig()).replace(reconsolidation=True)
    emb = embedder or HashingEmbedder()
    predicted: dict[tuple[str, str, str], bool] = {}
    fired: list[tuple[str, str, str]] = []
    for name, memory in memories.items():
        mem = ingest_memory(memory, cfg, emb, lifecycle=lifecycle)
        try:
            for t in memory.turns:
                by = (mem.get(t["id"]) or {}).get("superseded_by")
                if by:
                    fired.append((name, t["id"], by))
            for p in pairs:
                if p["conversation"] == name:
                    predicted[(name, p["old_id"], p["new_id"])] = p["new_id"] in _chain(mem, p["old_id"])
        finally:
            mem.close()
    return {"predicted": predicted, "fired": fired}


def _pair_row(p: Mapping[str, Any]) -> dict[str, Any]:
    return {k: p[k] for k in ("source", "conversation", "old_id", "new_id", "why")}


def score(pairs: Sequence[Mapping[str, Any]], predicted: Mapping[tuple[str, str, str], bool],
          ) -> dict[str, Any]:
    """Precision and recall of ``predicted`` on ``pairs`` (those measured), with the
    false positives and false negatives."""
    rows = [(p, predicted[(p["conversation"], p["old_id"], p["new_id"])]) for p in pairs
            if (p["conversation"], p["old_id"], p["new_id"]) in predicted]
    tp = sum(1 for p, y in rows if y and p["label"])
    fp = [_pair_row(p) for p, y in rows if y and not p["label"]]
    fn = [_pair_row(p) for p, y in rows if not y and p["label"]]
    pos = sum(1 for p, _ in rows if p["label"])
    return {"n": len(rows), "positives": pos, "negatives": len(rows) - pos, "tp": tp,
            "fp": len(fp), "fn": len(fn),
            "precision": tp / (tp + len(fp)) if tp + len(fp) else None,
            "recall": tp / pos if pos else None,
            "false_positives": fp, "false_negatives": fn}


def _memories(pairs: Sequence[Mapping[str, Any]], locomo: str | Path | None,
              longmemeval: str | Path | None) -> dict[str, Any]:
    from .retrieval import BenchMemory

    wanted = {p["conversation"] for p in pairs}
    out: dict[str, Any] = {}
    if locomo:
        from .locomo import load_locomo
        from .probes import build_memories, load_probes

        ds = load_locomo(locomo)
        data = load_probes()
        have = {c.sample_id for c in ds.conversations}
        groups = {g["conversation"]: g for g in data["groups"]
                  if g["kind"] == "update" and g["conversation"] in have}
        probed = {m.name: m for m in build_memories({**data, "groups": list(groups.values())}, ds)}
        for conv in ds.conversations:
            if conv.sample_id not in wanted:
                continue
            group = groups.get(conv.sample_id)
            out[conv.sample_id] = probed[group["id"]] if group else BenchMemory(
                conv.sample_id, tuple({"text": t.text, "speaker": t.speaker,
                                       "timestamp": t.timestamp, "id": t.dia_id}
                                      for t in conv.turns), ())
    if longmemeval:
        from .longmemeval import load_longmemeval

        for q in load_longmemeval(longmemeval).questions:
            if q.question_id in wanted:
                out[q.question_id] = BenchMemory(q.question_id, q.rows, ())
    return out


def run_supersession(pairs_path: str | Path = PAIRS_FILE, *, locomo: str | Path | None = None,
                     longmemeval: str | Path | None = None, config: Any = None,
                     embedder: Any = None) -> dict[str, Any]:
    """The set measured on the dev data given (the pairs of a source whose file is not
    given, or of a conversation the file lacks, are left out: ``missing_conversations``):
    ``{"pairs", "measured", "splits": {split: score}, "all", "unlabelled_fired"}``."""
    if not locomo and not longmemeval:
        raise InvalidInputError("the supersession set needs --locomo FILE, --longmemeval FILE or both")
    pairs = load_pairs(pairs_path)
    sources = {s for s, f in (("locomo", locomo), ("longmemeval", longmemeval)) if f}
    mine = [p for p in pairs if p["source"] in sources]
    memories = _memories(mine, locomo, longmemeval)
    missing = sorted({p["conversation"] for p in mine} - set(memories))
    mine = [p for p in mine if p["conversation"] in memories]  # another data file: its share
    got = measure(memories, mine, config=config, embedder=embedder)
    labelled = {(p["conversation"], p["old_id"], p["new_id"]) for p in mine}
    text = {}
    for name, m in memories.items():
        text.update({(name, t["id"]): t["text"] for t in m.turns})
    extra = [{"conversation": c, "old_id": o, "new_id": n, "old_text": text.get((c, o), ""),
              "new_text": text.get((c, n), "")}
             for c, o, n in got["fired"] if (c, o, n) not in labelled]
    return {"pairs": str(pairs_path), "sources": sorted(sources), "measured": len(mine),
            "missing_conversations": missing,
            "splits": {s: score([p for p in mine if p["split"] == s], got["predicted"])
                       for s in SPLITS},
            "all": score(mine, got["predicted"]), "fired": len(got["fired"]),
            "unlabelled_fired": extra}


def format_supersession(results: Mapping[str, Any]) -> str:
    """Precision and recall per split, then the errors."""
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    lines = [f"supersession set ({', '.join(results['sources'])}; {results['measured']} pairs): "
             "precision / recall of the reconsolidation rule"]
    for name in (*SPLITS, "all"):
        r = results["splits"].get(name) or results["all"]
        lines.append(f"  {name:<9} precision {pct(r['precision'])}% ({r['tp']} of {r['tp'] + r['fp']}),"
                     f" recall {pct(r['recall'])}% ({r['tp']} of {r['positives']}); "
                     f"{r['positives']} supersessions, {r['negatives']} not")
    for r in results["all"]["false_positives"]:
        lines.append(f"  false positive {r['conversation']} {r['old_id']} -> {r['new_id']}: {r['why']}")
    lines.append(f"  supersessions made outside the set: {len(results['unlabelled_fired'])} "
                 f"(of {results['fired']})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", default=str(PAIRS_FILE))
    ap.add_argument("--locomo", default=None)
    ap.add_argument("--longmemeval", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    results = run_supersession(args.pairs, locomo=args.locomo, longmemeval=args.longmemeval)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(format_supersession(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
