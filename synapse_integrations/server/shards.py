"""More than one memory server: namespaces spread over shards behind HAProxy.

Each shard is a ``synapse serve http`` process owning its own folder. A namespace lives on
exactly one shard, chosen by rendezvous (highest-random-weight) hashing: every shard
scores the namespace (:func:`score`: FNV-1a 64 of ``shard + "\\0" + namespace``, finalised)
and the highest score owns it. Adding a shard
takes about ``1/N`` of the namespaces (the ones the new shard now outscores) and moves no
other; removing one moves only its own. The proxy and this module compute the same
function: :func:`haproxy_files` writes an HAProxy configuration whose Lua fetch routes each
``/v1/namespaces/{namespace}/...`` request to its owner, and :func:`owner` answers the
same question in Python (for operators, and for the tests that check both agree).

Why HAProxy: it ships in Debian, routes on a computed key with a small embedded Lua
function, and turns a shard it cannot reach into a 503 without trying another shard
(which would split a namespace over two folders). nginx's ``hash ... consistent`` would
route by a ketama ring that operator tools cannot recompute without reimplementing it.

The namespace is read from the path as the client sent it, percent-decoded
(``a%2Fb`` is ``a/b``). Requests without one (``/health``, ``/metrics``,
``GET /v1/namespaces``) go to the first shard. A shard that is down answers its
namespaces' requests with a 503 in the API's error shape (with ``Retry-After``): clients
retry; the other shards' namespaces are not affected.

>>> owner("alice", ["s1", "s2", "s3"]) in {"s1", "s2", "s3"}
True
>>> hex(fnv1a64(b"a"))
'0xaf63dc4c8601ec8c'
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError

__all__ = ["copy_namespace", "fnv1a64", "haproxy_files", "holds_all", "moves", "owner",
           "parse_shards", "rebalance", "score", "write_haproxy"]

_OFFSET = 0xCBF29CE484222325
_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


def fnv1a64(data: bytes) -> int:
    """The 64-bit FNV-1a hash of ``data``."""
    h = _OFFSET
    for b in data:
        h = ((h ^ b) * _PRIME) & _MASK
    return h


def score(shard: str, namespace: str) -> int:
    """A shard's rendezvous score for a namespace: FNV-1a 64 of ``shard + "\\0" +
    namespace`` through MurmurHash3's 64-bit finaliser (FNV alone mixes its last bytes
    too little: names that differ in their first byte would rank alike on every
    namespace). The proxy's Lua computes the same."""
    h = fnv1a64(shard.encode("utf-8") + b"\0" + namespace.encode("utf-8"))
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _MASK
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _MASK
    h ^= h >> 33
    return h


def owner(namespace: str, shards: Sequence[str]) -> str:
    """The shard that owns ``namespace`` (as the client names it in the path): the one
    with the highest :func:`score`; a tie goes to the shard listed first."""
    if not shards:
        raise InvalidInputError("owner() needs at least one shard")
    best, best_h = shards[0], -1
    for name in shards:
        h = score(name, namespace)
        if h > best_h:
            best, best_h = name, h
    return best


def parse_shards(specs: Sequence[str]) -> dict[str, str]:
    """``["s1=127.0.0.1:8801", ...]`` as ``{"s1": "127.0.0.1:8801"}``, checked: names of
    letters, digits, ``_`` and ``-`` (they are hashed: keep a shard's name when its
    address changes), each ``HOST:PORT``, no name twice."""
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, addr = spec.partition("=")
        host, colon, port = addr.rpartition(":")
        if not sep or not _NAME.match(name):
            raise InvalidInputError(f"a shard is NAME=HOST:PORT with a name of letters, digits, "
                                    f"'_' or '-' (at most 32), got {spec!r}")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidInputError(f"shard {name!r}: the address must be HOST:PORT, got {addr!r}")
        if name in out:
            raise InvalidInputError(f"shard {name!r} is given twice")
        out[name] = addr
    if not out:
        raise InvalidInputError("give at least one shard (NAME=HOST:PORT)")
    return out


_LUA = """-- Written by `synapse shards haproxy`: the shard owning a request's namespace, by
-- rendezvous hashing over FNV-1a 64 (synapse_integrations/server/shards.py computes the same).
local SHARDS = {shards}
local PRIME = 1099511628211
local OFFSET = -3750763034362895579  -- 0xcbf29ce484222325 as a signed 64-bit integer

local function score(s)
  local h = OFFSET
  for i = 1, #s do
    h = (h ~ s:byte(i)) * PRIME  -- Lua 5.3 integers wrap around: arithmetic mod 2^64
  end
  -- MurmurHash3's 64-bit finaliser (>> is a logical shift; hex literals wrap to signed)
  h = h ~ (h >> 33)
  h = h * 0xff51afd7ed558ccd
  h = h ~ (h >> 33)
  h = h * 0xc4ceb9fe1a85ec53
  return h ~ (h >> 33)
end

core.register_fetches("synapse_shard", function(txn)
  local ns = txn:get_var("txn.ns")
  if ns == nil or ns == "" then return SHARDS[1] end
  local best, best_h = SHARDS[1], nil
  for _, name in ipairs(SHARDS) do
    local h = score(name .. "\\0" .. ns)
    if best_h == nil or math.ult(best_h, h) then best, best_h = name, h end
  end
  return best
end)
"""

_CFG = """# Written by `synapse shards haproxy`: {n} memory servers behind one address; each
# namespace goes to the shard that owns it (synapse_shard.lua). No health checks and no
# redispatch: a shard that is down answers its own namespaces with a 503 at once (no
# retries here: HAProxy waits a second before each; the client retries on Retry-After),
# and no request is ever sent to a shard that does not own its namespace.
global
    lua-load {lua}

defaults
    mode http
    timeout connect 2s
    timeout client 300s
    timeout server 300s
    retries 0
    errorfile 502 {dir}/502.http
    errorfile 503 {dir}/503.http
    errorfile 504 {dir}/504.http

frontend memory
    bind {bind}
    http-request set-var(txn.ns) path,field(4,/),url_dec if {{ path_beg /v1/namespaces/ }}
    use_backend shard_%[lua.synapse_shard]
{backends}"""

_ERROR = ("HTTP/1.0 {status} {reason}\r\nCache-Control: no-cache\r\nConnection: close\r\n"
          "Content-Type: application/json\r\nRetry-After: 1\r\n\r\n{body}\n")


def haproxy_files(shards: Mapping[str, str], *, bind: str = "127.0.0.1:8765",
                  directory: str | Path = ".") -> dict[str, str]:
    """The proxy's files, by name: ``haproxy.cfg``, ``synapse_shard.lua`` and the error
    pages (``503.http``...: the API's JSON error, ``Retry-After: 1``), for ``shards``
    (``{name: "HOST:PORT"}``, in a fixed order: the first also takes the requests that
    name no namespace), listening on ``bind``; the configuration refers to the others by
    their path in ``directory``."""
    if not shards:
        raise InvalidInputError("give at least one shard")
    d = Path(directory).resolve()
    names = list(shards)
    backends = "".join(f"\nbackend shard_{name}\n    server {name} {addr}\n"
                       for name, addr in shards.items())
    files = {
        "synapse_shard.lua": _LUA.format(shards="{" + ", ".join(json.dumps(n) for n in names) + "}"),
        "haproxy.cfg": _CFG.format(n=len(names), lua=d / "synapse_shard.lua", dir=d, bind=bind,
                                   backends=backends),
    }
    for status, reason, why in ((502, "Bad Gateway", "stopped answering"),
                                (503, "Service Unavailable", "is unavailable"),
                                (504, "Gateway Timeout", "did not answer in time")):
        body = json.dumps({"error": {"type": "StorageError", "status": status,
                                     "message": f"the memory server of this namespace {why} "
                                                f"(the proxy's answer); retry"}})
        files[f"{status}.http"] = _ERROR.format(status=status, reason=reason, body=body)
    return files


def write_haproxy(directory: str | Path, shards: Mapping[str, str], *,
                  bind: str = "127.0.0.1:8765") -> Path:
    """Write :func:`haproxy_files` into ``directory`` (created); returns the path of
    ``haproxy.cfg`` (run ``haproxy -f`` on it)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for name, text in haproxy_files(shards, bind=bind, directory=d).items():
        (d / name).write_text(text, encoding="utf-8")
    return d / "haproxy.cfg"


# ---------------------------------------------------------------------------------------
# moving namespaces when the shards change
# ---------------------------------------------------------------------------------------
def moves(held: Mapping[str, Sequence[str]], new_shards: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``{namespace: (source, target)}`` for the namespaces a shard holds
    (``held[shard]``) that another shard owns under ``new_shards``."""
    return {ns: (shard, owner(ns, new_shards)) for shard, names in held.items() for ns in names
            if owner(ns, new_shards) != shard}


def copy_namespace(source: Any, target: Any, *, batch: int = 256) -> int:
    """Copy the episodes of ``source`` (a :class:`~.client.RemoteMemory`) that ``target``
    lacks, with their ids, times, speakers, metadata, stored vectors and version links
    (archived ones archived again); returns how many. Run again, it copies only what is
    new."""
    from .transfer import link_versions

    have = {e["id"] for e in target.episodes()}
    todo = [line for line in source.export(with_vectors=True) if line["id"] not in have]
    archived: list[str] = []
    for k in range(0, len(todo), batch):
        chunk = todo[k:k + batch]
        turns = [{key: line[key] for key in ("id", "text", "speaker", "timestamp", "metadata", "vector")
                  if line.get(key) is not None} for line in chunk]
        ids = target.add_turns(turns)
        archived += [i for i, line in zip(ids, chunk) if line.get("archived")]
    link_versions(target, todo)
    if archived:
        target.archive(archived)
    return len(todo)


def holds_all(source: Any, target: Any) -> bool:
    """Whether ``target`` holds every episode of ``source`` (same id, same text; once the
    proxy routes to the target it may hold newer ones too)."""
    def rows(mem: Any) -> set[tuple[str, str]]:
        return {(e["id"], e["text"]) for e in mem.episodes()}
    return rows(source) <= rows(target)


def rebalance(old: Mapping[str, str], new: Mapping[str, str], *, finish: bool = False,
              api_key: str | None = None, log: Any = None) -> dict[str, Any]:
    """Move the namespaces whose owner changes from the shards ``old`` to ``new``
    (``{name: "HOST:PORT"}`` each), in two steps around the proxy's switch:

    1. (``finish=False``) each moving namespace is frozen at its source (its writes are
       503s to retry, its reads served), copied to its new owner and checked there;
    2. the operator reloads HAProxy with ``new`` (``synapse shards haproxy``);
    3. (``finish=True``) what reached a source meanwhile (a source that restarted forgot
       its freeze) is copied too and checked, then the namespace is erased at the source.

    Returns ``{"moved": {ns: [source, target]}, "copied": n, "erased": n}``; raises
    :class:`StorageError` when a copy does not match (nothing is erased then)."""
    import httpx

    from ..errors import StorageError
    from .client import RemoteMemory

    url = {name: f"http://{addr}" for name, addr in {**old, **new}.items()}
    held: dict[str, list[str]] = {}
    headers = {"X-API-Key": api_key} if api_key else {}
    for name in old:
        try:
            r = httpx.get(f"{url[name]}/v1/namespaces", headers=headers, timeout=60)
        except httpx.TransportError as exc:
            raise StorageError(f"shard {name!r} at {url[name]} cannot be reached: {exc}") from exc
        if r.status_code != 200:
            raise StorageError(f"shard {name!r} at {url[name]} refused to list its namespaces "
                               f"(HTTP {r.status_code}: {r.text[:200]})")
        held[name] = r.json()["namespaces"]
    plan = moves(held, list(new))
    copied = erased = 0
    for ns, (src_name, dst_name) in sorted(plan.items()):
        with RemoteMemory(url[src_name], ns, api_key=api_key, create=False) as src, \
                RemoteMemory(url[dst_name], ns, api_key=api_key) as dst:
            if not src.stats().get("episodes") and not finish:
                continue  # an empty namespace (erased by an earlier move): nothing to carry
            src.freeze(True)
            copied += copy_namespace(src, dst)
            if not holds_all(src, dst):
                raise StorageError(f"namespace {ns!r}: {dst_name} lacks episodes of "
                                   f"{src_name} after the copy; nothing was erased (run again)")
            if finish:
                src.freeze(False)
                erased += len(src.forget(everything=True))
        if log is not None:
            log(f"{ns}: {src_name} -> {dst_name}{' (erased at the source)' if finish else ''}")
    return {"moved": {ns: list(pair) for ns, pair in plan.items()}, "copied": copied, "erased": erased}
