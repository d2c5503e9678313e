"""Who may use which memories: API keys, each bound to namespace patterns (no web
framework imported here; :mod:`.rest` and :mod:`.mcp` enforce it).

A server runs in one of three modes:

- no key (the loopback default): whoever can connect uses every namespace;
- one key (``--api-key KEY`` or ``SYNAPSE_API_KEY``): its holder uses every namespace,
  for one-user setups;
- a key file (``--key-file FILE``, or the same JSON in ``SYNAPSE_API_KEYS``): one key per
  app or tenant, each bound to the namespaces it may use, as :mod:`fnmatch` patterns
  matched case-sensitively against the namespace as the client names it (``alice``,
  ``team-*``, ``@agent:user_id:alice``; ``*`` is every namespace; ``[[]`` is a literal
  ``[``)::

      {"keys": [
          {"name": "alice-app", "key": "...", "namespaces": ["alice"]},
          {"name": "team-bot",  "key": "...", "namespaces": ["team-*"]},
          {"name": "operator",  "key": "...", "namespaces": ["*"]}]}

A request without a known key is refused (401) before its body is read; a request that
names a namespace outside its key's patterns is refused (403, the message names the key
and its patterns, never the key itself). A scoped key lists only its own namespaces, and an
MCP connection made with a key bound to exactly one namespace needs no ``namespace``
argument. Keys are compared in constant time (their SHA-256 digests, every key each time).

>>> ring = KeyRing.parse('{"keys": [{"name": "a", "key": "key-alice", "namespaces": ["alice"]},'
...                      ' {"name": "t", "key": "key-team", "namespaces": ["team-*"]}]}')
>>> key = ring.find("key-team")
>>> key.name, key.allows("team-red"), key.allows("alice"), key.only
('t', True, False, None)
>>> ring.find("key-alice").only
'alice'
>>> key.check("alice")
Traceback (most recent call last):
...
synapse_integrations.server.access.AccessDeniedError: key 't' may use the namespaces matching 'team-*' only, not 'alice'
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError, NamespaceError, SynapseError

__all__ = ["STATE_KEY", "AccessDeniedError", "ApiKey", "KeyRing", "bind_namespace", "key_ring", "presented_key"]

#: Where the access check leaves the request's :class:`ApiKey` in the ASGI scope's
#: ``state`` (``request.state.synapse_api_key``), for the handlers and MCP tools.
STATE_KEY = "synapse_api_key"
_WILDCARDS = frozenset("*?[")


class AccessDeniedError(SynapseError, PermissionError):
    """The API key is valid but not for this namespace (HTTP 403); the message names the
    key and the patterns it may use."""


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def _sendable(secret: Any) -> bool:
    """A key a client can send as a header value: printable ASCII, no spaces."""
    return isinstance(secret, str) and bool(secret) and all("!" <= c <= "~" for c in secret)


@dataclasses.dataclass(frozen=True)
class ApiKey:
    """One key: a ``name`` (shown in errors and logs, never the secret), the SHA-256
    ``digest`` of its secret and the ``namespaces`` patterns it may use."""

    name: str
    digest: bytes = dataclasses.field(repr=False)
    namespaces: tuple[str, ...]

    @classmethod
    def of(cls, name: str, secret: str, namespaces: Iterable[str] = ("*",)) -> ApiKey:
        """A key from its secret (kept only as a digest)."""
        return cls(name, _digest(secret), tuple(namespaces))

    @property
    def unscoped(self) -> bool:
        """Whether the key may use every namespace (its patterns include ``*``)."""
        return "*" in self.namespaces

    @property
    def only(self) -> str | None:
        """The one namespace the key may use, when its single pattern has no wildcard (an
        MCP connection with this key is bound to it); else None."""
        if len(self.namespaces) == 1 and not _WILDCARDS & set(self.namespaces[0]):
            return self.namespaces[0]
        return None

    def allows(self, namespace: str) -> bool:
        """Whether ``namespace`` (as the client names it) matches one of the patterns."""
        return any(fnmatch.fnmatchcase(namespace, p) for p in self.namespaces)

    def rule(self) -> str:
        """The rule, for error messages: ``key 'a' may use the namespaces matching 'x'``."""
        return f"key {self.name!r} may use the namespaces matching {', '.join(map(repr, self.namespaces))}"

    def check(self, namespace: str) -> str:
        """``namespace`` if the key allows it, else :class:`AccessDeniedError`."""
        if not self.allows(namespace):
            raise AccessDeniedError(f"{self.rule()} only, not {namespace[:200]!r}")
        return namespace


class KeyRing:
    """The keys a server accepts (see the module doc); :meth:`find` is the only lookup."""

    def __init__(self, keys: Iterable[ApiKey]) -> None:
        self.keys = tuple(keys)
        if not self.keys:
            raise InvalidInputError("a key ring needs at least one key")
        for attr in ("name", "digest"):
            seen: dict[Any, ApiKey] = {}
            for key in self.keys:
                other = seen.setdefault(getattr(key, attr), key)
                if other is not key:
                    what = "secret" if attr == "digest" else "name"
                    raise InvalidInputError(f"two API keys have the same {what}: {other.name!r} and {key.name!r}")

    def __repr__(self) -> str:
        return f"KeyRing({[k.name for k in self.keys]})"

    @classmethod
    def single(cls, secret: str) -> KeyRing:
        """The one-user mode: one key, every namespace."""
        if not _sendable(secret):
            raise InvalidInputError("the API key must be printable ASCII characters, no spaces "
                                    "(it travels in an HTTP header)")
        return cls([ApiKey.of("api-key", secret)])

    @classmethod
    def parse(cls, text: str, *, source: str = "the key file") -> KeyRing:
        """Keys from JSON ``{"keys": [{"name", "key", "namespaces": [patterns]}, ...]}``;
        :class:`InvalidInputError` naming ``source`` and the entry when it is not that."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidInputError(f"{source} is not JSON: {exc}") from None
        entries = data.get("keys") if isinstance(data, Mapping) else None
        if not isinstance(entries, list) or not entries:
            raise InvalidInputError(f'{source} must be {{"keys": [{{"name": ..., "key": ..., '
                                    f'"namespaces": [...]}}, ...]}} with at least one key')
        keys = []
        for i, entry in enumerate(entries):
            where = f"{source}, key {i}"
            if not isinstance(entry, Mapping) or set(entry) - {"name", "key", "namespaces"}:
                raise InvalidInputError(f"{where}: an object of name, key and namespaces only")
            name, secret, patterns = entry.get("name"), entry.get("key"), entry.get("namespaces")
            if not isinstance(name, str) or not name.strip():
                raise InvalidInputError(f"{where}: name must be a non-empty string")
            if not _sendable(secret) or len(secret) < 8:
                raise InvalidInputError(f"{where} ({name!r}): key must be at least 8 printable ASCII "
                                        "characters, no spaces (it travels in an HTTP header)")
            if not isinstance(patterns, list) or not patterns or \
                    not all(isinstance(p, str) and p for p in patterns):
                raise InvalidInputError(f"{where} ({name!r}): namespaces must be a non-empty list "
                                        "of patterns (e.g. [\"alice\"], [\"team-*\"], [\"*\"])")
            keys.append(ApiKey.of(name, secret, patterns))
        try:
            return cls(keys)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{source}: {exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> KeyRing:
        """Keys from a key file (see :meth:`parse`)."""
        try:
            text = Path(path).read_text("utf-8")
        except OSError as exc:
            raise InvalidInputError(f"cannot read the key file {path}: {exc}") from None
        return cls.parse(text, source=f"the key file {path}")

    def __add__(self, other: KeyRing) -> KeyRing:
        return KeyRing(self.keys + other.keys)

    @property
    def scoped(self) -> bool:
        """Whether some key is bound to fewer than every namespace."""
        return any(not k.unscoped for k in self.keys)

    def find(self, given: str | None) -> ApiKey | None:
        """The key whose secret is ``given`` (None if none): its digest is compared with
        every key's, in constant time, with no early exit."""
        if not given:
            return None
        digest = _digest(given)
        found = None
        for key in self.keys:
            if hmac.compare_digest(digest, key.digest):
                found = key
        return found


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request presents: ``X-API-Key: KEY`` or ``Authorization: Bearer KEY``
    (``headers`` with lower-case names)."""
    given = headers.get("x-api-key") or ""
    auth = headers.get("authorization") or ""
    if not given and auth[:7].lower() == "bearer ":
        given = auth[7:].strip()
    return given or None


def bind_namespace(key: ApiKey | None, namespace: str | None) -> str:
    """The namespace a call uses: ``namespace`` if the key allows it; the key's own when
    ``namespace`` is None and the key is bound to exactly one (``key`` None: no keys, any
    namespace, which must then be given)."""
    if namespace is None:
        if key is not None and key.only is not None:
            return key.only
        why = f"{key.rule()}, more than one" if key is not None else "this server binds no key to one"
        raise NamespaceError(f"namespace is required ({why})")
    return namespace if key is None else key.check(namespace)


def key_ring(api_key: str | None = None, keys: KeyRing | None = None) -> KeyRing | None:
    """The keys of a server: the single ``api_key`` (every namespace) and/or ``keys``;
    None when neither (no key needed)."""
    single = KeyRing.single(api_key) if api_key else None
    if single is not None and keys is not None:
        return single + keys
    return single or keys
