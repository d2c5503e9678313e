"""``SynapseStore``: a LangGraph ``BaseStore`` whose search is SYNAPSE retrieval.

Every LangGraph namespace (a tuple such as ``("memories", "user-42")``) is one SYNAPSE memory
(engine namespace ``"<prefix>:memories.user-42"``; LangGraph forbids ``.`` inside labels, so the
mapping is reversible). Every item is one episodic node of that memory: its text is what is
indexed (the item's string fields, or the fields named by ``index``), and the item itself
(namespace, key, JSON value, creation and update times) rides along as the node's metadata.
So ``search(namespace, query=...)`` runs the full SYNAPSE retrieval (BM25 + dense anchors,
spreading activation over the episodes and the concepts consolidated from them, hybrid score,
uncertainty gate) inside each matching namespace, and ``SearchItem.score`` is the hybrid score.
Two reserved ``filter`` keys read the memory in time: ``"$as_of"`` and ``"$current_only"``
(:data:`AS_OF`, :data:`CURRENT_ONLY`; also the keywords ``as_of=`` / ``current_only=`` of
:meth:`SynapseStore.search`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._adapter_utils import EnginePool, list_episodes, namespace_key, require, time_kwargs
from ..gate_judge import LLMGateJudge
from ..namespace_keys import escape_value, parse_namespace_key, unescape_value

require("langgraph", "langgraph")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    tokenize_path,
)

from .filters import AS_OF, CURRENT_ONLY, held, matches, time_of, with_time  # noqa: E402

__all__ = ["AS_OF", "CURRENT_ONLY", "SynapseStore"]

_META = "langgraph_store"  # the turn-metadata key holding the item



#: Longest item key accepted (characters, once escaped): the key is part of the node id.
MAX_KEY_CHARS = 480


def _node_ids(key: str) -> list[str]:
    """The ids an item's versions may have: ``kv:<escaped key>#a`` and ``#b`` (an update
    writes the free one before the old one is removed), and the id of items stored before
    keys were kept in ids (``kv-<sha256>``). The key is an identifier: it lives in the
    id, which the write firewall does not rewrite, so a key holding an e-mail address
    can be read, updated and deleted with any firewall setting."""
    esc = escape_value(key)
    if len(esc) > MAX_KEY_CHARS:
        raise ValueError(f"store keys are limited to {MAX_KEY_CHARS} characters (escaped), "
                         f"got {len(esc)}")
    return [f"kv:{esc}#a", f"kv:{esc}#b", _legacy_id(key)]


def _legacy_id(key: str) -> str:
    return "kv-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _key_of(node_id: str, rec: Mapping[str, Any]) -> str | None:
    """The item key of a stored version (None: not a store item)."""
    if node_id.startswith("kv:") and "#" in node_id:
        return unescape_value(node_id[3:].rpartition("#")[0])
    return rec.get("key") if node_id.startswith("kv-") else None


def _string_leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _string_leaves(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _string_leaves(v)]
    return []


def _check_labels(namespace: Sequence[Any]) -> None:
    """LangGraph's label rules (non-empty strings without ``.`` or NUL), also for ops passed
    straight to ``batch``: a ``.`` would break the reversible namespace mapping."""
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"invalid namespace label {label!r} in {tuple(namespace)}: labels must be non-empty "
                "strings without '.' or NUL")


def _namespacematches(ns: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(ns) < len(path):
        return False
    part = ns[:len(path)] if condition.match_type == "prefix" else ns[len(ns) - len(path):]
    return all(p == "*" or p == n for p, n in zip(path, part))


class SynapseStore(BaseStore):
    """A LangGraph store backed by SYNAPSE memories (one per namespace), sync and async.

    Use it wherever LangGraph takes a store: ``builder.compile(store=store)``,
    ``create_agent(..., store=store)``, or directly. Values are JSON dicts; ``get``, ``put``,
    ``delete``, ``search`` (with ``filter``, ``limit``, ``offset`` and an optional natural
    language ``query``) and ``list_namespaces`` behave as LangGraph documents them.

    >>> from synapse_integrations.langgraph import SynapseStore
    >>> store = SynapseStore("./memory")                                     # doctest: +SKIP
    >>> store.put(("memories", "u42"), "pet", {"text": "Sam has a beagle called Biscuit"})  # doctest: +SKIP
    >>> store.get(("memories", "u42"), "pet").value                          # doctest: +SKIP
    {'text': 'Sam has a beagle called Biscuit'}
    >>> [i.key for i in store.search(("memories",), query="What is the dog's name?")]  # doctest: +SKIP
    ['pet']
    >>> store.close()                                                        # doctest: +SKIP

    Semantics worth knowing:

    - A query search ranks by SYNAPSE's hybrid score and honours the uncertainty gate: when
      the gate rejects the query in a namespace, that namespace contributes **no** items (set
      ``gate=False`` to get the ranked items anyway). Only items the retrieval reached are
      returned (the BM25/dense anchors and what activation spread to), so a query search can
      return fewer than ``limit`` items even when more exist.
    - A search without a query lists the matching items, most recently updated first.
    - ``index=False`` on ``put`` keeps the item out of query results (it is still a node of
      the memory graph, since SYNAPSE stores every item as an episode); ``index=[paths]``
      chooses the fields whose text is indexed (LangGraph's path syntax).
    - Updating a key writes the new version first and only then forgets the old one
      (``created_at`` is kept): an update the engine refuses (too long, blocked by the
      firewall, a storage or embedding error) raises and leaves the item as it was.
      Deleting forgets every version for good (:meth:`Synapse.forget`, which also scrubs
      the text from Chroma and old snapshots).
    - Values pass through the engine's write firewall (secrets are redacted by default);
      keys are identifiers, kept in the node id as given (escaped), never redacted: do not
      put secrets in keys. Keys are at most 480 characters once escaped.
    - TTLs are not supported (``supports_ttl = False``).
    - Time: ``filter={"$as_of": "2024-02-15"}`` (or ``search(..., as_of=...)``) reads the
      store as it stood then: an item counts from when it was put, and items put later are
      left out, in query searches and listings alike. The store keeps one version per key
      (a put replaces the value), so an item rewritten after ``as_of`` is left out too: its
      earlier value is not kept. ``{"$current_only": True}`` leaves out items whose node a
      newer one replaced on the memory itself (``Synapse.supersede``/``update`` through
      the pool). The other filter keys still match the value's fields.

    >>> store.search(("memories",), query="Where does Sam live?",
    ...              filter={"$as_of": "2024-02-15", "city": "Porto"})   # doctest: +SKIP

    Args:
        path: a folder (embedded Chroma + snapshots), an existing :class:`EnginePool` to share
            with other adapters, or ``None`` for a temporary folder removed by :meth:`close`.
        prefix: engine-namespace prefix that keeps the store's memories apart from others in
            the same folder.
        gate: honour the uncertainty gate in query searches.
        judge: an optional :class:`~synapse_integrations.gate_judge.LLMGateJudge` (any chat
            model) that reviews what the offline gate accepted in query searches (with
            ``gate``; ``abatch`` runs it in the worker thread like the rest of a batch).
        index_fields: default paths of the text to index (LangGraph path syntax, e.g.
            ``["content", "tags[*]"]``); ``None`` indexes every string in the value.
        **engine_kwargs: passed to each ``Synapse(...)`` when ``path`` is not a pool
            (``embedder``, ``config``, ``client``, ...).
    """

    supports_ttl = False

    def __init__(self, path: str | Path | EnginePool | None = None, *, prefix: str = "store",
                 gate: bool = True, index_fields: Sequence[str] | None = None,
                 judge: LLMGateJudge | None = None, **engine_kwargs: Any) -> None:
        if isinstance(path, EnginePool):
            if engine_kwargs:
                raise TypeError("pass engine options to the EnginePool, not to SynapseStore")
            self.pool, self._owns_pool = path, False
        else:
            self.pool, self._owns_pool = EnginePool(path, **engine_kwargs), True
        if not isinstance(prefix, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$", prefix):
            raise ValueError("prefix must be a name of letters, digits, '_' and '-'")
        self.prefix = prefix
        self.gate = gate
        self.judge = judge
        self.index_fields = None if index_fields is None else list(index_fields)
        self._lock = threading.RLock()
        self._stored: set[str] | None = None

    # -- mapping ---------------------------------------------------------------------------
    def _engine_ns(self, namespace: tuple[str, ...]) -> str:
        # a typed key (store, prefix, labels): no label can name another adapter's memory
        return namespace_key("store", self.prefix, ".".join(namespace))

    def _labels(self, name: str) -> tuple[str, ...] | None:
        """The LangGraph namespace of an engine namespace of this store (typed, or the
        ``<prefix>:<labels>`` name of memories stored before typed keys), else None."""
        parsed = parse_namespace_key(name)
        if parsed is not None:
            adapter, kind, value = parsed
            return tuple(value.split(".")) if (adapter, kind) == ("store", self.prefix) else None
        head = f"{self.prefix}:"
        return tuple(name[len(head):].split(".")) if name.startswith(head) else None

    def _store_namespaces(self) -> list[tuple[str, ...]]:
        if self._stored is None:  # listing Chroma's collections is slow: once per store
            self._stored = set(self.pool.namespaces())
        names = self._stored | set(self.pool.opened())
        return sorted({labels for n in names if (labels := self._labels(n)) is not None})

    def _text(self, value: Mapping[str, Any], index: Sequence[str] | None) -> str:
        paths = index if index is not None else self.index_fields
        if paths is None:
            texts = _string_leaves(value)
        else:
            texts = [t for p in paths for t in get_text_at_path(value, tokenize_path(p)) if t.strip()]
        return "\n".join(texts) if texts else json.dumps(value, ensure_ascii=False, sort_keys=True)

    def _records(self, namespace: tuple[str, ...], as_of: float | None = None,
                 current_only: bool = False) -> list[dict[str, Any]]:
        """The stored items of one namespace, one per key (the newest version when an
        update was cut short), in ingestion order: ``_META`` dicts with ``key``, ``id``
        and ``namespace`` added. With ``as_of`` / ``current_only``: those the memory held
        then (:func:`_held`)."""
        engine = self.pool.get(self._engine_ns(namespace))
        found: dict[str, dict[str, Any]] = {}
        for ep in list_episodes(engine):
            if not held(ep, as_of, current_only):
                continue
            rec = self._record(ep["id"], ep.get("metadata"), namespace)
            if rec is not None and (rec["key"] not in found
                                    or rec["updated_at"] >= found[rec["key"]]["updated_at"]):
                found.pop(rec["key"], None)
                found[rec["key"]] = rec
        return list(found.values())

    @staticmethod
    def _record(node_id: str, metadata: Mapping[str, Any] | None,
                namespace: tuple[str, ...]) -> dict[str, Any] | None:
        rec = (metadata or {}).get(_META)
        key = _key_of(node_id, rec) if isinstance(rec, Mapping) else None
        if key is None:
            return None
        return {**rec, "key": key, "id": node_id, "namespace": list(namespace)}

    def _versions(self, engine: Any, namespace: tuple[str, ...], key: str) -> list[dict[str, Any]]:
        """The stored versions of ``key`` (newest first)."""
        out = []
        for node_id in _node_ids(key):
            if engine.contains(node_id):
                rec = self._record(node_id, engine.get(node_id, include_archived=True)
                                   .get("metadata"), namespace)
                if rec is not None and rec["key"] == key or node_id == _legacy_id(key) and rec:
                    out.append({**rec, "key": key})
        return sorted(out, key=lambda r: r["updated_at"], reverse=True)

    @staticmethod
    def _item(rec: Mapping[str, Any], cls: type = Item, **extra: Any) -> Any:
        return cls(value=rec["value"], key=rec["key"], namespace=tuple(rec["namespace"]),
                   created_at=datetime.fromisoformat(rec["created_at"]),
                   updated_at=datetime.fromisoformat(rec["updated_at"]), **extra)

    # -- search with time ------------------------------------------------------------------
    def search(self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None,
               filter: dict[str, Any] | None = None, limit: int = 10, offset: int = 0,
               refresh_ttl: bool | None = None, as_of: datetime | float | str | None = None,
               current_only: bool = False) -> list[SearchItem]:
        """LangGraph's ``search``, plus ``as_of`` and ``current_only``: the same as the
        reserved filter keys ``"$as_of"`` / ``"$current_only"`` (which code that only
        knows ``BaseStore`` passes in ``filter``).

        >>> store.search(("memories", "u42"), query="Where does Sam live?",
        ...              as_of="2024-02-15")                              # doctest: +SKIP
        """
        return super().search(namespace_prefix, query=query, limit=limit, offset=offset,
                              refresh_ttl=refresh_ttl,
                              filter=with_time(filter, as_of, current_only))

    async def asearch(self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None,
                      filter: dict[str, Any] | None = None, limit: int = 10, offset: int = 0,
                      refresh_ttl: bool | None = None,
                      as_of: datetime | float | str | None = None,
                      current_only: bool = False) -> list[SearchItem]:
        """Async twin of :meth:`search`."""
        return await super().asearch(namespace_prefix, query=query, limit=limit, offset=offset,
                                     refresh_ttl=refresh_ttl,
                                     filter=with_time(filter, as_of, current_only))

    # -- operations ------------------------------------------------------------------------
    def _get(self, op: GetOp) -> Item | None:
        if not op.namespace or op.namespace not in self._store_namespaces():
            return None
        engine = self.pool.get(self._engine_ns(op.namespace))
        versions = self._versions(engine, tuple(op.namespace), op.key)
        return self._item(versions[0]) if versions else None

    def _search(self, op: SearchOp) -> list[SearchItem]:
        flt, as_of, current_only = time_of(op.filter)
        time = time_kwargs(as_of, current_only)
        prefix = tuple(op.namespace_prefix)
        namespaces = [ns for ns in self._store_namespaces() if ns[:len(prefix)] == prefix]
        hits: list[tuple[float | None, dict[str, Any]]] = []
        for ns in namespaces:
            if op.query:
                engine = self.pool.get(self._engine_ns(ns))
                stats = engine.stats()
                size = stats["episodes"] + stats["concepts"]
                if size == 0:
                    continue
                result = engine.retrieve(op.query, k=size, **time)
                if self.judge is not None and self.gate:
                    result = self.judge.review(result)
                if result.rejected and self.gate:
                    continue
                best: dict[str, tuple[float, dict[str, Any]]] = {}
                for it in result.items:
                    rec = self._record(it.id, it.metadata, ns) if it.kind == "episode" else None
                    if rec is not None and rec.get("indexed", True) and matches(rec["value"], flt):
                        seen = best.get(rec["key"])  # one hit per key: its newest version
                        if seen is None or rec["updated_at"] > seen[1]["updated_at"]:
                            best[rec["key"]] = (it.score, rec)
                hits += best.values()
            else:
                hits += [(None, rec) for rec in self._records(ns, as_of, current_only)
                         if matches(rec["value"], flt)]
        if op.query:
            hits.sort(key=lambda h: -h[0])  # type: ignore[operator]
        else:
            hits.sort(key=lambda h: h[1]["updated_at"], reverse=True)
        page = hits[op.offset:op.offset + op.limit]
        return [self._item(rec, SearchItem, score=score) for score, rec in page]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = [ns for ns in self._store_namespaces() if self._records(ns)]
        for condition in op.match_conditions or ():
            found = [ns for ns in found if _namespacematches(ns, condition)]
        if op.max_depth is not None:
            found = [ns[:op.max_depth] for ns in found]
        return sorted(set(found))[op.offset:op.offset + op.limit]

    def _apply_puts(self, puts: dict[tuple[tuple[str, ...], str], PutOp]) -> None:
        """Write the puts of each namespace: every new version is validated and stored
        first (one ``add_turns``: all of them or, when one is refused, none), and only
        then are the versions they replace and the deleted items forgotten. A refused or
        failed update leaves the item as it was."""
        now = datetime.now(timezone.utc).isoformat()
        by_namespace: dict[tuple[str, ...], list[PutOp]] = {}
        for (namespace, _), op in puts.items():
            by_namespace.setdefault(namespace, []).append(op)
        for namespace, ops in by_namespace.items():
            known = namespace in self._store_namespaces()
            if not known and all(op.value is None for op in ops):
                continue  # deleting from an empty namespace: nothing to do, nothing to create
            engine = self.pool.get(self._engine_ns(namespace))
            turns, doomed, stale = [], [], []
            for op in ops:
                if op.value is not None and not isinstance(op.value, Mapping):
                    raise TypeError(f"a store value must be a dict, got {type(op.value).__name__}")
                ids = _node_ids(op.key)
                versions = self._versions(engine, namespace, op.key) if known else []
                doomed += [v["id"] for v in versions]
                if op.value is None:
                    continue
                if len(versions) > 1:  # an update cut short left two: the older goes first
                    stale += [v["id"] for v in versions[1:]]
                taken = {v["id"] for v in versions[:1]}
                new_id = next(i for i in ids[:2] if i not in taken)
                value = json.loads(json.dumps(dict(op.value)))  # a JSON dict, detached
                rec = {"value": value, "updated_at": now, "indexed": op.index is not False,
                       "created_at": versions[0]["created_at"] if versions else now}
                index = op.index if isinstance(op.index, list) else None
                turns.append({"text": self._text(value, index), "id": new_id,
                              "timestamp": now, "metadata": {_META: rec}})
            if stale:
                engine.forget(ids=stale)
            if turns:
                written = set(engine.add_turns(turns))  # refused: nothing changed
                doomed = [i for i in doomed if i not in written]
            if doomed:
                engine.forget(ids=doomed)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (consecutive puts are applied together, last write wins)."""
        ops = list(ops)
        for op in ops:
            if isinstance(op, (GetOp, PutOp)):
                _check_labels(op.namespace)
            elif isinstance(op, SearchOp):
                _check_labels(op.namespace_prefix)
            elif isinstance(op, ListNamespacesOp):
                for condition in op.match_conditions or ():
                    _check_labels(condition.path)
            if isinstance(op, PutOp) and not op.namespace:
                raise InvalidNamespaceError("Namespace cannot be empty.")
            if isinstance(op, PutOp) and op.namespace[0] == "langgraph":
                raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {op.namespace}')
        results: list[Result] = []
        pending: dict[tuple[tuple[str, ...], str], PutOp] = {}
        with self._lock:
            for op in ops:
                if isinstance(op, PutOp):
                    pending.pop((tuple(op.namespace), op.key), None)
                    pending[(tuple(op.namespace), op.key)] = op
                    results.append(None)
                    continue
                if pending:
                    self._apply_puts(pending)
                    pending = {}
                if isinstance(op, GetOp):
                    results.append(self._get(op))
                elif isinstance(op, SearchOp):
                    results.append(self._search(op))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op))
                else:
                    raise ValueError(f"unknown store operation: {type(op).__name__}")
            if pending:
                self._apply_puts(pending)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async twin of :meth:`batch` (the same code, in a worker thread)."""
        return await asyncio.to_thread(self.batch, list(ops))

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Close the memories (a store made from a path or ``None`` owns its pool)."""
        if self._owns_pool:
            self.pool.close()
        else:
            self.pool.save()

    def __enter__(self) -> SynapseStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
