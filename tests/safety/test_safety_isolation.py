"""Tenant isolation: namespaces never see each other (engine, adapters, pool), and hostile
namespace strings give a clear error or a safely encoded name, never a file outside the
memory folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from synapse_integrations import Synapse
from synapse_integrations._adapter_utils import EnginePool, namespace_from_configurable
from synapse_integrations.errors import NamespaceError, NodeNotFoundError

from _safety_helpers import HashEmbedder

SECRET_A = "Tenant A's launch code is aardvarkpelican seven."
PUBLIC_B = "Tenant B is planning a picnic on Sunday."


def _all_files(root: Path) -> set[Path]:
    return {Path(d, f) for d, _, files in os.walk(root) for f in files} | \
        {Path(d, x) for d, dirs, _ in os.walk(root) for x in dirs}


@pytest.fixture
def two_tenants(tmp_path):
    emb = HashEmbedder()
    a = Synapse(tmp_path / "mem", namespace="tenant-a", embedder=emb)
    b = Synapse(tmp_path / "mem", namespace="tenant-b", embedder=emb)
    ids_a = a.add_turns([SECRET_A] + [f"tenant a filler {i}" for i in range(6)])
    ids_b = b.add_turns([PUBLIC_B] + [f"tenant b filler {i}" for i in range(6)])
    yield a, b, ids_a, ids_b
    a.close()
    b.close()


def test_engine_namespaces_cannot_read_each_other(two_tenants):
    a, b, ids_a, ids_b = two_tenants
    emb = HashEmbedder()
    for res in (b.retrieve(SECRET_A, k=30), b.retrieve("aardvarkpelican launch code", k=30)):
        assert not {it.id for it in res.items} & set(ids_a)
        assert not any("aardvarkpelican" in it.text for it in res.items)
    assert not set(b.search_vectors(emb.embed_query(SECRET_A), 50)[0]) & set(ids_a)
    with pytest.raises(NodeNotFoundError):
        b.get(ids_a[0])
    with pytest.raises(NodeNotFoundError):
        b.archive([ids_a[0]])
    assert b.forget(ids_a) == []  # ids of another tenant are not found, so nothing happens
    assert b.forget(everything=True)  # wipes B only
    assert a.get(ids_a[0])["text"] == SECRET_A and a.verify().ok
    assert len(b.graph) == 0 and b.verify().ok
    assert {it.id for it in a.retrieve(SECRET_A, k=5).items} & set(ids_a)


def test_adapters_are_bound_to_their_engine_namespace(two_tenants):
    a, b, ids_a, ids_b = two_tenants
    from synapse_integrations.langchain import SynapseRetriever as LCRetriever
    from synapse_integrations.llama_index import SynapseRetriever as LIRetriever

    docs = LCRetriever(engine=b, k=20, include_rejected=True).invoke(SECRET_A)
    assert docs and not any("aardvarkpelican" in d.page_content for d in docs)
    nodes = LIRetriever(b, k=20, include_rejected=True).retrieve(SECRET_A)
    assert nodes and not any("aardvarkpelican" in n.node.get_content() for n in nodes)
    # and the same adapters over A do find it (the test can fail)
    assert any("aardvarkpelican" in d.page_content
               for d in LCRetriever(engine=a, k=20, include_rejected=True).invoke(SECRET_A))


def test_pool_namespaces_from_hostile_user_ids_stay_separate_and_inside(tmp_path):
    root = tmp_path / "root"
    pool = EnginePool(root / "mem", embedder=HashEmbedder())
    users = ["42", "../42", "42/..", "/etc/passwd", "..", "ユーザー", "42\u200b", "a" * 200]
    for u in users:
        ns = namespace_from_configurable({"user_id": u}, ("user_id",))
        pool.get(ns).add_turn(f"private note of user {u!r}")
    for u in users:
        ns = namespace_from_configurable({"user_id": u}, ("user_id",))
        texts = [d["text"] for _, d in pool.get(ns).graph.nodes(data=True) if d["kind"] == "episode"]
        assert texts == [f"private note of user {u!r}"]
    assert len(pool.namespaces()) == len(users)
    pool.close()
    assert [p.name for p in tmp_path.iterdir()] == ["root"]
    assert [p.name for p in root.iterdir()] == ["mem"]


HOSTILE_OK = ["../x", "../../../../tmp/evil", "/abs/path", "a/../../b", "..", ".", "~root",
              "C:\\Windows\\System32", "名前/ünïcödé 😀", "x" * 256, "with space", "semi;colon|pipe",
              "%2e%2e%2f", "$(touch /tmp/pwned)"]
HOSTILE_BAD = ["", "   ", "x" * 257, "nul\x00byte", "new\nline", "tab\there", "\x7f", "\ud800"]


def test_hostile_namespace_strings_are_encoded_or_refused(tmp_path):
    root = tmp_path / "root"
    path = root / "mem"
    emb = HashEmbedder()
    opened = {}
    for ns in HOSTILE_OK:
        mem = Synapse(path, namespace=ns, embedder=emb)
        assert mem.namespace == ns
        mem.add_turn(f"hello from {ns!r}")
        opened[ns] = mem
    for ns in HOSTILE_BAD:
        with pytest.raises(NamespaceError) as info:
            Synapse(path, namespace=ns, embedder=emb)
        assert "namespace" in str(info.value)
    for bad_type in (None, 42, b"bytes", ["list"]):
        with pytest.raises(NamespaceError) as info:
            Synapse(path, namespace=bad_type, embedder=emb)
        assert "namespace must be a str" in str(info.value)
    # each namespace sees only its own turn, also after reopening
    for ns, mem in opened.items():
        assert [d["text"] for _, d in mem.graph.nodes(data=True)] == [f"hello from {ns!r}"]
        mem.close()
    assert set(Synapse.namespaces(path)) == set(HOSTILE_OK)
    for ns in HOSTILE_OK:
        with Synapse.load(path, namespace=ns, embedder=emb) as mem:
            assert [d["text"] for _, d in mem.graph.nodes(data=True)] == [f"hello from {ns!r}"]
    # nothing was written outside the memory folder
    assert [p.name for p in tmp_path.iterdir()] == ["root"]
    assert [p.name for p in root.iterdir()] == ["mem"]
    for p in _all_files(path):
        assert p.resolve().is_relative_to(path.resolve()), p
        assert len(p.name) <= 255
    assert not Path("/abs/path").exists() and not Path("/tmp/evil").exists()
    assert not Path("/tmp/pwned").exists()
