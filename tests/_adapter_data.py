"""Shared test data for the adapter tests: the packaged demo conversation as engine turns."""

from __future__ import annotations

import json
from importlib.resources import files

ANSWERABLE = "Where did Sam go skiing?"
UNANSWERABLE = "quantum chromodynamics on the lattice"  # rejected by the gate on the demo data


def demo_turns(limit: int | None = None) -> list[dict]:
    data = json.loads(files("synapse_integrations").joinpath("data/demo_conversation.json").read_text())
    turns = [{"text": f"{t['speaker']}: {t['text']}", "speaker": t["speaker"], "timestamp": s["datetime"]}
             for s in data["sessions"] for t in s["turns"]]
    return turns[:limit] if limit else turns
