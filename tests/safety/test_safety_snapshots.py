"""Snapshot files are data: a crafted, truncated or tampered snapshot never executes code;
it fails with a clear SnapshotError, or the memory falls back to an older good version
with a warning and re-attaches what is newer from Chroma (nothing dropped)."""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
from pathlib import Path

import pytest

from synapse_integrations import Synapse
from synapse_integrations.errors import SnapshotError, StorageError
from synapse_integrations.storage.snapshots import SnapshotStore

from _crash_worker import turn_text
from _safety_helpers import HashEmbedder

MARKER = "pwned-by-snapshot"


class _Evil:
    """Unpickling this would create a marker file: proof that code ran."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return (Path.touch, (Path(self.target),))


def _memory_with_versions(path: Path) -> tuple[list[str], SnapshotStore]:
    mem = Synapse(path, embedder=HashEmbedder())
    ids = mem.add_turns([turn_text(n) for n in range(6)])
    mem.save()                                         # older good version
    ids += mem.add_turns([turn_text(n) for n in range(6, 12)])
    mem.close()                                        # newest version
    store = mem._snapshots
    assert len(store.versions()) >= 2
    return ids, store


def _rewrite(folder: Path, name: str, data: bytes, *, fix_checksum: bool) -> None:
    (folder / name).write_bytes(data)
    if fix_checksum:
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["files"][name] = hashlib.sha256(data).hexdigest()
        (folder / "manifest.json").write_text(json.dumps(manifest))


def _tamper(how: str, folder: Path, tmp_path: Path) -> None:
    marker = str(tmp_path / MARKER)
    if how == "pickle_instead_of_json":
        _rewrite(folder, "graph.json", pickle.dumps(_Evil(marker)), fix_checksum=True)
    elif how == "truncated":
        data = (folder / "graph.json").read_bytes()
        (folder / "graph.json").write_bytes(data[: len(data) // 2])
    elif how == "truncated_checksum_fixed":
        data = (folder / "graph.json").read_bytes()
        _rewrite(folder, "graph.json", data[: len(data) // 2], fix_checksum=True)
    elif how == "manifest_garbage":
        (folder / "manifest.json").write_bytes(b"\x80\x04\x95 not json at all")
    elif how == "manifest_path_traversal":
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["files"]["../../../../etc/passwd"] = "0" * 64
        (folder / "manifest.json").write_text(json.dumps(manifest))
    elif how == "schema_from_the_future":
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["schema_version"] = 99
        (folder / "manifest.json").write_text(json.dumps(manifest))
    elif how == "json_with_code_like_values":
        graph = json.loads((folder / "graph.json").read_text())
        graph["graph"]["nodes"][0]["text"] = {"__reduce__": ["os.system", f"touch {marker}"]}
        graph["graph"]["nodes"][0]["seq"] = "__import__('os').system('touch x')"
        _rewrite(folder, "graph.json", json.dumps(graph).encode(), fix_checksum=True)
    elif how == "bad_edge_weight":
        graph = json.loads((folder / "graph.json").read_text())
        graph["graph"]["edges"][0]["weight"] = "NaN"
        _rewrite(folder, "graph.json", json.dumps(graph).encode(), fix_checksum=True)
    elif how == "wrong_type_everywhere":
        _rewrite(folder, "graph.json", b"[1, 2, 3]", fix_checksum=True)
    elif how == "state_malformed":
        _rewrite(folder, "state.json", b'{"pending": "not a list", "windows": true}', fix_checksum=True)
    elif how == "missing_file":
        (folder / "graph.json").unlink()
    else:  # pragma: no cover
        raise AssertionError(how)


TAMPERS = ["pickle_instead_of_json", "truncated", "truncated_checksum_fixed", "manifest_garbage",
           "manifest_path_traversal", "schema_from_the_future", "json_with_code_like_values",
           "bad_edge_weight", "wrong_type_everywhere", "state_malformed", "missing_file"]


@pytest.mark.parametrize("how", TAMPERS)
def test_bad_newest_snapshot_falls_back_and_loses_nothing(tmp_path, how, caplog):
    path = tmp_path / "mem"
    ids, store = _memory_with_versions(path)
    newest = store.folder(store.versions()[-1])
    _tamper(how, newest, tmp_path)
    with caplog.at_level(logging.WARNING):
        mem = Synapse(path, embedder=HashEmbedder())
    warnings = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert "skipping unreadable snapshot" in warnings and "loaded older snapshot" in warnings
    assert not (tmp_path / MARKER).exists()
    # the turns newer than the older snapshot are still in Chroma: re-attached, none lost
    assert mem.verify().ok
    assert [mem.get(i)["text"] for i in ids] == [turn_text(n) for n in range(12)]
    mem.close()


@pytest.mark.parametrize("how", ["pickle_instead_of_json", "truncated", "manifest_garbage",
                                 "schema_from_the_future", "json_with_code_like_values"])
def test_no_good_snapshot_is_a_clear_error(tmp_path, how):
    path = tmp_path / "mem"
    ids, store = _memory_with_versions(path)
    for v in store.versions():
        _tamper(how, store.folder(v), tmp_path)
    with pytest.raises(SnapshotError) as info:
        Synapse(path, embedder=HashEmbedder())
    msg = str(info.value)
    assert "no readable snapshot" in msg and "move" in msg and "aside" in msg
    assert isinstance(info.value, StorageError)
    assert not (tmp_path / MARKER).exists()
    # the advice in the message works: moving the snapshots aside rebuilds from Chroma
    store.root.rename(store.root.with_name("snapshots-bad"))
    mem = Synapse(path, embedder=HashEmbedder())
    assert mem.verify().ok and sorted(mem.graph.nodes) == sorted(ids)
    mem.close()


def test_snapshot_store_writes_json_only_and_keeps_n_versions(tmp_path):
    store = SnapshotStore(tmp_path / "s", keep=3)
    for i in range(6):
        store.save({"graph": {"i": i}}, meta={"note": "x"})
    assert store.versions() == [4, 5, 6]
    folder = store.folder(6)
    for f in folder.iterdir():
        json.loads(f.read_text("utf-8"))  # every file is plain JSON
    assert (tmp_path / "s" / "CURRENT").read_text().strip() == "v000006"
    with pytest.raises(SnapshotError, match="bad snapshot file name"):
        store.save({"../escape": {}}, meta={})
    assert not (tmp_path / "escape.json").exists()


def test_config_fields_from_a_newer_version_are_ignored_with_a_warning(tmp_path, caplog):
    path = tmp_path / "mem"
    ids, store = _memory_with_versions(path)
    for v in store.versions():
        folder = store.folder(v)
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["config"]["a_field_from_the_future"] = 1
        (folder / "manifest.json").write_text(json.dumps(manifest))
    with caplog.at_level(logging.WARNING):
        mem = Synapse(path, embedder=HashEmbedder())
    assert "a_field_from_the_future" in caplog.text and "skipping unreadable" not in caplog.text
    episodes = [n for n, d in mem.graph.nodes(data=True) if d["kind"] == "episode"]
    assert mem.verify().ok and sorted(episodes) == sorted(ids)
    mem.close()


def test_a_config_saved_before_abstraction_scope_existed_loads_as_window_scope(tmp_path):
    """Memories written before the field existed linked concepts to the whole window (or
    to the mentioning turns when ``extra`` asked for it); loading one keeps its rule."""
    path = tmp_path / "mem"
    _, store = _memory_with_versions(path)
    for extra, expected in (({}, "window"), ({"abstraction_scope": "mentions"}, "mentions")):
        for v in store.versions():
            folder = store.folder(v)
            manifest = json.loads((folder / "manifest.json").read_text())
            manifest["config"].pop("abstraction_scope", None)
            manifest["config"]["extra"] = extra
            (folder / "manifest.json").write_text(json.dumps(manifest))
        with Synapse(path, embedder=HashEmbedder()) as mem:
            assert mem.config.abstraction_scope == expected
