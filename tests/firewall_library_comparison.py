"""Score detect-secrets' plugins and Presidio's pattern recognizers on the firewall corpora,
with the same rules as ``python -m synapse_integrations.firewall`` (not collected by pytest).

This is how the library table in docs/safety.md was made. It needs the libraries, which the
project does not depend on; use a throw-away virtual environment::

    python -m venv /tmp/fweval && /tmp/fweval/bin/pip install detect-secrets presidio-analyzer
    /tmp/fweval/bin/python tests/firewall_library_comparison.py

Presidio's AnalyzerEngine needs a spaCy model that it downloads at run time (there is no
network here), so its recognizers are called one by one without NLP artifacts, which is
what a pattern-only deployment of Presidio would do.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# load evaluate.py on its own: importing the package would pull in the whole engine
_spec = importlib.util.spec_from_file_location(
    "fw_evaluate", ROOT / "synapse_integrations" / "firewall" / "evaluate.py")
ev = importlib.util.module_from_spec(_spec)
sys.modules["fw_evaluate"] = ev
_spec.loader.exec_module(ev)

CATEGORIES = ("api_key", "private_key", "url_password", "credential",
              "email", "phone", "credit_card", "ssn")


def detect_secrets_detector():
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.settings import default_settings

    category = {"KeywordDetector": "credential", "Base64HighEntropyString": "credential",
                "HexHighEntropyString": "credential", "PrivateKeyDetector": "private_key",
                "BasicAuthDetector": "url_password", "IPPublicDetector": "ip_address"}
    with default_settings():
        plugins = [cls() for cls in get_mapping_from_secret_type_to_class().values()]

    def detect(text):
        out = set()
        with default_settings():
            offset = 0
            for line in text.split("\n"):
                for plugin in plugins:
                    cat = category.get(type(plugin).__name__, "api_key")
                    for value in plugin.analyze_string(line):
                        i = line.find(value)
                        while value and i != -1:
                            out.add((cat, offset + i, offset + i + len(value)))
                            i = line.find(value, i + 1)
                offset += len(line) + 1
        return sorted(out, key=lambda f: f[1])
    return detect


def presidio_detector():
    import logging

    logging.disable(logging.CRITICAL)
    from presidio_analyzer.predefined_recognizers import (CreditCardRecognizer, EmailRecognizer,
                                                          PhoneRecognizer, UsSsnRecognizer)
    recognizers = [(EmailRecognizer(), "email"), (PhoneRecognizer(), "phone"),
                   (CreditCardRecognizer(), "credit_card"), (UsSsnRecognizer(), "ssn")]

    def detect(text):
        out = []
        for rec, cat in recognizers:
            for r in rec.analyze(text, rec.supported_entities, None):
                out.append((cat, r.start, r.end))
        return out
    return detect


def main() -> int:
    for name, make, cats in (("detect-secrets 1.5 (all 27 plugins)", detect_secrets_detector,
                              CATEGORIES[:4]),
                             ("presidio-analyzer pattern recognizers", presidio_detector,
                              CATEGORIES[4:])):
        try:
            detect = make()
        except ImportError as exc:
            print(f"{name}: not installed ({exc})", file=sys.stderr)
            continue
        for corpus in ("firewall_corpus.jsonl", "firewall_holdout.jsonl"):
            samples = ev.load_corpus(ROOT / "tests" / "fixtures" / corpus)
            # only the categories the library covers: spans of the others are dropped
            samples = [ev.Sample(s.id, s.text, tuple(sp for sp in s.spans if sp[0] in cats), s.kind)
                       for s in samples if not s.spans or any(sp[0] in cats for sp in s.spans)]
            report = ev.evaluate(samples, detect, cats)
            print(f"\n{name} on {corpus}\n{report.table()}")
        chat = ev.chat_texts(ROOT / "tests" / "fixtures" / "locomo_tiny.json")
        for t in chat:
            detect(t)
        t0 = time.perf_counter()
        for t in chat:
            detect(t)
        print(f"{name}: {(time.perf_counter() - t0) / len(chat) * 1e6:.0f} us per chat turn "
              f"(locomo_tiny, {len(chat)} turns)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
