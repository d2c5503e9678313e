"""``python -m synapse_integrations.firewall``: precision and recall per category on the
labelled corpus, and the cost of screening one turn (run from the repository root)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .evaluate import DEFAULT_CORPUS, chat_texts, evaluate_firewall, load_corpus, time_per_turn


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m synapse_integrations.firewall",
                                 description=__doc__)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                    help=f"JSON Lines corpus (default: {DEFAULT_CORPUS})")
    ap.add_argument("--details", action="store_true",
                    help="list the ids of missed spans and false positives")
    ap.add_argument("--no-timing", action="store_true", help="skip the timing")
    args = ap.parse_args(argv)
    if not args.corpus.is_file():
        print(f"corpus not found: {args.corpus} (run from the repository root or pass --corpus)",
              file=sys.stderr)
        return 2
    samples = load_corpus(args.corpus)
    report = evaluate_firewall(samples)
    print(report.table())
    if args.details:
        for cat, s in report.scores.items():
            if s.misses or s.false_positives:
                print(f"\n{cat}: missed {s.misses or '-'}; false positives {s.false_positives or '-'}")
    if not args.no_timing:
        from . import Firewall, FirewallConfig

        sets = [("corpus texts", [s.text for s in samples])]
        chat_path = args.corpus.parent / "locomo_tiny.json"
        if chat_path.is_file():
            chat = chat_texts(chat_path)
            sets.insert(0, ("chat turns (locomo_tiny)", chat))
            sets.insert(1, ("chat, 2 000-character turns", _long_turns(chat)))
        for label, cfg in (("default config (secrets redacted, personal data allowed)",
                            FirewallConfig()),
                           ("every category on (pii='redact')", FirewallConfig(pii="redact"))):
            print(f"\nper-turn cost of Firewall.scan_text, {label}, best of 5 passes:")
            for name, texts in sets:
                t = time_per_turn(texts, Firewall(cfg))
                print(f"  {name:28s} {t['texts']:4d} texts, {t['mean_chars']:5.0f} chars avg: "
                      f"mean {t['mean_us']:7.1f} us, median {t['median_us']:7.1f} us, "
                      f"max {t['max_us']:8.1f} us")
    return 0


def _long_turns(chat: list[str], size: int = 2000) -> list[str]:
    text = " ".join(chat)
    while len(text) < size * 10:
        text = text + " " + text
    return [text[i:i + size] for i in range(0, size * 10, size)]


if __name__ == "__main__":
    raise SystemExit(main())
