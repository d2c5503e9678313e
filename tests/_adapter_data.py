"""Shared test data: the packaged demo conversation as engine turns (adapter tests), and
a short ski/vet/cat/billing conversation the retrieval-model tests build memories from."""

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


#: Ten short turns with a few shared names (Whistler, Guelph, Pixel, billing): the
#: retrieval-model tests (feedback, spikes) take all of them or the first six.
MODEL_TURNS = [
    "Sam: I went skiing in Whistler with Dana last winter.",
    "Dana: The ski lift at Whistler broke down on our second day.",
    "Sam: We stayed in a small cabin near the Whistler village.",
    "Dana: My sister is studying veterinary medicine in Guelph.",
    "Sam: Guelph has a great vet school, she must be thrilled.",
    "Dana: I adopted a grey cat named Pixel from the shelter.",
    "Sam: Pixel the cat keeps knocking my coffee off the desk.",
    "Dana: Our team shipped the billing service on Friday.",
    "Sam: The billing service release had a nasty rounding bug.",
    "Dana: I am learning to bake sourdough bread on weekends.",
]
