"""``SynapseStore``: a LangGraph ``BaseStore`` whose search is SYNAPSE retrieval.

Every LangGraph namespace (a tuple such as ``("memories", "user-42")``) is one SYNAPSE memory
(engine namespace ``"<prefix>:memories.user-42"``; LangGraph forbids ``.`` inside labels, so the
mapping is reversible). Every item is one episodic node of that memory: its text is what is
indexed (the item's string fields, or the fields named by ``index``), and the item itself
(namespace, key, JSON value, creation and update times) rides along as the node's metadata.
So ``search(namespace, query=...)`` runs the full SYNAPSE retrieval (BM25 + dense anchors,
spreading activation over the episodes and the concepts consolidated from them, hybrid score,
uncertainty gate) inside each matching namespace, and ``SearchItem.score`` is the hybrid score.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._adapter_utils import EnginePool, list_episodes, require

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

__all__ = ["SynapseStore"]

_META = "langgraph_store"  # the turn-metadata key holding the item
_OPS = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"}


def _node_id(key: str) -> str:
    return "kv-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def _string_leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _string_leaves(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _string_leaves(v)]
    return []


def _compare(actual: Any, expected: Any) -> bool:
    """One filter condition, with the operators LangGraph documents ($eq, $ne, $gt, ...)."""
    if isinstance(expected, Mapping) and expected and all(str(k).startswith("$") for k in expected):
        for op, operand in expected.items():
            if op not in _OPS:
                raise ValueError(f"unsupported filter operator {op!r}; use one of {sorted(_OPS)}")
            if op == "$eq" and actual != operand or op == "$ne" and actual == operand:
                return False
            if op in ("$gt", "$gte", "$lt", "$lte"):
                try:
                    a, b = float(actual), float(operand)
                except (TypeError, ValueError):
                    return False
                if not {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]:
                    return False
        return True
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(_compare(actual.get(k), v) for k, v in expected.items())
    return actual == expected


def _matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    return not filter or all(_compare(value.get(k), v) for k, v in filter.items())


def _check_labels(namespace: Sequence[Any]) -> None:
    """LangGraph's label rules (non-empty strings without ``.`` or NUL), also for ops passed
    straight to ``batch``: a ``.`` would break the reversible namespace mapping."""
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"invalid namespace label {label!r} in {tuple(namespace)}: labels must be non-empty "
                "strings without '.' or NUL")


def _namespace_matches(ns: tuple[str, ...], condition: MatchCondition) -> bool:
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
    - Updating a key replaces its node (``created_at`` is kept); deleting forgets it for good
      (:meth:`Synapse.forget`, which also scrubs the text from Chroma and old snapshots).
    - Values pass through the engine's write firewall (secrets are redacted by default).
    - TTLs are not supported (``supports_ttl = False``).

    Args:
        path: a folder (embedded Chroma + snapshots), an existing :class:`EnginePool` to share
            with other adapters, or ``None`` for a temporary folder removed by :meth:`close`.
        prefix: engine-namespace prefix that keeps the store's memories apart from others in
            the same folder.
        gate: honour the uncertainty gate in query searches.
        index_fields: default paths of the text to index (LangGraph path syntax, e.g.
            ``["content", "tags[*]"]``); ``None`` indexes every string in the value.
        **engine_kwargs: passed to each ``Synapse(...)`` when ``path`` is not a pool
            (``embedder``, ``config``, ``client``, ...).
    """

    supports_ttl = False

    def __init__(self, path: str | Path | EnginePool | None = None, *, prefix: str = "store",
                 gate: bool = True, index_fields: Sequence[str] | None = None,
                 **engine_kwargs: Any) -> None:
        if isinstance(path, EnginePool):
            if engine_kwargs:
                raise TypeError("pass engine options to the EnginePool, not to SynapseStore")
            self.pool, self._owns_pool = path, False
        else:
            self.pool, self._owns_pool = EnginePool(path, **engine_kwargs), True
        if not prefix or ":" in prefix:
            raise ValueError("prefix must be a non-empty string without ':'")
        self.prefix = prefix
        self.gate = gate
        self.index_fields = None if index_fields is None else list(index_fields)
        self._lock = threading.RLock()
        self._stored: set[str] | None = None

    # -- mapping ---------------------------------------------------------------------------
    def _engine_ns(self, namespace: tuple[str, ...]) -> str:
        return f"{self.prefix}:" + ".".join(namespace)

    def _store_namespaces(self) -> list[tuple[str, ...]]:
        head = f"{self.prefix}:"
        if self._stored is None:  # listing Chroma's collections is slow: once per store
            self._stored = set(self.pool.namespaces())
        names = self._stored | set(self.pool.opened())
        return sorted(tuple(ns[len(head):].split(".")) for ns in names if ns.startswith(head))

    def _text(self, value: Mapping[str, Any], index: Sequence[str] | None) -> str:
        paths = index if index is not None else self.index_fields
        if paths is None:
            texts = _string_leaves(value)
        else:
            texts = [t for p in paths for t in get_text_at_path(value, tokenize_path(p)) if t.strip()]
        return "\n".join(texts) if texts else json.dumps(value, ensure_ascii=False, sort_keys=True)

    def _records(self, namespace: tuple[str, ...]) -> list[dict[str, Any]]:
        """The stored items of one namespace (their ``_META`` dicts), in ingestion order."""
        engine = self.pool.get(self._engine_ns(namespace))
        out = []
        for ep in list_episodes(engine):
            rec = (ep.get("metadata") or {}).get(_META)
            if rec is not None:
                out.append(rec)
        return out

    @staticmethod
    def _item(rec: Mapping[str, Any], cls: type = Item, **extra: Any) -> Any:
        return cls(value=rec["value"], key=rec["key"], namespace=tuple(rec["namespace"]),
                   created_at=datetime.fromisoformat(rec["created_at"]),
                   updated_at=datetime.fromisoformat(rec["updated_at"]), **extra)

    # -- operations ------------------------------------------------------------------------
    def _get(self, op: GetOp) -> Item | None:
        if not op.namespace or op.namespace not in self._store_namespaces():
            return None
        engine = self.pool.get(self._engine_ns(op.namespace))
        node = _node_id(op.key)
        attrs = engine.get(node, include_archived=True) if engine.contains(node) else None
        rec = (attrs or {}).get("metadata", {}).get(_META)
        return self._item(rec) if rec is not None and rec["key"] == op.key else None

    def _search(self, op: SearchOp) -> list[SearchItem]:
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
                result = engine.retrieve(op.query, k=size)
                if result.rejected and self.gate:
                    continue
                for it in result.items:
                    rec = it.metadata.get(_META) if it.kind == "episode" else None
                    if rec is not None and rec.get("indexed", True) and _matches(rec["value"], op.filter):
                        hits.append((it.score, rec))
            else:
                hits += [(None, rec) for rec in self._records(ns) if _matches(rec["value"], op.filter)]
        if op.query:
            hits.sort(key=lambda h: -h[0])  # type: ignore[operator]
        else:
            hits.sort(key=lambda h: h[1]["updated_at"], reverse=True)
        page = hits[op.offset:op.offset + op.limit]
        return [self._item(rec, SearchItem, score=score) for score, rec in page]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = [ns for ns in self._store_namespaces() if self._records(ns)]
        for condition in op.match_conditions or ():
            found = [ns for ns in found if _namespace_matches(ns, condition)]
        if op.max_depth is not None:
            found = [ns[:op.max_depth] for ns in found]
        return sorted(set(found))[op.offset:op.offset + op.limit]

    def _apply_puts(self, puts: dict[tuple[tuple[str, ...], str], PutOp]) -> None:
        now = datetime.now(timezone.utc).isoformat()
        by_namespace: dict[tuple[str, ...], list[PutOp]] = {}
        for (namespace, _), op in puts.items():
            by_namespace.setdefault(namespace, []).append(op)
        for namespace, ops in by_namespace.items():
            existing = {} if namespace not in self._store_namespaces() else \
                {rec["key"]: rec for rec in self._records(namespace)}
            if not existing and all(op.value is None for op in ops):
                continue  # deleting from an empty namespace: nothing to do, nothing to create
            engine = self.pool.get(self._engine_ns(namespace))
            doomed = [_node_id(op.key) for op in ops if op.key in existing]
            turns = []
            for op in ops:
                if op.value is None:
                    continue
                if not isinstance(op.value, Mapping):
                    raise TypeError(f"a store value must be a dict, got {type(op.value).__name__}")
                value = json.loads(json.dumps(dict(op.value)))  # a JSON dict, detached from the caller
                old = existing.get(op.key)
                rec = {"namespace": list(namespace), "key": op.key, "value": value,
                       "created_at": old["created_at"] if old else now, "updated_at": now,
                       "indexed": op.index is not False}
                index = op.index if isinstance(op.index, list) else None
                turns.append({"text": self._text(value, index), "id": _node_id(op.key),
                              "timestamp": now, "metadata": {_META: rec}})
            if doomed:
                engine.forget(ids=doomed)
            if turns:
                engine.add_turns(turns)

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
