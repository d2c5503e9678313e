"""Measure the firewall on a labelled corpus: precision and recall per category, and the
cost of screening one turn.

The corpus is JSON Lines, one sample a line::

    {"id": "credential-016", "text": "password=\\"correct horse battery staple\\"",
     "spans": [{"category": "credential", "value": "correct horse battery staple"}]}

``spans`` lists every secret or piece of personal data in ``text``: its category and the
exact substring that must be removed (it must occur exactly once in ``text``, or give
``"start"`` to say which occurrence). A sample with no spans is a *negative*: nothing in it
may be touched. The project's corpus is ``tests/fixtures/firewall_corpus.jsonl``.

Scoring (every category is switched to ``"redact"`` for the measurement):

- a labelled span counts as **found** when findings of its own category cover every one of
  its characters (the value is gone from the stored text); otherwise it is a miss;
- a finding counts as **correct** when it lies inside the labelled spans of its category; a
  finding that touches unlabelled text (a near miss, a neighbouring word, a key name) or has
  the wrong category is a false positive.

recall = found / labelled spans, precision = correct findings / findings, per category.

Run ``python -m synapse_integrations.firewall`` from the repository root to print the table.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_CORPUS = Path("tests") / "fixtures" / "firewall_corpus.jsonl"


@dataclass(frozen=True)
class Sample:
    """One labelled text: ``spans`` are ``(category, start, end)``; none for a negative."""

    id: str
    text: str
    spans: tuple[tuple[str, int, int], ...]
    kind: str = ""


@dataclass
class CategoryScore:
    """Counts for one category."""

    spans: int = 0
    found: int = 0
    findings: int = 0
    correct: int = 0
    misses: list[str] = field(default_factory=list)            # sample ids
    false_positives: list[str] = field(default_factory=list)   # sample ids

    @property
    def recall(self) -> float:
        return self.found / self.spans if self.spans else 1.0

    @property
    def precision(self) -> float:
        return self.correct / self.findings if self.findings else 1.0


@dataclass
class Report:
    """Scores per category, and how many samples of each kind were scored."""

    scores: dict[str, CategoryScore]
    positives: int
    negatives: int
    negatives_touched: list[str]

    def table(self) -> str:
        """A Markdown table: category, spans, recall, findings, precision."""
        rows = ["| category | labelled spans | found | recall | findings | correct | precision |",
                "|---|---:|---:|---:|---:|---:|---:|"]
        for cat, s in self.scores.items():
            rows.append(f"| `{cat}` | {s.spans} | {s.found} | {s.recall:.3f} | {s.findings} | "
                        f"{s.correct} | {s.precision:.3f} |")
        tot = CategoryScore(spans=sum(s.spans for s in self.scores.values()),
                            found=sum(s.found for s in self.scores.values()),
                            findings=sum(s.findings for s in self.scores.values()),
                            correct=sum(s.correct for s in self.scores.values()))
        rows.append(f"| all | {tot.spans} | {tot.found} | {tot.recall:.3f} | {tot.findings} | "
                    f"{tot.correct} | {tot.precision:.3f} |")
        rows.append("")
        rows.append(f"{self.positives} samples with spans, {self.negatives} negatives "
                    f"({len(self.negatives_touched)} touched)")
        return "\n".join(rows)


def load_corpus(path: str | Path = DEFAULT_CORPUS) -> list[Sample]:
    """Read a JSON Lines corpus; every span's value must be found in its text."""
    samples: list[Sample] = []
    seen: set[str] = set()
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            rec = json.loads(line)
            sid, text = rec["id"], rec["text"]
            if sid in seen:
                raise ValueError(f"{path}:{lineno}: duplicate id {sid!r}")
            seen.add(sid)
            spans = []
            for sp in rec.get("spans", ()):
                value = sp["value"]
                if "start" in sp:
                    start = sp["start"]
                    if text[start:start + len(value)] != value:
                        raise ValueError(f"{path}:{lineno}: span {value!r} is not at {start}")
                else:
                    if text.count(value) != 1:
                        raise ValueError(f"{path}:{lineno}: span {value!r} occurs "
                                         f"{text.count(value)} times in {sid}; give 'start'")
                    start = text.index(value)
                spans.append((sp["category"], start, start + len(value)))
            samples.append(Sample(sid, text, tuple(sorted(spans, key=lambda s: s[1])),
                                  rec.get("kind", "")))
    return samples


def _covered(intervals: Iterable[tuple[int, int]], start: int, end: int) -> bool:
    pos = start
    for s, e in sorted(intervals):
        if s > pos:
            break
        pos = max(pos, e)
        if pos >= end:
            return True
    return pos >= end


def evaluate(samples: Sequence[Sample], detect: Callable[[str], Iterable[tuple[str, int, int]]],
             categories: Sequence[str]) -> Report:
    """Score ``detect(text) -> [(category, start, end), ...]`` on ``samples``."""
    scores = {c: CategoryScore() for c in categories}
    negatives_touched: list[str] = []
    positives = negatives = 0
    for sample in samples:
        found = list(detect(sample.text))
        if sample.spans:
            positives += 1
        else:
            negatives += 1
            if found:
                negatives_touched.append(sample.id)
        for cat, s, e in sample.spans:
            sc = scores.setdefault(cat, CategoryScore())
            sc.spans += 1
            if _covered([(fs, fe) for fc, fs, fe in found if fc == cat and fs < e and s < fe], s, e):
                sc.found += 1
            else:
                sc.misses.append(sample.id)
        for cat, s, e in found:
            sc = scores.setdefault(cat, CategoryScore())
            sc.findings += 1
            gold = [(gs, ge) for gc, gs, ge in sample.spans if gc == cat]
            if gold and _covered(gold, s, e):
                sc.correct += 1
            else:
                sc.false_positives.append(sample.id)
    return Report(scores, positives, negatives, negatives_touched)


def evaluate_firewall(samples: Sequence[Sample] | None = None, firewall=None) -> Report:
    """Score a :class:`Firewall` (default: every category redacted) on the corpus."""
    from . import CATEGORIES, Firewall, FirewallConfig

    if samples is None:
        samples = load_corpus()
    fw = firewall or Firewall(FirewallConfig(secrets="redact", pii="redact"))
    return evaluate(samples, lambda t: [(f.category, f.start, f.end) for f in fw.detect(t)],
                    CATEGORIES)


def time_per_turn(texts: Sequence[str], firewall=None, *, rounds: int = 5) -> dict[str, float]:
    """Mean and median microseconds of ``Firewall.check_text`` per text (best of ``rounds``
    passes over ``texts``, after one warm-up pass)."""
    from . import Firewall, FirewallConfig

    fw = firewall or Firewall(FirewallConfig())
    for t in texts:
        fw.scan_text(t)
    best_mean = float("inf")
    per_text: list[float] = []
    for _ in range(rounds):
        times = []
        for t in texts:
            t0 = time.perf_counter()
            fw.scan_text(t)
            times.append(time.perf_counter() - t0)
        mean = sum(times) / len(times)
        if mean < best_mean:
            best_mean, per_text = mean, times
    return {"texts": len(texts), "mean_us": best_mean * 1e6,
            "median_us": statistics.median(per_text) * 1e6, "max_us": max(per_text) * 1e6,
            "mean_chars": sum(map(len, texts)) / len(texts)}


def chat_texts(path: str | Path = Path("tests") / "fixtures" / "locomo_tiny.json") -> list[str]:
    """The turns of the small LoCoMo-style conversation fixture (typical chat text)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for conv in data:
        for key, turns in conv["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                out.extend(t["text"] for t in turns)
    return out
