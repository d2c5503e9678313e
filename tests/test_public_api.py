"""The public API: exported names, and the core working with no agent framework installed.

The framework-free test runs a fresh Python in which an import hook makes every
``langchain*``, ``langgraph*`` and ``llama_index*`` import fail (as if none were installed),
imports the core, uses it (ingest, retrieve, save, reopen) and checks that no framework
module was loaded; then it imports each adapter and checks the error names the extra to
install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import synapse_integrations

CORE_API = {
    "Concept", "ConfigError", "ConsolidationReport", "EmbeddingError", "Extraction",
    "ExtractionError", "InvalidInputError", "InvalidTypeError", "LLMExtractor", "MiniLMEmbedder",
    "MissingDependencyError", "NamespaceError", "NodeNotFoundError", "OfflineExtractor",
    "Relation", "RetrievalResult", "RetrievedItem", "ScoreComponents", "SnapshotError",
    "StorageError", "Synapse", "SynapseConfig", "SynapseError", "Turn", "UnknownNamespaceError",
    "__version__",
}
ADAPTER_API = {
    "synapse_integrations.langchain": {
        "EnginePool", "namespace_key", "SynapseChatMessageHistory", "SynapseMemory", "SynapseMemoryMiddleware",
        "SynapseRetriever", "create_synapse_tools", "format_documents"},
    "synapse_integrations.llama_index": {"EnginePool", "namespace_key", "SynapseChatMemory", "SynapseGateEvent",
                                         "SynapseMemoryBlock", "SynapseRetriever"},
    "synapse_integrations.langgraph": {
        "EnginePool", "namespace_key", "MEMORY_MESSAGE_ID", "SynapseMemoryNodes", "SynapseMemoryState", "SynapseStore",
        "with_memories"},
}
EXTRAS = {"synapse_integrations.langchain": "langchain",
          "synapse_integrations.llama_index": "llamaindex",
          "synapse_integrations.langgraph": "langgraph"}


def test_core_exports_are_pinned():
    assert CORE_API <= set(synapse_integrations.__all__)  # names may be added, never lost
    for name in synapse_integrations.__all__:
        assert hasattr(synapse_integrations, name), name
    assert isinstance(synapse_integrations.__version__, str)


@pytest.mark.parametrize("module", sorted(ADAPTER_API))
def test_adapter_exports_are_pinned(module):
    mod = pytest.importorskip(module)
    assert set(mod.__all__) == ADAPTER_API[module]
    assert all(hasattr(mod, name) for name in mod.__all__)


BLOCKED_RUN = textwrap.dedent('''
    import importlib, json, sys, tempfile

    BLOCKED = ("langchain", "langgraph", "llama_index")

    class NoFrameworks:
        """Meta path finder: every framework import fails as if it were not installed."""
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0].startswith(BLOCKED):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
            return None

    sys.meta_path.insert(0, NoFrameworks())
    try:
        import langchain_core  # noqa: F401
        raise SystemExit("the blocker does not work")
    except ModuleNotFoundError:
        pass

    import synapse_integrations
    from synapse_integrations import Synapse, SynapseConfig, RetrievalResult
    out = {}
    path = tempfile.mkdtemp()
    with Synapse(path, namespace="user-1", config=SynapseConfig()) as mem:
        mem.add_turns([{"text": t, "speaker": "Sam"} for t in (
            "I went skiing in Whistler with my cousin Dana.", "Dana is studying veterinary medicine.",
            "I play the cello on weekends.", "My dog Miso loves the snow.", "I live in Portland.")])
        result = mem.retrieve("Who came skiing?", k=3)
        out["result_type"] = type(result).__name__
        out["top"] = [it.text for it in result.episodes()][:3]
        out["stats"] = mem.stats()
    with Synapse(path, namespace="user-1") as again:
        out["reopened_episodes"] = again.stats()["episodes"]
    out["framework_modules"] = sorted(m for m in sys.modules if m.split(".")[0].startswith(BLOCKED))
    out["adapters"] = {}
    for module in ("synapse_integrations.langchain", "synapse_integrations.llama_index",
                   "synapse_integrations.langgraph"):
        try:
            importlib.import_module(module)
            out["adapters"][module] = None
        except synapse_integrations.MissingDependencyError as exc:
            out["adapters"][module] = {"message": str(exc), "is_import_error": isinstance(exc, ImportError)}
    print(json.dumps(out))
''')


@pytest.mark.model
def test_core_works_without_any_framework():
    proc = subprocess.run([sys.executable, "-c", BLOCKED_RUN], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["result_type"] == "RetrievalResult"
    assert "I went skiing in Whistler with my cousin Dana." in out["top"]
    assert out["stats"]["episodes"] == 5 and out["reopened_episodes"] == 5
    assert out["framework_modules"] == []  # the core never imported a framework
    for module, extra in EXTRAS.items():
        err = out["adapters"][module]
        assert err is not None, f"{module} imported without its framework"
        assert err["is_import_error"]
        assert f"pip install 'synapse-integrations[{extra}]'" in err["message"]
