"""Regression tests for the red-team pass of issue 12 (adapters and the pool): each test
failed on the code before the fix. Items: namespaces of different adapters and key kinds
colliding (2), the LangGraph store losing or stranding items (3), the pool growing
without bound, ``42`` vs ``"42"``, dropping a namespace without a trace (9)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402

from synapse_integrations import Synapse  # noqa: E402
from synapse_integrations.errors import (  # noqa: E402
    EmbeddingError,
    FirewallBlockedError,
    InvalidInputError,
    InvalidTypeError,
    StorageError,
)
from synapse_integrations.firewall import FirewallConfig  # noqa: E402
from synapse_integrations.langchain import SynapseChatMessageHistory  # noqa: E402
from synapse_integrations.langgraph import SynapseStore  # noqa: E402
from synapse_integrations.namespace_keys import (  # noqa: E402
    namespace_from_configurable,
    namespace_key,
)
from synapse_integrations.pool import EnginePool  # noqa: E402

from _safety_helpers import HashEmbedder  # noqa: E402

ALICE = "Alice keeps her spare key under the blue heron flowerpot."


def _files_with(root: Path, needles: list[str]) -> list[tuple[str, str]]:
    hits = []
    for folder, _, files in os.walk(root):
        for name in files:
            data = Path(folder, name).read_bytes()
            hits += [(str(Path(folder, name).relative_to(root)), n) for n in needles
                     if n.encode() in data]
    return hits


# -- 2. typed namespace keys ----------------------------------------------------------------
ADVERSARIAL = ["user_id=alice", "store:memories.alice", "@agent:user_id:alice", "alice",
               "@store:store:memories.alice", "memories.alice", "a:b", "a%3Ab", "a\nb", "42"]


def test_keys_of_different_adapters_and_kinds_never_name_the_same_memory():
    names = {}
    for adapter, kind in (("agent", "user_id"), ("agent", "thread_id"), ("history", "session"),
                          ("store", "store"), ("store", "other")):
        for value in ADVERSARIAL:
            name = namespace_key(adapter, kind, value)
            assert names.setdefault(name, (adapter, kind, value)) == (adapter, kind, value)


def test_a_chat_session_cannot_read_or_clear_an_agent_memory_or_store_items(tmp_path):
    pool = EnginePool(tmp_path / "mem", embedder=HashEmbedder())
    agent_ns = namespace_from_configurable({"user_id": "alice"}, ("user_id", "thread_id"))
    pool.get(agent_ns).add_turn(ALICE, speaker="user")
    store = SynapseStore(pool)
    store.put(("memories", "alice"), "key", {"text": ALICE})
    for session in ADVERSARIAL[:6]:
        history = SynapseChatMessageHistory(pool, session_id=session)
        assert history.messages == []
        history.add_messages([HumanMessage("hi"), AIMessage("hello")])
        history.clear()
    assert [e["text"] for e in pool.get(agent_ns).episodes()] == [ALICE]
    assert store.get(("memories", "alice"), "key").value == {"text": ALICE}
    with pytest.raises(InvalidInputError, match="namespace_key"):
        pool.get("@agent:user_id:alice")  # the adapters' space is not reachable by a raw name
    store.close()
    pool.close()


def test_memories_stored_under_the_old_names_stay_readable(tmp_path, embedder=HashEmbedder()):
    old = Synapse(tmp_path / "mem", namespace="user_id=bob", embedder=embedder)
    old.add_turn("Bob's old memory")
    old.close()
    legacy = Synapse(tmp_path / "mem", namespace="store:memories.bob", embedder=embedder)
    key = "pref"
    rec = {"namespace": ["memories", "bob"], "key": key, "value": {"text": "tea"},
           "created_at": "2024-01-01T00:00:00+00:00", "updated_at": "2024-01-01T00:00:00+00:00",
           "indexed": True}
    legacy.add_turn("tea", id="kv-" + hashlib.sha256(key.encode()).hexdigest()[:32],
                    metadata={"langgraph_store": rec})
    legacy.close()
    pool = EnginePool(tmp_path / "mem", embedder=embedder)
    agent = pool.get(namespace_from_configurable({"user_id": "bob"}, ("user_id",)))
    assert [e["text"] for e in agent.episodes()] == ["Bob's old memory"]
    store = SynapseStore(pool)
    assert store.get(("memories", "bob"), "pref").value == {"text": "tea"}
    store.put(("memories", "bob"), "pref", {"text": "coffee"})  # updates the old item
    assert store.get(("memories", "bob"), "pref").value == {"text": "coffee"}
    assert [i.key for i in store.search(("memories", "bob"))] == ["pref"]
    pool.close()


def test_user_id_42_and_text_42_are_one_user_and_other_types_are_refused():
    keys = ("user_id",)
    assert namespace_from_configurable({"user_id": 42}, keys) == \
        namespace_from_configurable({"user_id": "42"}, keys)
    for bad in (True, 42.0, b"42", object()):
        with pytest.raises(InvalidTypeError):
            namespace_from_configurable({"user_id": bad}, keys)


# -- 3. the store's updates and keys -------------------------------------------------------
class _FailingEmbedder(HashEmbedder):
    def embed_documents(self, texts):
        if any("EMBEDFAIL" in t for t in texts):
            raise EmbeddingError("the embedding service is down")
        return super().embed_documents(texts)


def test_a_refused_store_update_leaves_the_item_as_it_was(tmp_path):
    store = SynapseStore(tmp_path / "s", embedder=_FailingEmbedder(),
                         firewall=FirewallConfig(secrets="block"))
    ns = ("memories", "sam")
    store.put(ns, "pet", {"text": "Sam has a beagle called Biscuit"})
    bad_values = [({"text": "x" * 100_001}, InvalidInputError),
                  ({"text": "my key is AKIAIOSFODNN7EXAMPLE ok"}, FirewallBlockedError),
                  ({"text": "lone \udc80 surrogate"}, (InvalidInputError, UnicodeError)),
                  ({"text": "EMBEDFAIL please"}, EmbeddingError)]
    for value, error in bad_values:
        with pytest.raises(error):
            store.put(ns, "pet", value)
        assert store.get(ns, "pet").value == {"text": "Sam has a beagle called Biscuit"}
    engine = store.pool.get(namespace_key("store", "store", "memories.sam"))
    real = engine._state.vectors.active.upsert

    def broken(*args, **kwargs):
        raise StorageError("disk full")

    engine._state.vectors.active.upsert = broken
    with pytest.raises(StorageError):
        store.put(ns, "pet", {"text": "Sam has a poodle"})
    engine._state.vectors.active.upsert = real
    assert store.get(ns, "pet").value == {"text": "Sam has a beagle called Biscuit"}
    store.put(ns, "pet", {"text": "Sam has a poodle"})
    assert store.get(ns, "pet").value == {"text": "Sam has a poodle"}
    assert [i.key for i in store.search(ns)] == ["pet"]
    store.close()


def test_email_keys_with_pii_redaction_can_be_read_updated_and_deleted(tmp_path):
    store = SynapseStore(tmp_path / "s", embedder=HashEmbedder(), firewall=FirewallConfig(pii="redact"))
    ns = ("contacts",)
    store.put(ns, "ana@example.com", {"text": "Ana likes jazz"})
    store.put(ns, "bob@example.com", {"text": "Bob likes opera"})
    assert store.get(ns, "ana@example.com").value == {"text": "Ana likes jazz"}
    assert store.get(ns, "bob@example.com").value == {"text": "Bob likes opera"}
    assert sorted(i.key for i in store.search(ns)) == ["ana@example.com", "bob@example.com"]
    store.put(ns, "ana@example.com", {"text": "Ana likes blues"})
    assert store.get(ns, "ana@example.com").value == {"text": "Ana likes blues"}
    store.delete(ns, "ana@example.com")
    assert store.get(ns, "ana@example.com") is None
    assert [i.key for i in store.search(ns)] == ["bob@example.com"]
    engine = store.pool.get(namespace_key("store", "store", "contacts"))
    assert not any("Ana likes" in e["text"] for e in engine.episodes())
    store.close()
    assert _files_with(tmp_path / "s", ["Ana likes"]) == []


# -- 9. a bounded pool; dropping a namespace -------------------------------------------------
def test_the_pool_keeps_at_most_max_open_engines(tmp_path):
    from synapse_integrations.langgraph import SynapseMemoryNodes

    pool = EnginePool(tmp_path / "mem", max_open=3, embedder=HashEmbedder())
    nodes = SynapseMemoryNodes(pool)
    for t in range(8):  # runs with new thread ids and no user id
        engine = nodes.engine_for({"configurable": {"thread_id": f"t{t}"}})
        engine.add_turn(f"note of thread {t}")
        assert len(pool.opened()) <= 3
    first = nodes.engine_for({"configurable": {"thread_id": "t0"}})  # reopened, data kept
    assert [e["text"] for e in first.episodes()] == ["note of thread 0"]
    pool.close()


def test_dropping_a_namespace_leaves_no_trace_in_any_file(tmp_path):
    pool = EnginePool(tmp_path / "mem", embedder=HashEmbedder())
    name = "tenant-zanzibarquokka"
    doomed = pool.get(name)
    doomed.add_turns([f"vermillionkestrel note {n} of the doomed tenant" for n in range(12)])
    doomed.forget([doomed.episodes()[0]["id"]])  # a record of forgotten ids exists too
    pool.get("keeper").add_turns([f"keeper note {n}" for n in range(6)])
    pool.save()
    assert _files_with(tmp_path / "mem", [name, "vermillionkestrel"])
    pool.drop(name)
    pool.close()
    assert _files_with(tmp_path / "mem", [name, "zanzibarquokka", "vermillionkestrel"]) == []
    again = EnginePool(tmp_path / "mem", embedder=HashEmbedder())
    assert name not in again.namespaces()
    assert len(again.get("keeper").episodes()) == 6
    again.close()
