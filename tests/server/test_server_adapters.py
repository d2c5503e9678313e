"""The adapter tests, run once more against a memory server on 127.0.0.1.

The test functions of tests/adapters/test_langchain.py, test_langgraph.py, test_llama_index.py and
test_langgraph_store.py run here unchanged, with the names they build memories from
(``Synapse``, ``EnginePool``, ``SynapseStore``) pointing at the server: ``Synapse(path,
...)`` is a :class:`RemoteMemory` (one namespace of the server), ``EnginePool(path, ...)``
a :class:`RemotePool`, ``SynapseStore(path)`` a store over a ``RemotePool``. The adapters
themselves are not touched: they get a remote memory where they got a local one. Each test
gets a fresh server (a uvicorn thread serving its own folder, with the real MiniLM the
adapter tests use); the read-only LangChain tests share one holding the demo conversation.

Not run remotely: test_langgraph's SqliteSaver restart test (it reopens the folder from a
second process by design) and the reference-store runs of the store suite (they test
LangGraph's InMemoryStore).
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from _server_helpers import rest_server

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")
pytest.importorskip("llama_index.core")

# the adapters' own tests, reused here over the REST server
sys.path.insert(0, str(Path(__file__).parents[1] / "adapters"))

import test_langchain as lc  # noqa: E402
import test_langgraph as lg  # noqa: E402
import test_langgraph_store as st  # noqa: E402
import test_llama_index as li  # noqa: E402
from _adapter_data import ANSWERABLE, demo_turns  # noqa: E402
from langchain_tests.integration_tests import RetrieversIntegrationTests  # noqa: E402

from synapse_integrations.langchain import SynapseRetriever  # noqa: E402
from synapse_integrations.langgraph import SynapseStore  # noqa: E402
from synapse_integrations.server.client import RemoteMemory, RemotePool  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.server,
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:.*deprecated.*")]


class Served(RemoteMemory):
    """A remote memory with ``graph``, a read-only view of its episodes (the adapter tests
    read ``mem.graph.nodes(data=True)`` to check what was recorded)."""

    @property
    def graph(self) -> nx.DiGraph:
        g = nx.DiGraph()
        for ep in self.episodes():
            g.add_node(ep["id"], **{k: v for k, v in ep.items() if k != "id"})
        return g


class ServedPool(RemotePool):
    memory_class = Served


class RemoteSynapse(Served):
    """``Synapse(path, namespace=..., embedder=...)`` as the adapter tests write it, served:
    one namespace of the server per (path, namespace)."""

    url = ""

    def __init__(self, path: Any = None, *, namespace: str = "default", **_: Any) -> None:
        tag = hashlib.sha1(str(path).encode()).hexdigest()[:8]
        super().__init__(self.url, f"{tag}/{namespace}")


def served(url: str) -> dict[str, Any]:
    """The names the adapter test modules build memories from, pointing at ``url``."""
    synapse = type("Synapse", (RemoteSynapse,), {"url": url})

    def pool(path: Any = None, **_: Any) -> RemotePool:
        return ServedPool(url)

    def store(path: Any = None, *, embedder: Any = None, **kwargs: Any) -> SynapseStore:
        return SynapseStore(ServedPool(url), **kwargs)

    return {"Synapse": synapse, "EnginePool": pool, "SynapseStore": store}


@pytest.fixture
def server(tmp_path, embedder, monkeypatch):
    with rest_server(tmp_path / "server-memory", embedder=embedder) as srv:
        for module in (lc, lg, li, st):
            for name, value in served(srv.url).items():
                if hasattr(module, name):
                    monkeypatch.setattr(module, name, value)
        yield srv


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory, embedder):
    with rest_server(tmp_path_factory.mktemp("demo") / "mem", embedder=embedder) as srv:
        mem = RemoteMemory(srv.url, "demo")
        mem.add_turns(demo_turns())
        yield mem
        mem.close()


def _args(fn: Any, server: Any, tmp_path: Any, embedder: Any, demo: Any,
          extra: dict[str, Any]) -> dict[str, Any]:
    given = {"tmp_path": tmp_path, "embedder": embedder, "demo_engine": demo, **extra}
    params = inspect.signature(fn).parameters
    if "store" in params:
        given["store"] = SynapseStore(ServedPool(server.url))
    if "filled" in params:  # (a test asks for one or the other)
        given["filled"] = SynapseStore(ServedPool(server.url))
        st._fill(given["filled"])
    return {p: given[p] for p in inspect.signature(fn).parameters}


SKIP = {"test_sqlite_checkpointer_and_memory_survive_a_process_restart"}


def _cases() -> list[tuple[Any, str, dict[str, Any]]]:
    """Every test function of the adapter modules, its own parametrizations expanded (the
    ``store`` fixture's parametrization picks the implementation: here, the served one)."""
    out = []
    for module in (lc, lg, li, st):
        for name, fn in vars(module).items():
            if not name.startswith("test_") or not callable(fn) or name in SKIP:
                continue
            variants: list[dict[str, Any]] = [{}]
            for mark in getattr(fn, "pytestmark", []):
                if mark.name == "parametrize" and mark.args[0] != "store":
                    names = [n.strip() for n in mark.args[0].split(",")]
                    values = [v if len(names) > 1 else (v,) for v in mark.args[1]]
                    variants = [{**v, **dict(zip(names, vals))} for v in variants for vals in values]
            out += [(module, name, v) for v in variants]
    return out


CASES = _cases()
SYNC = [c for c in CASES if not inspect.iscoroutinefunction(getattr(c[0], c[1]))]
ASYNC = [c for c in CASES if inspect.iscoroutinefunction(getattr(c[0], c[1]))]


def _id(case: tuple[Any, str, dict[str, Any]]) -> str:
    return f"{case[0].__name__}::{case[1]}" + (f"[{'-'.join(map(repr, case[2].values()))}]" if case[2] else "")


def test_every_adapter_test_runs_here():
    assert len(CASES) >= 40 and {m.__name__ for m, _, _ in CASES} == {
        "test_langchain", "test_langgraph", "test_llama_index", "test_langgraph_store"}


@pytest.mark.parametrize("case", SYNC, ids=_id)
def test_adapter_against_the_server(case, server, tmp_path, embedder, demo_server):
    module, name, extra = case
    fn = getattr(module, name)
    fn(**_args(fn, server, tmp_path, embedder, demo_server, extra))


@pytest.mark.parametrize("case", ASYNC, ids=_id)
async def test_async_adapter_against_the_server(case, server, tmp_path, embedder, demo_server):
    module, name, extra = case
    fn = getattr(module, name)
    await fn(**_args(fn, server, tmp_path, embedder, demo_server, extra))


_DEMO: dict[str, RemoteMemory] = {}


@pytest.fixture(scope="module", autouse=True)
def _demo_for_the_standard_suite(demo_server):
    _DEMO["demo"] = demo_server
    yield


class TestRemoteRetrieverStandard(RetrieversIntegrationTests):
    """langchain-tests' own retriever suite, unmodified, on a retriever over the server."""

    @property
    def retriever_constructor(self) -> type[SynapseRetriever]:
        return SynapseRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"engine": _DEMO["demo"]}

    @property
    def retriever_query_example(self) -> str:
        return ANSWERABLE
