"""``synapse inspect NAMESPACE --html FILE [--query Q]``: the explorer's views of one
namespace in one self-contained page (the page's script, style sheet and Cytoscape.js
inlined, the data embedded as JSON), to attach to a bug report. It opens from disk with
no server and loads nothing from anywhere.

The data is what the explorer's routes answer (:mod:`..explain`): the namespace's overview,
the first page of its timeline and, with a query, its Ask view (ranked hits with their
score terms, the gate's decision and reason, the activation graph) and, for each hit,
its versions and links. From a folder (``--path``) or a server (``--url``).
"""

from __future__ import annotations

import argparse
import html
import json
import os
from datetime import datetime, timezone
from typing import Any

from . import asset

__all__ = ["TIMELINE_ROWS", "cmd_inspect_html", "gather", "gather_remote", "report_html"]

#: How many timeline rows a report holds (the first ones, in ingestion order).
TIMELINE_ROWS = 200


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def gather(svc: Any, namespace: str, query: str | None = None, k: int = 10) -> dict[str, Any]:
    """The report's data from a :class:`~..service.MemoryService` (a folder)."""
    from ..explain import explain, overview, timeline

    data: dict[str, Any] = {"generated": _now(), "namespace": namespace,
                            "overview": overview(svc, namespace),
                            "timeline": timeline(svc, namespace, limit=TIMELINE_ROWS),
                            "ask": None, "memories": {}}
    if query:
        data["ask"] = explain(svc, namespace, query, k)
        for it in data["ask"]["items"]:
            data["memories"][it["id"]] = {"inspect": svc.inspect(namespace, it["id"]),
                                          "history": svc.history(namespace, it["id"])}
    return data


def gather_remote(url: str, namespace: str, query: str | None = None, k: int = 10, *,
                  api_key: str | None = None, timeout: float = 120.0) -> dict[str, Any]:
    """The same data from a memory server, through its API (``api_key``: one that may
    read ``namespace``)."""
    import httpx

    from ..connection import segment
    from ..wire import error_from_wire

    base = f"{url.rstrip('/')}/v1/namespaces/{segment(namespace)}"
    headers = {"X-API-Key": api_key} if api_key else {}
    with httpx.Client(headers=headers, timeout=timeout) as client:
        def call(method: str, tail: str, **kw: Any) -> Any:
            r = client.request(method, base + tail, **kw)
            if r.status_code >= 400:
                try:
                    body = r.json()
                except ValueError:
                    body = r.text
                raise error_from_wire(body, r.status_code)
            return r.json()

        data: dict[str, Any] = {"generated": _now(), "namespace": namespace,
                                "overview": call("GET", "/overview"),
                                "timeline": call("GET", "/timeline", params={"limit": TIMELINE_ROWS}),
                                "ask": None, "memories": {}}
        if query:
            data["ask"] = call("POST", "/explain", json={"query": query, "k": k})
            for it in data["ask"]["items"]:
                node = f"/memories/{segment(it['id'])}"
                data["memories"][it["id"]] = {"inspect": call("GET", f"{node}/inspect"),
                                              "history": call("GET", f"{node}/history")["versions"]}
    return data


def _inline_script(text: str) -> str:
    return text.replace("</script", "<\\/script")


def report_html(data: dict[str, Any]) -> str:
    """The explorer page with ``data`` embedded and every asset inlined: one file."""
    page = asset("index.html")
    embedded = json.dumps(data, ensure_ascii=False, allow_nan=False).replace("</", "<\\/")
    page = page.replace('<link rel="stylesheet" href="app.css">', f"<style>\n{asset('app.css')}</style>")
    page = page.replace('<script src="cytoscape.min.js"></script>',
                        f"<script>\n{_inline_script(asset('cytoscape.min.js'))}\n</script>")
    page = page.replace('<script src="app.js"></script>',
                        f'<script type="application/json" id="report-data">{embedded}</script>\n'
                        f"<script>\n{_inline_script(asset('app.js'))}\n</script>")
    return page.replace("<title>SYNAPSE memory explorer</title>",
                        f"<title>SYNAPSE memory report: {html.escape(data['namespace'], quote=False)}</title>")


def cmd_inspect_html(args: argparse.Namespace) -> int:
    """``synapse inspect [NAMESPACE] --html FILE [--query Q]`` (the positional names the
    namespace; default ``--namespace``)."""
    from ...errors import InvalidInputError
    from ..targets import api_key

    namespace = args.id or args.namespace
    if bool(args.path) == bool(args.url):
        raise InvalidInputError("say where the memory is: --path DIR (a folder) or --url URL (a server)")
    if args.url:
        data = gather_remote(args.url, namespace, args.query, api_key=api_key(args), timeout=args.timeout)
    else:
        from ..service import MemoryService, make_embedder

        svc = MemoryService(args.path, embedder=make_embedder(args.embedder))
        try:
            data = gather(svc, namespace, args.query)
        finally:
            svc.close()
    tmp = f"{args.html}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(report_html(data))
    os.replace(tmp, args.html)
    hits = len(data["ask"]["items"]) if data["ask"] else 0
    print(f"wrote {args.html}: namespace {namespace!r}, {data['overview']['episodes']} episodes"
          f"{f', {hits} hits for the query' if data['ask'] else ''}")
    return 0
