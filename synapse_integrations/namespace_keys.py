"""The typed namespace keys every adapter builds with :func:`namespace_key`, so that one
memory per user, thread or session (:class:`~synapse_integrations.pool.EnginePool`) is
never another adapter's.

Adapters name a memory from strings a client chooses (a LangGraph ``thread_id``, a chat
``session_id``, a store namespace). So that no such string can name another adapter's
memory, or another kind of key's, each adapter key is **typed**: the adapter, the key's
kind and the escaped value, ``"@<adapter>:<kind>:<value>"``. Whatever the value holds
(``:``, ``=``, ``@``, control characters), the adapter and kind in front are fixed by the
adapter, so ``@history:session:...`` can never be ``@agent:user_id:alice``. Plain strings
passed to :meth:`EnginePool.get <synapse_integrations.pool.EnginePool.get>` are the
application's own names; they may not start with ``@`` (that space is the adapters').

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

import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .core.state.validation import CONTROL_RE, utf8_ok, validate_namespace
from .errors import InvalidInputError, InvalidTypeError, NamespaceError

__all__ = ["NamespaceKey", "escape_value", "legacy_name", "namespace_from_configurable",
           "namespace_key", "parse_namespace_key", "typed_key", "unescape_value"]

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_KEY_RE = re.compile(r"^@([A-Za-z_][A-Za-z0-9_.-]{0,63}):([A-Za-z_][A-Za-z0-9_.-]{0,63}):(.+)$", re.S)
_ESCAPE_RE = re.compile(r"%|" + CONTROL_RE.pattern[1:-1].join("[]") + r"|[\ud800-\udfff]")


class NamespaceKey(str):
    """An engine namespace built by :func:`namespace_key` (a ``str``): the only strings
    :meth:`EnginePool.get <synapse_integrations.pool.EnginePool.get>` accepts in the
    adapters' ``@`` space."""

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


def legacy_name(key: str) -> str | None:
    """The name the same key had before typed keys (0.1.0): ``user_id=alice`` for the
    agent adapters, ``<prefix>:<labels>`` for the LangGraph store. Memories stored under
    it stay readable (:meth:`EnginePool.get <synapse_integrations.pool.EnginePool.get>`
    opens them when the typed one does not exist). Chat histories had the raw session id:
    they are not aliased, since that is the string that collided."""
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

