"""The right to be forgotten: after forget(...) the forgotten sentences are in no file
under the memory folder (Chroma's SQLite database and log, HNSW files, snapshots old and
new, archive), not in the graph, the archive, the BM25 index or any retrieval result; the
rest of the memory is intact and verify() passes. Also when the forget is killed half-way."""

from __future__ import annotations

import os
import random
import shutil
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from synapse_integrations import Synapse
from synapse_integrations.types import Concept, Extraction

from _crash_worker import turn_text
from _safety_helpers import ForkServer, HashEmbedder

T0 = datetime(2024, 2, 1, tzinfo=timezone.utc)
SECRET = "Ana told me her diagnosis is zanzibarquokka syndrome, keep it private."
SECRET_ARCHIVED = "Ana keeps the spare key under the vermillionkestrel flowerpot."
NEEDLES = ("zanzibarquokka", "vermillionkestrel", "diagnosis is", "spare key under")


def scan(root: Path, needles: tuple[str, ...] = NEEDLES) -> list[tuple[str, str]]:
    """Every (file, needle) where a needle's bytes (as written, or case-folded) occur."""
    hits = []
    forms = {n: {n.encode(), n.casefold().encode(), n.upper().encode()} for n in needles}
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder, name)
            data = path.read_bytes()
            for needle, variants in forms.items():
                if any(v in data for v in variants):
                    hits.append((str(path.relative_to(root)), needle))
    return hits


def build(path: Path) -> tuple[Synapse, dict[str, str]]:
    """Filler turns by Sam, two private turns by Ana (one archived), several snapshots."""
    mem = Synapse(path, embedder=HashEmbedder(), snapshot_every=1)
    ids: dict[str, str] = {}
    for n in range(12):
        ids[f"filler{n}"] = mem.add_turn(turn_text(n), speaker="Sam", timestamp=T0 + timedelta(hours=n),
                                         metadata={"topic": "chat"})
    ids["secret"] = mem.add_turn(SECRET, speaker="Ana", timestamp=T0 + timedelta(hours=100),
                                 metadata={"topic": "medical"})
    ids["archived"] = mem.add_turn(SECRET_ARCHIVED, speaker="Ana", timestamp=T0 + timedelta(hours=101),
                                   metadata={"topic": "medical"})
    for n in range(12, 20):
        ids[f"filler{n}"] = mem.add_turn(turn_text(n), speaker="Sam",
                                         timestamp=T0 + timedelta(hours=n), metadata={"topic": "chat"})
    mem.consolidate()
    mem.archive([ids["archived"]])
    mem.save()
    mem.save()
    assert {h[1] for h in scan(path)} >= {"zanzibarquokka", "vermillionkestrel"}  # the test can fail
    assert len(mem._snapshots.versions()) >= 2
    return mem, ids


FORGETS = {
    "ids": lambda mem, ids: mem.forget([ids["secret"], ids["archived"]]),
    "speaker": lambda mem, ids: mem.forget(speaker="Ana"),
    "time_range": lambda mem, ids: mem.forget(since=T0 + timedelta(hours=99),
                                              until=(T0 + timedelta(hours=102)).isoformat()),
    "metadata": lambda mem, ids: mem.forget(where={"topic": "medical"}),
    "everything": lambda mem, ids: mem.forget(everything=True),
}


def _assert_forgotten(mem: Synapse, path: Path, ids: dict[str, str], *, everything: bool,
                      written_after: int = 0) -> None:
    assert scan(path) == []
    for key in ("secret", "archived"):
        assert ids[key] not in mem.graph
        assert ids[key] not in {a["id"] for a in mem.archived()}
    texts = [d["text"] for _, d in mem.graph.nodes(data=True)] + [a["text"] for a in mem.archived()]
    assert not any("zanzibarquokka" in t.casefold() or "vermillionkestrel" in t.casefold() for t in texts)
    assert not any("zanzibarquokka" in t.casefold() for t in mem._state.bm25.documents().values())
    assert mem._state.vectors.active.get([ids["secret"]])[0] == []
    assert mem._state.vectors.archive.get([ids["archived"]])[0] == []
    fillers = [v for k, v in ids.items() if k.startswith("filler")]
    if everything:
        assert len(mem.graph) == written_after and not mem.archived()
        assert mem._state.vectors.active.count() == written_after and mem._state.vectors.archive.count() == 0
        assert scan(path, (turn_text(0), turn_text(19))) == []
    else:
        assert all(f in mem.graph for f in fillers)
        res = mem.retrieve(SECRET, k=30)
        assert not any("zanzibarquokka" in it.text.casefold() for it in res.items)
    report = mem.verify()
    assert report.ok, report.problems
    assert not mem._journal.exists()


@pytest.mark.parametrize("how", sorted(FORGETS))
def test_forget_leaves_no_trace_in_any_file(tmp_path, how):
    path = tmp_path / "mem"
    mem, ids = build(path)
    removed = FORGETS[how](mem, ids)
    assert {ids["secret"], ids["archived"]} <= set(removed)
    assert len(mem._snapshots.versions()) == 1  # older versions, which held the text, are gone
    _assert_forgotten(mem, path, ids, everything=how == "everything")
    mem.add_turn("life goes on after forgetting")  # still writable
    mem.close()
    again = Synapse(path, embedder=HashEmbedder())
    _assert_forgotten(again, path, ids, everything=how == "everything", written_after=1)
    again.close()
    assert scan(path) == []


def test_forget_nothing_matching_changes_nothing_and_bad_calls_are_refused(tmp_path):
    mem, ids = build(tmp_path / "mem")
    before = len(mem.graph)
    assert mem.forget(speaker="nobody") == []
    assert mem.forget(where={"topic": "none"}) == []
    assert len(mem.graph) == before
    for bad in (lambda: mem.forget(), lambda: mem.forget("ep-1"), lambda: mem.forget([1]),
                lambda: mem.forget(speaker=3), lambda: mem.forget(where=["topic"]),
                lambda: mem.forget(since="not a date"), lambda: mem.forget(everything="yes")):
        with pytest.raises((TypeError, ValueError)) as info:
            bad()
        assert type(info.value).__module__ == "synapse_integrations.errors"
    assert len(mem.graph) == before and mem.verify().ok
    mem.close()


class _NamesExtractor:
    """Concepts = the listed names that occur in the window's turns (sources recorded)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def extract(self, turns):
        out = []
        for name in self.names:
            src = tuple(t.id for t in turns if name.lower() in t.text.lower())
            if src:
                out.append(Concept(name, source_ids=src))
        return Extraction(tuple(out))


def test_concepts_go_with_the_text_they_came_from(tmp_path):
    names = ("Dana", "zanzibarquokka clinic", "sourdough", "vermillionkestrel")
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder(), extractor=_NamesExtractor(names))
    # window 1: Dana is in the secret and in kept turns; the clinic only in the secret
    mem.add_turns([
        {"text": "Dana took me to the zanzibarquokka clinic for my results.", "speaker": "Ana"},
        {"text": "Dana baked sourdough again.", "speaker": "Sam"},
        {"text": "The sourdough starter is alive.", "speaker": "Sam"},
        {"text": "Dana wants to learn the violin.", "speaker": "Sam"},
        {"text": "We walked along the river.", "speaker": "Sam"},
    ])
    # window 2: every turn is Ana's, so its concept loses all support
    mem.add_turns([{"text": f"vermillionkestrel note {i}", "speaker": "Ana"} for i in range(5)])
    concepts = {d["text"]: n for n, d in mem.graph.nodes(data=True) if d["kind"] == "concept"}
    assert set(concepts) == set(names)
    removed = mem.forget(speaker="Ana")
    left = {d["text"] for _, d in mem.graph.nodes(data=True) if d["kind"] == "concept"}
    assert left == {"Dana", "sourdough"}
    assert concepts["zanzibarquokka clinic"] in removed and concepts["vermillionkestrel"] in removed
    # what was asked for and what went with it, apart (issue 45: "Forgot 3 memory item(s)"
    # for one id counted the orphaned concepts as memories)
    assert len(removed.memories) == 6 and all(i.startswith("ep-") for i in removed.memories)
    assert set(removed.derived) == {concepts["zanzibarquokka clinic"], concepts["vermillionkestrel"]}
    assert removed.describe().startswith("Forgot 6 memories (")
    assert removed.describe().endswith("; 2 derived concept(s) went with them.")
    assert scan(mem.path) == []
    assert mem.verify().ok
    mem.close()


def test_a_forget_reply_counts_memories_and_derived_concepts_apart(tmp_path):
    """Over REST, and through ``RemoteMemory``, a forget names the memories it erased and,
    apart, the concepts that went with them."""
    from _server_helpers import rest_server

    from synapse_integrations.server.client import RemoteMemory

    names = ("zanzibarquokka clinic",)
    with Synapse(tmp_path / "m", namespace="u", embedder=HashEmbedder(),
                 extractor=_NamesExtractor(names)) as mem:
        mem.add_turns([{"text": "The zanzibarquokka clinic called.", "id": "secret"}]
                      + [{"text": f"We walked along river {i}.", "id": f"w{i}"} for i in range(4)])
        clinic = next(n for n, d in mem.graph.nodes(data=True) if d["kind"] == "concept")
    with rest_server(tmp_path / "m", embedder=HashEmbedder()) as srv:
        import httpx
        reply = httpx.post(f"{srv.url}/v1/namespaces/u/forget", json={"ids": ["secret"]}).json()
        assert reply["removed"] == ["secret", clinic] or set(reply["removed"]) == {"secret", clinic}
        assert reply["memories"] == ["secret"] and reply["derived"] == [clinic]
        assert reply["message"] == "Forgot 1 memory (secret); 1 derived concept(s) went with it."
        with RemoteMemory(srv.url, "u") as remote:
            gone = remote.forget(ids=["w0"])
            assert list(gone) == ["w0"] and gone.memories == ("w0",) and gone.derived == ()


def test_forget_killed_half_way_is_finished_on_next_open(tmp_path):
    """SIGKILL a process at each phase of forget(speaker=...): journal write, removal from
    the stores, the new snapshot and the deletion of older ones, Chroma scrub. The next
    open finishes the forget: the text is in no file and everything else is there."""
    template = tmp_path / "template"
    mem, ids = build(template)
    mem.close()
    keep = {k: v for k, v in ids.items() if k.startswith("filler")}
    rng = random.Random(7)
    server = ForkServer()
    phases = ("journal", "apply", "apply", "finish", "finish", "scrub", "scrub")
    interrupted = 0
    try:
        for r, phase in enumerate(phases):
            path = tmp_path / f"round-{r}"
            shutil.copytree(template, path)
            log = tmp_path / f"round-{r}.log"
            pid = server.forget(path, log, "Ana", fsync_delay=0.01)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                lines = log.read_text().splitlines() if log.exists() else []
                assert not [x for x in lines if x.startswith("ERROR")], lines
                if f"BEGIN {phase}" in lines or "DONE" in lines:
                    time.sleep(rng.uniform(0.0, 0.02))
                    break
                time.sleep(0.0005)
            server.kill(pid)
            lines = log.read_text().splitlines()
            interrupted += "DONE" not in lines
            again = Synapse(path, embedder=HashEmbedder())
            if "END journal" not in lines and ids["secret"] in again.graph:
                # killed before the forget was recorded: it did not happen at all (all or
                # nothing: both of Ana's turns are still there), and asking again does it
                assert again.verify().ok
                assert ids["archived"] in {a["id"] for a in again.archived()}
                again.forget(speaker="Ana")
            _assert_forgotten(again, path, ids, everything=False)
            assert all(again.get(v)["text"] for v in keep.values())
            again.close()
            assert scan(path) == []
    finally:
        server.close()
    print(f"\n[forget-crash] kills={len(phases)} interrupted_mid_forget={interrupted}")
    assert interrupted >= 4
