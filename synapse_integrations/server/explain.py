"""The explorer's read-only routes (``synapse serve http --ui``, docs/explorer.md), beside
the REST API's own and under the same API keys (a scoped key reads only its namespaces)::

    GET  /v1/namespaces/{namespace}/overview        counts (facts apart), last write, size on disk
    GET  /v1/namespaces/{namespace}/timeline        episodes (or facts) in order, filtered, paged
    POST /v1/namespaces/{namespace}/explain         a retrieval and the activation graph behind it
    POST /v1/namespaces/{namespace}/forget/preview  exactly what a forget of these ids would erase

Nothing here writes: the page changes memory through ``/update`` and ``/forget``. The
functions (:func:`overview`, :func:`timeline`, :func:`explain`, :func:`forget_preview`) work on
a :class:`~.service.MemoryService`, so ``synapse inspect --html`` builds its report from them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict

from ..core.graph.graph import FACT_TYPE
from ..core.lifecycle import forgetting
from ..core.state.filters import Filter
from ..core.state.validation import namespace_dirname
from ..errors import InvalidInputError, InvalidTypeError
from . import wire
from .bodies import RetrieveIn
from .rest_paths import namespace_of
from .service import MAX_PAGE, MemoryService

__all__ = ["MAX_GRAPH_NODES", "PreviewIn", "explain", "forget_preview", "namespace_of", "overview", "router",
           "timeline"]

#: The most nodes the activation graph of one query holds (hits first, then their paths).
MAX_GRAPH_NODES = 150
_LABEL = 60


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def _is_fact(data: dict[str, Any]) -> bool:
    return data.get("kind") == "concept" and data.get("ctype") == FACT_TYPE


def _sources(data: dict[str, Any]) -> list[str]:
    """The turns a concept or fact came from (its provenance), in order, once each."""
    out: list[str] = []
    for entry in (data.get("sources") or {}).values():
        if isinstance(entry, dict):
            out += [i for i in entry.get("exact") or () if isinstance(i, str)]
    return list(dict.fromkeys(out))


def overview(svc: MemoryService, namespace: Any) -> dict[str, Any]:
    """A namespace at a glance: ``episodes``, ``facts``, ``concepts`` (facts not counted),
    ``archived``, ``pending``, ``edges``, ``last_write`` (epoch seconds of the newest stored
    turn, None when empty) and ``size_bytes`` (its snapshots on disk; the vectors live in
    the folder's shared Chroma)."""
    with svc.lease(namespace) as engine:
        stats = engine.stats()
        with engine.inspect_retrieval():
            facts = sum(1 for _, d in engine.graph.nodes(data=True) if _is_fact(d))
        rows = engine.episodes(include_archived=True)
        name = engine.namespace
    last = max((r.get("ingest_ts") or 0.0 for r in rows), default=None)
    return {"namespace": name, "episodes": stats.get("episodes", 0), "facts": facts,
            "concepts": stats.get("concepts", 0) - facts, "archived": stats.get("archived", 0),
            "pending": stats.get("pending", 0), "edges": stats.get("edges", 0),
            "last_write": last or None,
            "size_bytes": _size(Path(svc.path) / "namespaces" / namespace_dirname(name))}


def _where(where: Any) -> Any:
    if where is None or isinstance(where, dict):
        return where
    if not isinstance(where, str):
        raise InvalidTypeError("where must be a JSON object")
    try:
        value = json.loads(where)
    except ValueError as exc:
        raise InvalidInputError(f"where must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidInputError("where must be a JSON object")
    return value


def timeline(svc: MemoryService, namespace: Any, *, kind: str = "episode", offset: int = 0,
             limit: int = 50, speaker: Optional[str] = None, since: Any = None, until: Any = None,
             where: Any = None) -> dict[str, Any]:
    """One page of the namespace's episodes in ingestion order (``kind="fact"``: its facts,
    each with ``sources``, the turns it came from), those of ``speaker``, event time in
    ``[since, until)`` and metadata matching ``where`` (the language of retrieve's filter,
    a dict or its JSON): ``{"items", "total", "offset", "limit", "next_offset"}``."""
    if kind not in ("episode", "fact"):
        raise InvalidInputError(f"kind must be 'episode' or 'fact', got {kind!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInputError("offset must be an int >= 0")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInputError(f"limit must be an int in [1, {MAX_PAGE}]")
    flt = Filter.build(speakers=speaker, since=since, until=until, where=_where(where))
    with svc.lease(namespace) as engine:
        if kind == "episode":
            rows = engine.episodes(include_archived=True)
            archived = {a["id"] for a in engine.archived()}
            rows = [r for r in rows if flt is None or flt.matches(r)]
            page = [{**r, "archived": r["id"] in archived} for r in rows[offset:offset + limit]]
        else:
            with engine.inspect_retrieval():
                rows = [{"id": n, "kind": "fact", "text": d.get("text"), "sources": _sources(d),
                         "metadata": d.get("attributes") or {}}
                        for n, d in engine.graph.nodes(data=True) if _is_fact(d)]
            page = rows[offset:offset + limit]
    for r in page:
        r.pop("affect", None)
    end = offset + len(page)
    return {"items": page, "total": len(rows), "offset": offset, "limit": limit,
            "next_offset": end if end < len(rows) else None}


def _graph(engine: Any, svc: MemoryService, query: str, items: list[dict[str, Any]],
           cfg: Any) -> dict[str, Any]:
    """The activation graph of ``query``: its hits, the nodes on the paths along which
    activation reached each, the concepts that led to each, and the query's anchors among
    them; node ``activation`` is the model's first pass (spreading activation) over the
    whole memory (a retrieval's filters choose the hits, not the activation)."""
    qv = svc.embedder.embed_query(query)
    nodes: dict[str, dict[str, Any]] = {}
    edges: dict[tuple[str, str], dict[str, Any]] = {}
    with engine.inspect_retrieval() as steps:
        g = engine.graph
        q = steps.query(query, qv, cfg)
        act = steps.activate(q, cfg).activation
        view = steps.view
        anchors = {view.ids[int(i)] for i in q.anchors}

        def add(node: str, role: str) -> bool:
            if node in nodes:
                return True
            if node not in g or len(nodes) >= MAX_GRAPH_NODES:
                return False
            d = g.nodes[node]
            kind = "fact" if _is_fact(d) else d.get("kind")
            at = view.index.get(node)
            nodes[node] = {"id": node, "kind": kind, "label": str(d.get("text") or node)[:_LABEL],
                           "role": role, "anchor": node in anchors,
                           "activation": float(act[at]) if at is not None else 0.0}
            return True

        def link(a: str, b: str, why: str) -> None:
            data = g.get_edge_data(a, b) or g.get_edge_data(b, a) or {}
            edges.setdefault((a, b), {"source": a, "target": b, "kind": data.get("kind", why),
                                      "weight": float(data.get("weight", 0.0)), "why": why})

        for rank, it in enumerate(items, 1):
            if add(it["id"], "hit"):
                nodes[it["id"]].update(rank=rank, score=it["score"])
        for it in items:
            path = [n for n in it.get("path") or () if add(n, "path")]
            for a, b in zip(path, path[1:]):
                link(a, b, "path")
            led = set(it.get("concepts") or ())
            if led and it["id"] in g:
                for other in g.successors(it["id"]):
                    if str(g.nodes[other].get("name", "")) in led and add(other, "concept"):
                        link(other, it["id"], "concept")
    return {"nodes": list(nodes.values()), "edges": list(edges.values()),
            "anchors": sorted(a for a in anchors if a in nodes)}


def explain(svc: MemoryService, namespace: Any, query: Any, k: Any = None, **kwargs: Any) -> dict[str, Any]:
    """What retrieve answers (ranked items with every score term, the gate's decision and
    reason), with ``graph``: ``{"nodes", "edges", "anchors"}`` (see :func:`_graph`)."""
    result, cfg = svc.retrieve_result(namespace, query, k, **kwargs)
    out = wire.result_to_wire(result, signal=cfg.gate_signal, gate_enabled=cfg.use_gate)
    with svc.lease(namespace) as engine:
        out["graph"] = _graph(engine, svc, result.query, out["items"], cfg)
    return out


def forget_preview(svc: MemoryService, namespace: Any, ids: Any) -> dict[str, Any]:
    """What ``forget(ids)`` would erase, computed as forget computes it and changing
    nothing: ``memories`` (what was asked for) and ``derived`` (the concepts and facts only
    they justify), each ``{"id", "kind", "text"}``."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise InvalidTypeError("ids must be a list of str")
    if not ids:
        raise InvalidInputError("ids must name at least one memory")
    with svc.lease(namespace) as engine, engine.inspect_retrieval() as steps:
        state = steps.state
        doomed = forgetting.select(state, ids)
        asked = set(forgetting.asked_for(state, doomed, ids))
        rows = []
        for n in doomed:
            if not state.knows(n):  # an id no node holds: nothing to show (a stray vector at most)
                continue
            d = state.any_node(n)
            rows.append({"id": n, "kind": "fact" if _is_fact(d) else d.get("kind"),
                         "text": d.get("text"), "asked": n in asked})
    return {"memories": [r for r in rows if r["asked"]], "derived": [r for r in rows if not r["asked"]]}


class PreviewIn(BaseModel):
    """The body of ``/forget/preview``: the ids a forget would name."""

    model_config = ConfigDict(extra="forbid")
    ids: list[str]


def router(svc: MemoryService) -> Any:
    """The routes above as a FastAPI ``APIRouter`` (mounted under ``/v1`` by :mod:`.rest`)."""
    from fastapi import APIRouter, Query

    r = APIRouter(tags=["explorer"])

    @r.get("/namespaces/{namespace}/overview")
    def get_overview(namespace: str) -> dict[str, Any]:
        """Counts (episodes, facts, concepts, archived), the last write and the size on disk."""
        return overview(svc, namespace_of(namespace))

    @r.get("/namespaces/{namespace}/timeline")
    def get_timeline(namespace: str, kind: str = "episode", offset: int = Query(0, ge=0),
                     limit: int = Query(50, ge=1, le=MAX_PAGE), speaker: Optional[str] = None,
                     since: Optional[str] = None, until: Optional[str] = None,
                     where: Optional[str] = None) -> dict[str, Any]:
        """Episodes (``kind=fact``: facts) in order, filtered by speaker, event time
        ``[since, until)`` and ``where`` (a JSON metadata filter), one page at a time."""
        return timeline(svc, namespace_of(namespace), kind=kind, offset=offset, limit=limit,
                        speaker=speaker, since=since, until=until, where=where)

    @r.post("/namespaces/{namespace}/explain")
    def post_explain(namespace: str, body: RetrieveIn) -> dict[str, Any]:
        """A retrieval (as ``/retrieve``) and the activation graph that produced it."""
        return explain(svc, namespace_of(namespace), body.query, body.k, kinds=tuple(body.kinds),
                       speakers=body.speakers, since=body.since, until=body.until,
                       where=body.where, config=body.config, as_of=body.as_of,
                       current_only=body.current_only, at=body.at)

    @r.post("/namespaces/{namespace}/forget/preview")
    def post_preview(namespace: str, body: PreviewIn) -> dict[str, Any]:
        """What forgetting these ids would erase (the memories and what only they
        justify); changes nothing."""
        return forget_preview(svc, namespace_of(namespace), body.ids)

    return r
