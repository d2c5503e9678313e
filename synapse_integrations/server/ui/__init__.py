"""The memory explorer: a static page (``static/``: one HTML, one script, one style sheet
and the vendored Cytoscape.js with its licence) that ``synapse serve http --ui`` serves at
``/ui/`` (docs/explorer.md).

The page holds no data and no key: it calls the REST API from the browser with the key
the user types (kept in the tab's ``sessionStorage``), so what it shows is exactly what
that key may read (a scoped key sees only its namespaces, a wrong key nothing). Every
asset is in the package and the responses forbid loading anything from elsewhere
(``Content-Security-Policy``), so the page works offline.

:class:`StaticUI` serves the files; it is an ASGI middleware placed outside the API key
check, since a browser cannot send a header when it opens a page. :func:`report_html`
(in :mod:`.report`) inlines the same page, with its data, into one file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["ASSETS", "CSP", "PREFIX", "STATIC", "StaticUI", "asset"]

#: The folder of the page's files.
STATIC = Path(__file__).parent / "static"
#: Where the page is served.
PREFIX = "/ui"
#: The files served, by name, with their media types (nothing else under /ui is).
ASSETS = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
          "app.css": "text/css; charset=utf-8", "cytoscape.min.js": "text/javascript; charset=utf-8",
          "cytoscape.LICENSE.txt": "text/plain; charset=utf-8"}
#: Nothing but this server: no CDN, no outside request, no framing.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'")


def asset(name: str) -> str:
    """The text of one of the page's files."""
    return (STATIC / name).read_text("utf-8")


class StaticUI:
    """Serve the page's files at ``/ui/`` (``/ui`` redirects there) and pass every other
    request on to ``app``; an unknown name under ``/ui/`` is a 404."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.files = {name: (STATIC / name).read_bytes() for name in ASSETS}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            await self.app(scope, receive, send)
            return
        from starlette.responses import RedirectResponse, Response

        name = path[len(PREFIX) + 1:] or "index.html"
        headers = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                   "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}
        if path == PREFIX:
            response: Any = RedirectResponse(PREFIX + "/", status_code=307)
        elif scope.get("method") not in ("GET", "HEAD"):
            response = Response("method not allowed", status_code=405, headers={"Allow": "GET, HEAD"})
        elif name not in self.files:
            response = Response("not found", status_code=404, media_type="text/plain")
        else:
            response = Response(self.files[name] if scope["method"] == "GET" else b"",
                                media_type=ASSETS[name], headers=headers)
        await response(scope, receive, send)
