"""One memory per user, thread or session: :class:`EnginePool`, and the typed namespace
keys every adapter builds with :func:`namespace_key`.

Adapters name a memory from strings a client chooses (a LangGraph ``thread_id``, a chat
``session_id``, a store namespace). So that no such string can name another adapter's
memory, or another kind of key's, each adapter key is **typed**: the adapter, the key's
kind and the escaped value, ``"@<adapter>:<kind>:<value>"``. Whatever the value holds
(``:``, ``=``, ``@``, control characters), the adapter and kind in front are fixed by the
adapter, so ``@history:session:...`` can never be ``@agent:user_id:alice``. Plain strings
passed to :meth:`EnginePool.get` are the application's own names; they may not start
with ``@`` (that space is the adapters').

>>> namespace_key("agent", "user_id", "alice")
'@agent:user_id:alice'
>>> namespace_key("history", "session", "user_id=alice")
'@history:session:user_id=alice'
>>> namespace_key("agent", "user_id", 42) == namespace_key("agent", "user_id", "42")
True
>>> parse_namespace_key(namespace_key("store", "store", "memories.a\\nb"))
('store', 'store', 'memories.a\\nb')
>>> namespace_from_configurable({"thread_id": "t1", "user_id": "u7"}, ("user_id", "thread_id"))
'@agent:user_id:u7'
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .core.validation import CONTROL_RE, namespace_dirname, utf8_ok, validate_namespace
from .errors import InvalidInputError, InvalidTypeError, NamespaceError

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_MAX_OPEN", "EnginePool", "NamespaceKey", "escape_value",
           "namespace_from_configurable", "namespace_key", "parse_namespace_key", "typed_key",
           "unescape_value"]

#: Engines an :class:`EnginePool` keeps open at most (least recently used closed first).
DEFAULT_MAX_OPEN = 64

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_KEY_RE = re.compile(r"^@([A-Za-z_][A-Za-z0-9_.-]{0,63}):([A-Za-z_][A-Za-z0-9_.-]{0,63}):(.+)$", re.S)
_ESCAPE_RE = re.compile(r"%|" + CONTROL_RE.pattern[1:-1].join("[]") + r"|[\ud800-\udfff]")


class NamespaceKey(str):
    """An engine namespace built by :func:`namespace_key` (a ``str``): the only strings
    :meth:`EnginePool.get` accepts in the adapters' ``@`` space."""

    __slots__ = ()


def escape_value(value: str) -> str:
    """``value`` with ``%``, control characters and lone surrogates percent-encoded
    (printable, and reversible by :func:`unescape_value`)."""
    return _ESCAPE_RE.sub(lambda m: "".join(f"%{b:02X}" for b in
                                            m.group().encode("utf-8", "surrogatepass")), value)


def unescape_value(value: str) -> str:
    """The inverse of :func:`escape_value`."""
    return re.sub(r"(%[0-9A-F]{2})+", lambda m: bytes.fromhex(m.group().replace("%", ""))
                  .decode("utf-8", "surrogatepass"), value)


def namespace_key(adapter: str, kind: str, value: str | int | uuid.UUID) -> NamespaceKey:
    """The engine namespace of an adapter's key (see the module docstring).

    ``adapter`` and ``kind`` are names the adapter fixes (letters, digits, ``_.-``);
    ``value`` is what the client sent: a non-blank ``str``, an ``int`` (``42`` and
    ``"42"`` name the same memory: one user id, whichever way a client typed it) or a
    ``uuid.UUID`` (its canonical string). Anything else is refused rather than turned into
    a string that might alias another (``True``, ``1.0``, an object's repr)."""
    for what, name in (("adapter", adapter), ("kind", kind)):
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise InvalidInputError(f"namespace key {what} must be a name of letters, digits and "
                                    f"'_.-', got {name!r}")
    if isinstance(value, bool) or not isinstance(value, (str, int, uuid.UUID)):
        raise InvalidTypeError(f"a {kind} must be a str, an int or a UUID, got "
                               f"{type(value).__name__}")
    text = value if isinstance(value, str) else str(value)
    if not text.strip():
        raise InvalidInputError(f"a {kind} must not be empty or whitespace")
    key = f"@{adapter}:{kind}:{escape_value(text)}"
    try:
        return NamespaceKey(validate_namespace(key))
    except NamespaceError as exc:
        raise NamespaceError(f"the {kind} {text[:40]!r}... is too long for a memory name: "
                             f"{exc}") from None


def parse_namespace_key(namespace: str) -> tuple[str, str, str] | None:
    """``(adapter, kind, value)`` of a namespace built by :func:`namespace_key`, else None."""
    m = _KEY_RE.match(namespace)
    return None if m is None else (m.group(1), m.group(2), unescape_value(m.group(3)))


def typed_key(namespace: str) -> NamespaceKey:
    """A key :func:`namespace_key` built, received as plain text (a server's request), as a
    :class:`NamespaceKey` again; :class:`InvalidInputError` unless ``namespace_key`` builds
    exactly this string (so no text can name a key the adapters would not build).

    >>> typed_key("@agent:user_id:alice") == namespace_key("agent", "user_id", "alice")
    True
    """
    parsed = parse_namespace_key(namespace) if isinstance(namespace, str) else None
    key = None
    if parsed is not None:
        try:
            key = namespace_key(*parsed)
        except (InvalidInputError, InvalidTypeError):
            key = None
    if key is None or key != namespace:
        raise InvalidInputError(f"{str(namespace)[:80]!r} is not an adapter key "
                                f"'@<adapter>:<kind>:<value>' as namespace_key builds it")
    return key


def _legacy_name(key: str) -> str | None:
    """The name the same key had before typed keys (0.1.0): ``user_id=alice`` for the
    agent adapters, ``<prefix>:<labels>`` for the LangGraph store. Memories stored under
    it stay readable (:meth:`EnginePool.get` opens them when the typed one does not
    exist). Chat histories had the raw session id: they are not aliased, since that is
    the string that collided."""
    parsed = parse_namespace_key(key)
    if parsed is None:
        return None
    adapter, kind, value = parsed
    name = {"agent": f"{kind}={value}", "store": f"{kind}:{value}"}.get(adapter)
    if name is None or not utf8_ok(name) or CONTROL_RE.search(name) or len(name) > 256:
        return None
    return name


def namespace_from_configurable(configurable: Mapping[str, Any] | None,
                                keys: Sequence[str], *, default: str | None = None) -> str:
    """The memory namespace for a run: the typed key ``namespace_key("agent", key, value)``
    of the FIRST of ``keys`` present in ``configurable`` (so with ``("user_id",
    "thread_id")`` a user's memory is shared by all their threads, and a run without a
    user id gets a per-thread memory). The LangChain agent middleware and tools and the
    LangGraph nodes use it, so they share a user's memory.

    Raises :class:`InvalidInputError` when none is present and no ``default`` is given.
    """
    configurable = configurable or {}
    for key in keys:
        value = configurable.get(key)
        if value is not None and not (isinstance(value, str) and not value.strip()):
            return namespace_key("agent", key, value)
    if default is not None:
        return default
    raise InvalidInputError(
        f"no memory namespace: pass one of {list(keys)} in config['configurable'], e.g. "
        f"graph.invoke(..., config={{'configurable': {{'{keys[0] if keys else 'thread_id'}': '42'}}}})"
    )


class EnginePool:
    """One :class:`~synapse_integrations.Synapse` per namespace, all under one ``path``.

    Adapters whose memory namespace is chosen per run (LangGraph nodes, the store, agent
    middleware, chat histories) take a pool; each namespace's engine is opened on first
    use. At most ``max_open`` engines stay open: opening one more closes (and saves) the
    least recently used, which reopens on its next use, so runs with ever new thread ids
    cannot pile up open engines and Chroma collections. An engine taken from the pool may
    thus be closed after ``max_open`` others were opened: take it from the pool for each
    use (the adapters do).

    >>> from synapse_integrations import EnginePool
    >>> from synapse_integrations.pool import namespace_key
    >>> pool = EnginePool("./memory")                                      # doctest: +SKIP
    >>> pool.get(namespace_key("agent", "user_id", 42)).add_turn("I like tea")  # doctest: +SKIP
    >>> pool.get("my-own-notes").add_turn("a namespace the application names")  # doctest: +SKIP
    >>> pool.close()                                                       # doctest: +SKIP

    Args:
        path: folder of the embedded Chroma and the snapshots; ``None`` for a temporary one
            (removed by :meth:`close`).
        max_open: engines kept open at most (least recently used closed first).
        **engine_kwargs: passed to every ``Synapse(...)`` (``embedder``, ``config``,
            ``client``, ``extractor``, ...).
    """

    def __init__(self, path: str | Path | None = None, *, max_open: int = DEFAULT_MAX_OPEN,
                 **engine_kwargs: Any) -> None:
        if isinstance(max_open, bool) or not isinstance(max_open, int) or max_open < 1:
            raise InvalidInputError(f"max_open must be an int >= 1, got {max_open!r}")
        self._owns_path = path is None
        self.path = Path(tempfile.mkdtemp(prefix="synapse-pool-")) if path is None else Path(path)
        self.max_open = max_open
        self._kwargs = dict(engine_kwargs)
        self._engines: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.RLock()

    def _exists(self, name: str) -> bool:
        return name in self._engines or (self.path / "namespaces" / namespace_dirname(name)).is_dir()

    def resolve(self, namespace: str) -> str:
        """The engine namespace ``namespace`` opens: a typed key (:func:`namespace_key`) as
        is, or its pre-typed-keys name when only that one holds a memory; a plain string
        as is (one starting with ``@``, the adapters' space, is refused)."""
        if isinstance(namespace, NamespaceKey):
            legacy = _legacy_name(namespace)
            if legacy is not None and not self._exists(namespace) and self._exists(legacy):
                return legacy
            return str(namespace)
        if not isinstance(namespace, str):
            raise InvalidTypeError(f"namespace must be a str, got {type(namespace).__name__}")
        if namespace.startswith("@"):
            raise InvalidInputError(
                f"namespaces starting with '@' are adapter keys: build them with "
                f"synapse_integrations.pool.namespace_key(adapter, kind, value), got {namespace!r}")
        return namespace

    def get(self, namespace: str) -> Any:
        """The engine of ``namespace`` (opened, or created, on first use)."""
        from .core.engine import Synapse

        evicted = []
        with self._lock:
            name = self.resolve(namespace)
            engine = self._engines.get(name)
            if engine is None or engine.closed:
                engine = Synapse(self.path, namespace=name, **self._kwargs)
                self._engines[name] = engine
            self._engines.move_to_end(name)
            while len(self._engines) > self.max_open:
                evicted.append(self._engines.popitem(last=False)[1])
        for old in evicted:  # outside the pool's lock: closing saves a snapshot
            logger.info("closing the least recently used memory %r (max_open=%d)",
                        old.namespace, self.max_open)
            old.close()
        return engine

    def drop(self, namespace: str) -> None:
        """Erase the memory of ``namespace`` for good (see :meth:`Synapse.drop`): its
        Chroma collections and their rows, its snapshots and folder. Others stay."""
        engine = self.get(namespace)
        with self._lock:
            self._engines.pop(engine.namespace, None)
        engine.drop()

    def opened(self) -> list[str]:
        """Namespaces whose engine is open in this pool."""
        with self._lock:
            return sorted(n for n, e in self._engines.items() if not e.closed)

    def namespaces(self) -> list[str]:
        """Namespaces stored under ``path`` plus those opened in this process."""
        from .core.engine import Synapse

        with self._lock:
            opened = set(self._engines)
        client = self._kwargs.get("client")
        if client is not None:
            from .storage.chroma import list_namespaces

            stored = set(list_namespaces(client))
        else:
            stored = set(Synapse.namespaces(self.path)) if (self.path / "chroma").exists() else set()
        return sorted(opened | stored)

    def save(self) -> None:
        """Snapshot every open engine."""
        with self._lock:
            for engine in self._engines.values():
                if not engine.closed:
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
