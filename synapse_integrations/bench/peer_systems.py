"""The memory layers ``synapse bench peers`` compares, each behind one small adapter.

Every system here does three things through its own public API: ``ingest`` a memory's turns,
``rank`` a question (embedding the question with the real model, then searching), ``close``.
The adapters only convert types and forward calls; nothing is patched.

* ``synapse``: this engine, written as the other benches write it
  (:func:`~.retrieval.ingest_memory`), asked with ``retrieve_by_vector``;
* ``ppr``: our strongest baseline (personalised PageRank over the same engine memory, the
  runner's :class:`~.baselines.BaselineRanker`); it shares ``synapse``'s memory when both run;
* ``mem0``: ``mem0.Memory.from_config`` over Chroma (a temporary folder), ``add(...,
  infer=False)`` one turn at a time (raw turns, no LLM call), ``search`` with its defaults;
* ``langgraph_store``: LangGraph's ``InMemoryStore(index={"embed", "dims", "fields"})`` (what
  LangMem's tools search), ``put`` per turn, ``search(namespace, query=..., limit=...)``;
* ``llamaindex_memory``: LlamaIndex's ``VectorMemoryBlock``, ``aput`` per turn. Its validator
  refuses a ``SimpleVectorStore`` (``stores_text`` is false), so it runs over the closest
  store it accepts, ``ChromaVectorStore`` on an in-memory Chroma client; the block returns
  only formatted text, so the ranking is read from its own ``vector_store.query`` with the
  block's ``embed_model``, ``similarity_top_k`` and ``query_kwargs`` (the steps its ``aget``
  takes), mapping each node's text back to the turn.

The same vectors for everyone (:class:`SharedVectors`): the turns' vectors come from the run's
:class:`~.retrieval.CachingEmbedder` (and its ``--embed-cache``), wrapped in each framework's
embedder interface; any text that is not a stored turn (a question) is embedded live with the
real model, so query latency includes the encoder. The frameworks are imported only when
their adapter is built (the ``[peers]`` extra), never by the core.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..config import SynapseConfig
from ..errors import ConfigError, InvalidInputError
from .baselines import BaselineRanker
from .retrieval import BenchMemory, CachingEmbedder, ingest_memory

__all__ = ["ENGINE_SYSTEMS", "PEERS", "PEER_PACKAGES", "SharedVectors", "make_system",
           "prepare", "system_version"]

#: the other memory layers, and the distribution that names each one's version
PEER_PACKAGES: dict[str, str] = {"mem0": "mem0ai", "langgraph_store": "langgraph",
                                 "llamaindex_memory": "llama-index-core"}
PEERS: tuple[str, ...] = tuple(PEER_PACKAGES)
#: ours, run in the same loop
ENGINE_SYSTEMS: tuple[str, ...] = ("synapse", "ppr")
#: what LlamaIndex's VectorMemoryBlock writes for one message (``_aput``'s format)
_LI_FORMAT = "<message role='{role}'>{text}</message>"


def system_version(name: str) -> str:
    """The installed version of the package behind a system (ours for synapse and ppr)."""
    dist = PEER_PACKAGES.get(name, "synapse-integrations")
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


class SharedVectors:
    """One run's vectors: stored texts from the shared cache, anything else embedded live.

    ``remember(texts)`` makes the vectors of a memory's turns (from the run's
    :class:`~.retrieval.CachingEmbedder`, batched and cached); ``document(text)`` returns a
    remembered vector, or embeds ``text`` with the real model when it was never remembered;
    ``query(text)`` always embeds with the real model (never a cache), as a user's question
    would be. ``alias(text, as_text)`` makes ``as_text`` read ``text``'s vector (a framework
    that decorates what it embeds, so that its vector stays the turn's).
    """

    def __init__(self, embedder: CachingEmbedder) -> None:
        self.embedder = embedder
        self.live = embedder.inner
        self.dim = int(embedder.dim)
        self._vectors: dict[str, np.ndarray] = {}

    def remember(self, texts: Sequence[str]) -> None:
        texts = list(texts)
        for t, v in zip(texts, self.embedder.embed_documents(texts)):
            self._vectors[t] = np.asarray(v, dtype=np.float32)

    def alias(self, text: str, as_text: str) -> None:
        self._vectors[as_text] = self._vectors[text]

    def forget(self) -> None:
        self._vectors.clear()

    def document(self, text: str) -> list[float]:
        v = self._vectors.get(text)
        return (v if v is not None else self.live.embed_query(text)).tolist()

    def query(self, text: str) -> list[float]:
        return np.asarray(self.live.embed_query(text), dtype=np.float32).tolist()


# --------------------------------------------------------------------------------------------
# framework embedder interfaces over SharedVectors
# --------------------------------------------------------------------------------------------
def langchain_embeddings(shared: SharedVectors) -> Any:
    """A LangChain ``Embeddings`` (mem0's ``langchain`` embedder, LangGraph's index):
    ``embed_documents`` reads stored turns; ``embed_query`` reads a stored turn too (mem0
    embeds what it adds with ``embed_query``) and embeds anything else live."""
    from langchain_core.embeddings import Embeddings

    class _Shared(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [shared.document(t) for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return shared.document(text)

    return _Shared()


def llamaindex_embedding(shared: SharedVectors) -> Any:
    """A LlamaIndex ``BaseEmbedding``: texts read stored turns (or embed live), queries are
    always embedded live."""
    from llama_index.core.base.embeddings.base import BaseEmbedding

    class _Shared(BaseEmbedding):
        def _get_text_embedding(self, text: str) -> list[float]:
            return shared.document(text)

        def _get_query_embedding(self, query: str) -> list[float]:
            return shared.query(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return shared.query(query)

    return _Shared(model_name="all-MiniLM-L6-v2 (shared vectors)", embed_batch_size=64)


# --------------------------------------------------------------------------------------------
# the systems
# --------------------------------------------------------------------------------------------
class EngineSystem:
    """``synapse``: this engine with the base configuration, written as the runners write."""

    def __init__(self, shared: SharedVectors, config: SynapseConfig | None = None) -> None:
        self.shared = shared
        self.config = config or SynapseConfig()
        self.mem: Any = None

    def ingest(self, memory: BenchMemory) -> None:
        self.mem = ingest_memory(memory, self.config, self.shared.embedder)

    def rank(self, query: str, depth: int) -> list[str]:
        v = np.asarray(self.shared.query(query), dtype=np.float32)
        res = self.mem.retrieve_by_vector(query, v, k=depth, config=self.config)
        return [it.id for it in res.items if it.kind == "episode"]

    def close(self) -> None:
        if self.mem is not None:
            self.mem.close()
            self.mem = None


class PprSystem:
    """``ppr``: the runner's personalised PageRank over an engine memory (``synapse``'s when
    both run: then its ingest costs nothing of its own)."""

    def __init__(self, shared: SharedVectors, engine: EngineSystem | None = None) -> None:
        self.shared = shared
        self.engine = engine
        self.owns = engine is None
        self.ranker: BaselineRanker | None = None

    def ingest(self, memory: BenchMemory) -> None:
        if self.owns:
            self.engine = EngineSystem(self.shared)
            self.engine.ingest(memory)
        ids = [t["id"] for t in memory.turns]
        texts = [t["text"] for t in memory.turns]
        self.ranker = BaselineRanker(ids, texts, self.shared.embedder.embed_documents(texts),
                                     self.engine.mem, self.engine.config)

    def rank(self, query: str, depth: int) -> list[str]:
        v = np.asarray(self.shared.query(query), dtype=np.float32)
        return self.ranker.rank(["ppr"], query, v, depth)["ppr"][0]

    def close(self) -> None:
        if self.owns and self.engine is not None:
            self.engine.close()
        self.ranker = None


def _import_mem0() -> Any:
    """mem0 with its telemetry off: ``MEM0_TELEMETRY`` is read once, when mem0 is imported."""
    os.environ["MEM0_TELEMETRY"] = "False"
    import mem0
    from mem0.memory import telemetry

    if telemetry.MEM0_TELEMETRY:
        raise ConfigError("mem0 was imported with its telemetry on before this bench could "
                          "turn it off: set MEM0_TELEMETRY=False in the environment")
    return mem0


class Mem0System:
    """``mem0``: raw turns (``infer=False``) in Chroma, mem0's own ``search`` ranking.

    Choices mem0's API forced: ``Memory`` always builds an LLM, and its default (OpenAI)
    creates a client that wants a key, so the LLM is LangChain's ``FakeListChatModel`` through
    mem0's ``langchain`` provider; ``infer=False`` never calls it. ``add`` takes one metadata
    dict per call, so each turn is its own ``add`` (its id in the metadata). ``search``
    requires an entity filter: every turn is added with one ``user_id``.
    """

    USER = "bench"

    def __init__(self, shared: SharedVectors, workdir: str, name: str) -> None:
        self.shared = shared
        self.workdir = workdir
        self.name = name
        self.memory: Any = None

    def ingest(self, memory: BenchMemory) -> None:
        mem0 = _import_mem0()
        from langchain_core.language_models.fake_chat_models import FakeListChatModel

        self.memory = mem0.Memory.from_config({
            "vector_store": {"provider": "chroma",
                             "config": {"collection_name": self.name,
                                        "path": os.path.join(self.workdir, "mem0-chroma")}},
            "embedder": {"provider": "langchain",
                         "config": {"model": langchain_embeddings(self.shared),
                                    "embedding_dims": self.shared.dim}},
            "llm": {"provider": "langchain",
                    "config": {"model": FakeListChatModel(responses=["{}"])}},
            "history_db_path": os.path.join(self.workdir, f"mem0-{self.name}.db"),
        })
        for t in memory.turns:
            self.memory.add([{"role": "user", "content": t["text"], "name": str(t["speaker"])}],
                            user_id=self.USER, metadata={"turn_id": t["id"]}, infer=False)

    def rank(self, query: str, depth: int) -> list[str]:
        found = self.memory.search(query, top_k=depth, filters={"user_id": self.USER})
        return [r["metadata"]["turn_id"] for r in found["results"]]

    def close(self) -> None:
        if self.memory is not None:
            self.memory.vector_store.delete_col()
            self.memory.close()
            self.memory = None


class LangGraphStoreSystem:
    """``langgraph_store``: ``InMemoryStore`` with an embedding index on the ``text`` field;
    each turn ``put`` under its id, ``search(namespace, query=..., limit=...)``."""

    NAMESPACE = ("memories", "bench")

    def __init__(self, shared: SharedVectors) -> None:
        self.shared = shared
        self.store: Any = None

    def ingest(self, memory: BenchMemory) -> None:
        from langgraph.store.memory import InMemoryStore

        self.store = InMemoryStore(index={"embed": langchain_embeddings(self.shared),
                                          "dims": self.shared.dim, "fields": ["text"]})
        for t in memory.turns:
            self.store.put(self.NAMESPACE, str(t["id"]),
                           {"text": t["text"], "speaker": str(t["speaker"])})

    def rank(self, query: str, depth: int) -> list[str]:
        return [it.key for it in self.store.search(self.NAMESPACE, query=query, limit=depth)]

    def close(self) -> None:
        self.store = None


class LlamaIndexMemorySystem:
    """``llamaindex_memory``: ``VectorMemoryBlock`` over a ``ChromaVectorStore`` (module
    docstring: why not ``SimpleVectorStore``, and how the ranking is read)."""

    def __init__(self, shared: SharedVectors, name: str) -> None:
        self.shared = shared
        self.name = name
        self.block: Any = None
        self.client: Any = None
        self._ids: dict[str, list[str]] = {}

    def ingest(self, memory: BenchMemory) -> None:
        import chromadb
        from chromadb.config import Settings
        from llama_index.core.base.llms.types import ChatMessage
        from llama_index.core.memory import VectorMemoryBlock
        from llama_index.vector_stores.chroma import ChromaVectorStore

        self.client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
        collection = self.client.get_or_create_collection(self.name)
        self.block = VectorMemoryBlock(vector_store=ChromaVectorStore(chroma_collection=collection),
                                       embed_model=llamaindex_embedding(self.shared))
        self._ids = {}

        async def write() -> None:
            for t in memory.turns:
                stored = _LI_FORMAT.format(role="user", text=t["text"])
                self.shared.alias(t["text"], stored)  # the block's tags keep the turn's vector
                self._ids.setdefault(stored, []).append(str(t["id"]))
                await self.block.aput([ChatMessage(role="user", content=t["text"])])

        asyncio.run(write())

    def rank(self, query: str, depth: int) -> list[str]:
        from llama_index.core.vector_stores.types import VectorStoreQuery

        block = self.block
        block.similarity_top_k = depth
        res = block.vector_store.query(VectorStoreQuery(
            query_str=query, query_embedding=block.embed_model.get_query_embedding(query),
            similarity_top_k=block.similarity_top_k, **block.query_kwargs))
        return _ids_of([n.get_content() for n in res.nodes or []], self._ids)

    def close(self) -> None:
        if self.client is not None:
            self.client.delete_collection(self.name)
        self.block = self.client = None


def _ids_of(texts: Sequence[str], ids: Mapping[str, list[str]]) -> list[str]:
    """Turn ids of ranked stored texts; a text stored twice names its turns in order.

    >>> _ids_of(["a", "b", "a"], {"a": ["t1", "t3"], "b": ["t2"]})
    ['t1', 't2', 't3']
    """
    used: dict[str, int] = {}
    out = []
    for text in texts:
        names = ids.get(text, [])
        i = used.get(text, 0)
        if i < len(names):
            out.append(names[i])
            used[text] = i + 1
    return out


def prepare(name: str) -> None:
    """Import what system ``name`` runs on (before anything is timed), or say which extra
    is missing."""
    modules = {"mem0": ("langchain_core.language_models.fake_chat_models",
                        "mem0.embeddings.langchain", "mem0.llms.langchain",
                        "mem0.vector_stores.chroma"),
               "langgraph_store": ("langgraph.store.memory", "langchain_core.embeddings"),
               "llamaindex_memory": ("llama_index.core.memory",
                                     "llama_index.vector_stores.chroma")}.get(name, ())
    if name == "mem0":
        _import_mem0()
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(f"{name} needs {module} ({exc}): pip install "
                              "'synapse-integrations[peers]'") from exc


def make_system(name: str, shared: SharedVectors, workdir: str, memory_name: str,
                built: Mapping[str, Any]) -> Any:
    """A fresh system ``name`` for one memory (``built``: the systems made so far for that
    memory, so that ``ppr`` reuses ``synapse``'s)."""
    safe = "b" + "".join(c if c.isalnum() else "-" for c in memory_name)[:50] + "x"
    makers: dict[str, Callable[[], Any]] = {
        "synapse": lambda: EngineSystem(shared),
        "ppr": lambda: PprSystem(shared, built.get("synapse")),
        "mem0": lambda: Mem0System(shared, workdir, safe),
        "langgraph_store": lambda: LangGraphStoreSystem(shared),
        "llamaindex_memory": lambda: LlamaIndexMemorySystem(shared, safe),
    }
    if name not in makers:
        raise InvalidInputError(f"unknown method {name!r} for bench peers; choose from "
                                f"{', '.join(makers)}")
    return makers[name]()


def new_workdir() -> tempfile.TemporaryDirectory[str]:
    """The temporary folder mem0's Chroma and history database live in (one per run)."""
    return tempfile.TemporaryDirectory(prefix="synapse-peers-")
