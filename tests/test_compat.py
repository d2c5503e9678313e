"""Memories written by earlier versions still open, unchanged, and answer the same."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from synapse_integrations import Synapse

from _safety_helpers import HashEmbedder

FIXTURE = Path(__file__).parent / "fixtures" / "memory-0.1.0"


def test_a_memory_written_by_0_1_0_before_the_redesign_loads_and_retrieves_the_same(tmp_path):
    """The folder was written by the engine of commit 9c402af (before the module split)
    with this test suite's HashEmbedder; its snapshot config has no ``model`` field."""
    path = tmp_path / "m"
    shutil.copytree(FIXTURE, path, ignore=shutil.ignore_patterns("expected.json"))
    expected = json.loads((FIXTURE / "expected.json").read_text())
    manifest = next(path.rglob("manifest.json"))
    assert "model" not in json.loads(manifest.read_text())["config"]
    with Synapse.load(path, namespace="legacy", embedder=HashEmbedder()) as mem:
        assert mem.load_report.ok and not mem.load_report.actions
        assert mem.verify().ok
        assert mem.stats() == expected["stats"]
        assert mem.config.model == "synapse"
        for query, ids in expected["retrieve"].items():
            # 0.1.0 returned concept nodes too and had no distinctive-evidence term, no
            # floor under the dense anchors and no discount of what a turn asks; asked for
            # both kinds with those off, the ranking is the same
            both = mem.retrieve(query, k=8, kinds=("episode", "concept"),
                                config=mem.config.replace(weight_distinct=0.0,
                                                          anchor_similarity_ratio=0.0,
                                                          question_weight=1.0))
            assert [it.id for it in both.items] == ids
        assert [a["id"] for a in mem.archived()] == ["t3"]
