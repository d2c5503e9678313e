"""Chroma's own files, damaged or of an unexpected version (issue 12, item 6 and the
Chroma pin): flipped bytes in a persisted HNSW index must not crash the process that
opens the memory (Chroma loads the index in native code: SIGSEGV before the fix, in 6 of
6 runs here), and the memory must come back whole; the private-schema access is refused
cleanly outside the tested Chroma range. Run with ``-s`` to see the survival count."""

from __future__ import annotations

import json
import logging
import random
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from synapse_integrations import Synapse
from synapse_integrations.storage import chroma as chroma_mod
from synapse_integrations.storage.chroma import ChromaFiles
from synapse_integrations.storage.hnsw import check_index, zero_hnsw_slack
from synapse_integrations.storage.vectors import ChromaVectors

from _crash_worker import turn_text
from _safety_helpers import HashEmbedder

TESTS = Path(__file__).parents[1]
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


def _index_folder(path: Path, *, max_el: int, count: int, size: int, lengths: int) -> None:
    """A persisted HNSW folder's files as hnswlib lays them out (header fields that
    zero_hnsw_slack reads), the unused slots filled with a secret."""
    path.mkdir()
    (path / "header.bin").write_bytes(struct.pack("<I4Q", 1, 0, max_el, count, size).ljust(100, b"\0"))
    secret = b"zanzibarquokka"
    used = bytes(range(1, 9)) * (count * size // 8)
    (path / "data_level0.bin").write_bytes(used + (secret * max_el)[:(max_el - count) * size])
    norms = struct.pack(f"<{count}f", *([1.0] * count))
    (path / "length.bin").write_bytes(norms + (secret * lengths)[:(lengths - count) * 4])


def test_index_slack_is_zeroed_in_data_and_lengths_and_used_slots_are_kept(tmp_path):
    """hnswlib writes its whole allocation: the slots past the element count hold stale heap
    bytes (the text of recent writes, forgotten ones included), in data_level0.bin and in
    Chroma's length.bin (one float per element) alike; both tails are zeroed, the used
    slots untouched. A length.bin of an unexpected size is left alone."""
    folder = tmp_path / "seg"
    _index_folder(folder, max_el=10, count=3, size=16, lengths=10)
    assert zero_hnsw_slack(folder) == 7 * 16 + 7 * 4
    data, lengths = (folder / "data_level0.bin").read_bytes(), (folder / "length.bin").read_bytes()
    assert data[:48] == bytes(range(1, 9)) * 6 and data[48:] == bytes(7 * 16)
    assert struct.unpack("<3f", lengths[:12]) == (1.0, 1.0, 1.0) and lengths[12:] == bytes(28)
    odd = tmp_path / "odd"
    _index_folder(odd, max_el=10, count=3, size=16, lengths=12)  # more lengths than slots
    assert zero_hnsw_slack(odd) == 7 * 16
    assert b"zanzibarquokka" in (odd / "length.bin").read_bytes()


def test_a_closed_memory_leaves_no_stale_bytes_past_the_element_count(tmp_path):
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder())
    mem.add_turns([turn_text(i) for i in range(40)])
    folders = mem._state.vectors.segment_folders()
    mem.close()
    seen = 0
    for folder in folders:
        if not (folder / "header.bin").exists():
            continue
        count = struct.unpack_from("<I4Q", (folder / "header.bin").read_bytes(), 0)[3]
        lengths = folder / "length.bin"
        if lengths.exists():
            assert lengths.read_bytes()[count * 4:].strip(b"\0") == b""
            seen += 1
    assert seen, "the memory persisted no HNSW index to check"
