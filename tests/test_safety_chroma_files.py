"""Chroma's own files, damaged or of an unexpected version (issue 12, item 6 and the
Chroma pin): flipped bytes in a persisted HNSW index must not crash the process that
opens the memory (Chroma loads the index in native code: SIGSEGV before the fix, in 6 of
6 runs here), and the memory must come back whole; the private-schema access is refused
cleanly outside the tested Chroma range. Run with ``-s`` to see the survival count."""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from synapse_integrations import Synapse
from synapse_integrations.storage import chroma as chroma_mod
from synapse_integrations.storage.chroma import ChromaFiles, ChromaVectors
from synapse_integrations.storage.hnsw import check_index

from _crash_worker import turn_text
from _safety_helpers import HashEmbedder

TESTS = Path(__file__).parent
N_TURNS = 400

_CHILD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    from _safety_helpers import HashEmbedder
    from synapse_integrations import Synapse
    mem = Synapse({path!r}, embedder=HashEmbedder())
    texts = sorted(e["text"] for e in mem.episodes())
    hits = mem.search_vectors(HashEmbedder().embed_query(texts[0]), 3)[0]
    print(json.dumps({{"episodes": len(texts), "ok": mem.verify().ok, "search": len(hits),
                       "first": mem.retrieve(texts[0], k=3).items[0].text == texts[0]}}))
    mem.close()
""")


def _build(path: Path) -> None:
    mem = Synapse(path, embedder=HashEmbedder())
    mem.add_turns([turn_text(n) for n in range(N_TURNS)])
    mem.close()


def _active_index(path: Path) -> Path:
    from synapse_integrations.storage.chroma import collection_name

    folders = ChromaFiles(path / "chroma" / "chroma.sqlite3").vector_segments_by_name(
        [collection_name("default", "active")])
    return next(iter(folders.values()))


def _flip(folder: Path, rng: random.Random, flips: int) -> None:
    """Flip random bits in the used part of data_level0.bin (neighbour lists, vectors,
    labels of the stored elements)."""
    import struct

    count, size = struct.unpack_from("<2Q", (folder / "header.bin").read_bytes(), 20)
    data = bytearray((folder / "data_level0.bin").read_bytes())
    for _ in range(flips):
        i = rng.randrange(count * size)
        data[i] ^= 1 << rng.randrange(8)
    (folder / "data_level0.bin").write_bytes(bytes(data))


def _break_links(folder: Path) -> None:
    """Element 0's level-0 list claims 0xFFFF neighbours (a sure crash for Chroma)."""
    data = bytearray((folder / "data_level0.bin").read_bytes())
    data[0:2] = b"\xff\xff"
    (folder / "data_level0.bin").write_bytes(bytes(data))


@pytest.mark.slow
def test_a_corrupt_hnsw_index_neither_crashes_the_opener_nor_loses_a_turn(tmp_path):
    base = tmp_path / "base"
    _build(base)
    assert check_index(_active_index(base)) is None
    survived, detected = 0, 0
    runs = list(zip(range(6), (256, 64, 64, 16, 16, 4)))
    for seed, flips in runs:
        path = tmp_path / f"run{seed}"
        subprocess.run(["cp", "-r", str(base), str(path)], check=True)
        folder = _active_index(path)
        _flip(folder, random.Random(seed), flips)
        detected += check_index(folder) is not None
        child = subprocess.run([sys.executable, "-c", _CHILD.format(tests=str(TESTS), path=str(path))],
                               capture_output=True, text=True, timeout=300)
        assert child.returncode == 0, (seed, flips, child.returncode, child.stderr[-2000:])
        out = json.loads(child.stdout.strip().splitlines()[-1])
        assert out == {"episodes": N_TURNS, "ok": True, "search": 3, "first": True}, out
        survived += 1
    print(f"\n[hnsw] corrupted runs: {len(runs)}, caller survived {survived}, index rebuilt "
          f"(corruption detected) in {detected}, every turn kept in all")


def test_set_aside_and_rebuild_keeps_every_row(tmp_path):
    _build(tmp_path / "m")
    folder = _active_index(tmp_path / "m")
    _break_links(folder)
    assert check_index(folder) is not None
    broken = ChromaVectors.set_aside_broken_indexes(tmp_path / "m" / "chroma" / "chroma.sqlite3",
                                                    "default")
    assert list(broken) == ["active"] and not folder.exists()  # set aside, not rebuilt yet
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder())  # (a crash in between) rebuilds it
    assert not broken["active"].exists()
    assert len(mem.episodes()) == N_TURNS and mem.verify().ok
    mem.close()


def test_private_schema_access_is_refused_outside_the_tested_chroma_range(tmp_path, monkeypatch, caplog):
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder())
    ids = mem.add_turns(["keep me", "forget me"])
    monkeypatch.setattr(chroma_mod, "chroma_version", lambda: (9, 0, 0))
    with caplog.at_level(logging.ERROR):
        mem.forget([ids[1]])  # still removed from the stores; the log scrub is skipped
    assert "outside the tested range" in caplog.text
    assert ids[1] not in mem.graph and mem.verify().ok
    mem.close()


def test_the_pinned_chroma_range_matches_the_tested_one():
    import tomllib

    deps = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    pin = next(d for d in deps if d.startswith("chromadb"))
    low, high = chroma_mod.TESTED_CHROMA
    assert pin == f"chromadb>={low[0]}.{low[1]},<{high[0]}.{high[1]}", pin
    assert low <= chroma_mod.chroma_version()[:2] < high
