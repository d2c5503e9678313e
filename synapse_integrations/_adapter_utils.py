"""Helpers shared by the framework adapters (no framework is imported here).

Everything an adapter needs beyond "convert this type and call the engine" lives in this one
module, so the LangChain, LlamaIndex and LangGraph adapters stay thin and agree on:

- :func:`require`: import a framework module or raise :class:`MissingDependencyError` naming
  the extra to install;
- :func:`item_metadata`: the metadata dict every adapter attaches to a retrieved memory
  (``id``, ``kind``, ``speaker``, ``timestamp`` as ISO 8601, ``score``, ``components``, ...);
- :func:`format_memories`: the text a prompt sees, with an explicit "nothing in memory" line;
- :class:`EnginePool`: one :class:`~synapse_integrations.Synapse` per namespace under one path,
  for adapters whose namespace comes from the run (a user id, a thread id);
- :func:`namespace_from_configurable`: the namespace rule for ``config["configurable"]``;
- :func:`list_episodes`: the episodic nodes of a memory (active and archived) in order.

>>> from synapse_integrations._adapter_utils import namespace_from_configurable
>>> namespace_from_configurable({"thread_id": "t1", "user_id": "u7"}, ("user_id", "thread_id"))
'user_id=u7'
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import InvalidInputError, InvalidTypeError, MissingDependencyError
from .types import RetrievalResult, RetrievedItem

__all__ = [
    "DEFAULT_EMPTY_TEXT",
    "EnginePool",
    "EngineSource",
    "format_memories",
    "item_metadata",
    "list_episodes",
    "namespace_from_configurable",
    "require",
    "resolve_engine",
]

#: What a prompt sees when the gate rejected the query or memory is empty.
DEFAULT_EMPTY_TEXT = "Nothing relevant in memory."


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the extra.

    >>> require("json", "langchain").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"this adapter needs {module.split('.')[0]!r}, which is not installed: "
            f"pip install 'synapse-integrations[{extra}]'"
        ) from exc


def item_metadata(item: RetrievedItem) -> dict[str, Any]:
    """The metadata every adapter attaches to a retrieved memory.

    Keys: ``id``, ``kind`` (``"episode"`` / ``"concept"``), ``speaker``, ``timestamp`` (event
    time, ISO 8601 or None), ``score`` (hybrid score), ``components`` (``similarity``,
    ``activation``, ``pagerank``, ``bm25_rank``, ``dense_rank``), ``path`` (node ids along which
    activation reached it) and ``metadata`` (what was stored with the turn).
    """
    d = item.to_dict()
    return {
        "id": d["id"],
        "kind": d["kind"],
        "speaker": d["speaker"],
        "timestamp": d["timestamp"],
        "score": d["score"],
        "components": {key: d[key] for key in
                       ("similarity", "activation", "pagerank", "bm25_rank", "dense_rank")},
        "path": d["path"],
        "metadata": d["metadata"],
    }


def _line(item: RetrievedItem) -> str:
    when = f"[{item.timestamp.date().isoformat()}] " if item.timestamp else ""
    who = f"{item.speaker}: " if item.speaker else ""
    tag = "(concept) " if item.kind == "concept" else ""
    return f"- {when}{tag}{who}{item.text}"


def format_memories(result: RetrievalResult | Iterable[RetrievedItem], *,
                    empty: str = DEFAULT_EMPTY_TEXT) -> str:
    """Prompt text for retrieved memories: one line per item (date, speaker, text), or
    ``empty`` when there is nothing (or the gate rejected the query).

    >>> format_memories([])
    'Nothing relevant in memory.'
    """
    items = result.accepted if isinstance(result, RetrievalResult) else tuple(result)
    return "\n".join(_line(it) for it in items) if items else empty


def namespace_from_configurable(configurable: Mapping[str, Any] | None,
                                keys: Sequence[str], *, default: str | None = None) -> str:
    """The memory namespace for a run: ``"<key>=<value>"`` for the FIRST of ``keys`` present
    in ``configurable`` (so with ``("user_id", "thread_id")`` a user's memory is shared by
    all their threads, and a run without a user id gets a per-thread memory).

    Raises :class:`InvalidInputError` when none is present and no ``default`` is given.
    """
    configurable = configurable or {}
    for key in keys:
        value = configurable.get(key)
        if value is not None and str(value).strip():
            return f"{key}={value}"
    if default is not None:
        return default
    raise InvalidInputError(
        f"no memory namespace: pass one of {list(keys)} in config['configurable'], e.g. "
        f"graph.invoke(..., config={{'configurable': {{'{keys[0] if keys else 'thread_id'}': '42'}}}})"
    )


class EnginePool:
    """One :class:`~synapse_integrations.Synapse` per namespace, all under one ``path``.

    Adapters whose memory namespace is chosen per run (LangGraph nodes, the store, agent
    middleware) take a pool; each namespace's engine is opened on first use and kept open.

    >>> from synapse_integrations._adapter_utils import EnginePool
    >>> pool = EnginePool("./memory")                 # doctest: +SKIP
    >>> pool.get("user_id=42").add_turn("I like tea")   # doctest: +SKIP
    >>> pool.close()                                    # doctest: +SKIP

    Args:
        path: folder of the embedded Chroma and the snapshots; ``None`` for a temporary one
            (removed by :meth:`close`).
        **engine_kwargs: passed to every ``Synapse(...)`` (``embedder``, ``config``,
            ``client``, ``extractor``, ...).
    """

    def __init__(self, path: str | Path | None = None, **engine_kwargs: Any) -> None:
        import shutil
        import tempfile

        self._owns_path = path is None
        self.path = Path(tempfile.mkdtemp(prefix="synapse-pool-")) if path is None else Path(path)
        self._rmtree = shutil.rmtree
        self._kwargs = dict(engine_kwargs)
        self._engines: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, namespace: str) -> Any:
        """The engine of ``namespace`` (opened, or created, on first use)."""
        from .core.engine import Synapse

        with self._lock:
            engine = self._engines.get(namespace)
            if engine is None:
                engine = Synapse(self.path, namespace=namespace, **self._kwargs)
                self._engines[namespace] = engine
            return engine

    def opened(self) -> list[str]:
        """Namespaces whose engine is open in this pool."""
        with self._lock:
            return sorted(self._engines)

    def namespaces(self) -> list[str]:
        """Namespaces stored under ``path`` plus those opened in this process."""
        from .core.engine import Synapse

        with self._lock:
            opened = set(self._engines)
        stored = set(Synapse.namespaces(self.path)) if (self.path / "chroma").exists() else set()
        return sorted(opened | stored)

    def save(self) -> None:
        """Snapshot every open engine."""
        with self._lock:
            for engine in self._engines.values():
                engine.save()

    def close(self) -> None:
        """Close (and snapshot) every open engine; a temporary pool is deleted."""
        with self._lock:
            for engine in self._engines.values():
                engine.close()
            self._engines.clear()
            if self._owns_path:
                self._rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> EnginePool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


EngineSource = Any  # a Synapse, an EnginePool, or a callable namespace -> Synapse


def resolve_engine(source: EngineSource, namespace: Callable[[], str]) -> Any:
    """The engine to use: ``source`` itself when it is one engine, else the pool's (or the
    factory's) engine for ``namespace()`` (called only then)."""
    if isinstance(source, EnginePool):
        return source.get(namespace())
    if hasattr(source, "retrieve") and hasattr(source, "add_turns"):
        return source
    if callable(source):
        return source(namespace())
    raise InvalidTypeError(
        f"expected a Synapse, an EnginePool or a callable namespace -> Synapse, got {type(source).__name__}"
    )


def list_episodes(engine: Any, *, include_archived: bool = True) -> list[dict[str, Any]]:
    """Episodic nodes of ``engine`` as ``{"id", "text", "speaker", "ts", "seq", "metadata", ...}``
    dicts in ingestion order (archived episodes included unless asked otherwise)."""
    with getattr(engine, "_lock", None) or nullcontext():
        rows = [{"id": n, **d} for n, d in engine.graph.nodes(data=True) if d.get("kind") == "episode"]
        if include_archived:
            rows += [r for r in engine.archived() if r.get("kind") == "episode"]
    rows.sort(key=lambda r: r.get("seq", 0))
    return rows
