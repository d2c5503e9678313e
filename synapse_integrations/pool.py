"""One memory per user, thread or session: :class:`EnginePool`.

Adapters whose memory is chosen per run (LangGraph nodes and store, agent middleware and
tools, chat histories) take a pool; each namespace's engine is opened on first use and
kept open.

>>> from synapse_integrations.pool import namespace_from_configurable
>>> namespace_from_configurable({"thread_id": "t1", "user_id": "u7"}, ("user_id", "thread_id"))
'user_id=u7'
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import InvalidInputError

__all__ = ["EnginePool", "namespace_from_configurable"]


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

    >>> from synapse_integrations import EnginePool
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
        self._owns_path = path is None
        self.path = Path(tempfile.mkdtemp(prefix="synapse-pool-")) if path is None else Path(path)
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
                shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> EnginePool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
