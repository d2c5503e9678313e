"""Precision and recall of the write firewall, per category, on the labelled corpora in
tests/fixtures/ (``python -m synapse_integrations.firewall`` prints the same table).

- ``firewall_corpus.jsonl``: the development corpus (195 texts with 201 labelled spans,
  217 near-miss negatives); the detectors were tuned on it.
- ``firewall_holdout.jsonl``: 90 texts with spans and 70 negatives written after the
  detectors were first frozen; its first measurement is in docs/safety.md, and it now holds
  the misses we chose to leave (a password with no keyword beside it, a numeric passcode in
  prose, an e-mail address spelled "dana (at) example (dot) org").

The thresholds are what the firewall achieves, not targets: a change that loses recall or
precision in any category fails here. Key-like values in the fixtures are JSON-escaped
(``s\\u006b-...``) so that secret scanners do not mistake the files for leaks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from synapse_integrations.firewall import CATEGORIES, Firewall, FirewallConfig
from synapse_integrations.firewall.evaluate import (evaluate_firewall, load_corpus,
                                                    time_per_turn)

FIXTURES = Path(__file__).parents[1] / "fixtures"
CORPUS = load_corpus(FIXTURES / "firewall_corpus.jsonl")
HOLDOUT = load_corpus(FIXTURES / "firewall_holdout.jsonl")

# (min recall, min precision) per category, as measured
CORPUS_FLOOR = {cat: (1.0, 1.0) for cat in CATEGORIES}
HOLDOUT_FLOOR = {cat: (1.0, 1.0) for cat in CATEGORIES} | {
    "credential": (0.90, 1.0),   # 20 of 22: "creds: admin / S3cure!Pass", "passcode is 482910"
    "email": (0.90, 1.0),        # 10 of 11: "dana (at) example (dot) org"
}


def test_corpus_is_large_and_covers_every_category():
    positives = [s for s in CORPUS if s.spans]
    negatives = [s for s in CORPUS if not s.spans]
    assert len(positives) >= 150 and len(negatives) >= 150
    per_cat = {c: sum(1 for s in CORPUS for sp in s.spans if sp[0] == c) for c in CATEGORIES}
    assert min(per_cat.values()) >= 9, per_cat
    kinds = {s.kind for s in negatives}
    assert {"version", "date_time", "order_number", "isbn", "ip", "hash", "uuid", "price",
            "password_prose", "secret_prose", "code", "math", "long_number"} <= kinds


@pytest.mark.parametrize("name,samples,floor", [("corpus", CORPUS, CORPUS_FLOOR),
                                                ("holdout", HOLDOUT, HOLDOUT_FLOOR)])
def test_precision_and_recall_per_category(name, samples, floor):
    report = evaluate_firewall(samples)
    print(f"\n{name}\n{report.table()}")
    failures = []
    for cat in CATEGORIES:
        score = report.scores[cat]
        min_recall, min_precision = floor[cat]
        if score.recall < min_recall:
            failures.append(f"{cat}: recall {score.recall:.3f} < {min_recall} (missed {score.misses})")
        if score.precision < min_precision:
            failures.append(f"{cat}: precision {score.precision:.3f} < {min_precision} "
                            f"(false positives in {score.false_positives})")
    assert not failures, "\n".join(failures)


def test_no_negative_is_touched_even_with_everything_on():
    fw = Firewall(FirewallConfig(secrets="redact", pii="redact"))
    touched = [(s.id, s.text) for s in CORPUS + HOLDOUT
               if not s.spans and fw.scan_text(s.text).text != s.text]
    assert not touched


def test_redacted_text_keeps_everything_around_the_spans():
    fw = Firewall(FirewallConfig(secrets="redact", pii="redact"))
    for s in CORPUS:
        if not s.spans or len({c for c, _, _ in s.spans}) != len(s.spans):
            continue
        expected, pos = [], 0
        for cat, start, end in s.spans:
            expected += [s.text[pos:start], f"[REDACTED:{cat}]"]
            pos = end
        expected.append(s.text[pos:])
        assert fw.scan_text(s.text).text == "".join(expected), s.id


def test_screening_a_turn_is_cheap():
    # typical chat turns cost ~10 us here; the bound only catches a gross regression
    chat = [s.text for s in CORPUS if not s.spans]
    t = time_per_turn(chat, Firewall(FirewallConfig(pii="redact")), rounds=3)
    assert t["mean_us"] < 1000, t
