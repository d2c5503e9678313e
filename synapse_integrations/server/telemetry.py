"""What a running server tells its operator: Prometheus metrics, OpenTelemetry spans and
(optionally) JSON logs.

:class:`Telemetry` belongs to one :class:`~.service.MemoryService`; every memory operation
of the service runs inside :meth:`Telemetry.operation`, which times it into a histogram
and wraps it in an OpenTelemetry span (``synapse.<operation>``, with the namespace as an
attribute). The REST app adds :class:`HttpMetrics`, an ASGI middleware counting requests
by method, route template and status, and serves :meth:`Telemetry.exposition` at
``/metrics``.

Why these libraries: ``prometheus-client`` is the reference client of the format every
scraper reads (and brings the process collector: open fds, RSS, CPU); the
``opentelemetry-api`` tracer is a no-op until the application installs a tracer
provider and exporter, so spans cost nothing unless someone collects them, and they
nest under the HTTP spans of ``opentelemetry-instrumentation-fastapi`` when that is on.
Each service has its own registry (not the process-global one), so two servers in one
process, as in the tests, do not share counts.

Metrics (all prefixed ``synapse_``)::

    http_requests_total{method,route,status}       requests answered
    http_request_duration_seconds{method,route}    time to the end of the response
    operation_duration_seconds{operation}          a memory operation, queueing included
    operation_errors_total{operation,error}        operations that raised, by error class
    commit_turns                                   turns per write commit (group commit)
    namespaces, open_namespaces                    known / open engines
    write_queue                                    write requests queued or committing
    embed_passes_total, embedded_texts_total       the model's passes and the texts in them
    process_open_fds, process_resident_memory_bytes, ...   (the process collector)

>>> t = Telemetry()
>>> with t.operation("retrieve", "u1"):
...     pass
>>> b"synapse_operation_duration_seconds_count{operation=\\"retrieve\\"} 1.0" in t.exposition()[0]
True
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .._adapter_utils import require

require("prometheus_client", "server")

from prometheus_client import (  # noqa: E402
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily  # noqa: E402

__all__ = ["METRICS_PATH", "HttpMetrics", "JsonLogFormatter", "Telemetry", "route_of",
           "use_json_logs"]

#: Where the REST app serves the metrics.
METRICS_PATH = "/metrics"
#: Latency buckets (seconds): from a cached read to a large import.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_COMMIT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096)

access_log = logging.getLogger("synapse_integrations.server.access")


class _Read:
    """Gauges and counters read at scrape time from callables (no value goes stale
    between scrapes; the counters are counts their owners keep)."""

    def __init__(self, gauges: dict[str, tuple[str, Callable[[], float]]],
                 counters: dict[str, tuple[str, Callable[[], float]]]) -> None:
        self.gauges, self.counters = gauges, counters

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        for name, (doc, fn) in self.gauges.items():
            yield GaugeMetricFamily(name, doc, value=float(fn()))
        for name, (doc, fn) in self.counters.items():
            yield CounterMetricFamily(name, doc, value=float(fn()))


class Telemetry:
    """The metrics registry and the tracer of one service (see the module doc).

    Args:
        gauges: ``{name: (help, read)}`` gauges read at each scrape (the service passes
            its namespace counts and its write queue).
        counters: the same for counts kept elsewhere (the embedder's passes and texts).
        tracer_provider: where the spans go (default: OpenTelemetry's global provider,
            a no-op until the application sets one).
    """

    def __init__(self, gauges: dict[str, tuple[str, Callable[[], float]]] | None = None, *,
                 counters: dict[str, tuple[str, Callable[[], float]]] | None = None,
                 tracer_provider: Any = None) -> None:
        from opentelemetry import trace

        from .. import __version__

        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("synapse_http_requests", "HTTP requests answered",
                                ["method", "route", "status"], registry=r)
        self.request_seconds = Histogram("synapse_http_request_duration_seconds",
                                         "HTTP request time to the end of the response",
                                         ["method", "route"], buckets=_BUCKETS, registry=r)
        self.operation_seconds = Histogram("synapse_operation_duration_seconds",
                                           "memory operation time, queueing included",
                                           ["operation"], buckets=_BUCKETS, registry=r)
        self.operation_errors = Counter("synapse_operation_errors", "memory operations that raised",
                                        ["operation", "error"], registry=r)
        self.commit_turns = Histogram("synapse_commit_turns", "turns per write commit",
                                      buckets=_COMMIT_BUCKETS, registry=r)
        ProcessCollector(registry=r)
        if gauges or counters:
            r.register(_Read(gauges or {}, counters or {}))
        self.tracer = trace.get_tracer("synapse_integrations", __version__,
                                       tracer_provider=tracer_provider)

    @contextlib.contextmanager
    def operation(self, name: str, namespace: str | None = None, **attributes: Any) -> Iterator[Any]:
        """Time ``name`` into ``synapse_operation_duration_seconds`` and run it in the span
        ``synapse.<name>`` (attributes ``synapse.namespace`` and ``synapse.<key>``); an
        error is counted by its class, recorded on the span and raised on."""
        attrs = {f"synapse.{k}": v for k, v in attributes.items() if v is not None}
        if namespace is not None:
            attrs["synapse.namespace"] = namespace
        t0 = time.perf_counter()
        with self.tracer.start_as_current_span(f"synapse.{name}", attributes=attrs) as span:
            try:
                yield span
            except BaseException as exc:
                self.operation_errors.labels(name, type(exc).__name__).inc()
                raise
            finally:
                self.operation_seconds.labels(name).observe(time.perf_counter() - t0)

    def exposition(self) -> tuple[bytes, str]:
        """The metrics in Prometheus' text format, and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def service_telemetry(service: Any, *, tracer_provider: Any = None) -> Telemetry:
    """The :class:`Telemetry` of a :class:`~.service.MemoryService`: its namespace counts
    and write queue as gauges, and, when its embedder batches
    (:class:`~synapse_integrations.embeddings.BatchingEmbedder`), the model's passes and
    texts as counters."""
    counters: dict[str, tuple[str, Callable[[], float]]] = {}
    batching = service.embedder.inner
    if hasattr(batching, "passes"):
        counters = {"synapse_embed_passes": ("passes of the embedding model", lambda: batching.passes),
                    "synapse_embedded_texts": ("texts embedded in those passes", lambda: batching.texts)}
    gauges: dict[str, tuple[str, Callable[[], float]]] = {
        "synapse_namespaces": ("namespaces in this folder", lambda: len(service.namespaces())),
        "synapse_open_namespaces": ("namespaces whose engine is open", lambda: len(service.pool.opened())),
        "synapse_write_queue": ("write requests queued or committing", service.writes.queued),
    }
    return Telemetry(gauges, counters=counters, tracer_provider=tracer_provider)


def route_of(routes: Any, scope: dict[str, Any]) -> str:
    """The route template that ``scope`` matches among ``routes`` (a Starlette app's
    ``router.routes``), e.g. ``/v1/namespaces/{namespace}/retrieve``; ``"unmatched"``
    otherwise. Matched on the raw path, as the app routes it (see
    :class:`~.middleware.RawSegments`), so that the label set stays the app's routes."""
    from starlette.routing import Match

    raw = scope.get("raw_path")
    if raw:
        scope = {**scope, "path": raw.split(b"?", 1)[0].decode("latin-1")}
    partial = None
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return str(getattr(route, "path", "unmatched"))
        if match is Match.PARTIAL and partial is None:  # the path, another method (405)
            partial = str(getattr(route, "path", "unmatched"))
    return partial or "unmatched"


class HttpMetrics:
    """ASGI middleware: each HTTP request counted and timed by method, route template and
    status (refusals by the other middlewares included: keep it outermost), and logged
    on ``synapse_integrations.server.access`` at INFO."""

    def __init__(self, app: Any, telemetry: Telemetry, routes: Sequence[Any]) -> None:
        self.app, self.telemetry, self.routes = app, telemetry, list(routes)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [500]

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        t0 = time.perf_counter()
        try:
            await self.app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - t0
            route, method = route_of(self.routes, scope), scope.get("method", "")
            self.telemetry.requests.labels(method, route, str(status[0])).inc()
            self.telemetry.request_seconds.labels(method, route).observe(seconds)
            if access_log.isEnabledFor(logging.INFO):
                access_log.info("%s %s %s", method, route, status[0],
                                extra={"method": method, "route": route, "status": status[0],
                                       "duration_ms": round(seconds * 1000, 2)})


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (ISO 8601, UTC), ``level``, ``logger``,
    ``message``, the fields passed as ``extra`` (an access line's ``method``, ``route``,
    ``status``, ``duration_ms``) and ``exception`` when there is one.

    >>> rec = logging.LogRecord("x", logging.INFO, "", 0, "hi %s", ("there",), None)
    >>> json.loads(JsonLogFormatter().format(rec))["message"]
    'hi there'
    """

    _STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                    + f".{int(record.msecs):03d}Z",
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        for key, value in vars(record).items():
            if key not in self._STANDARD and not key.startswith("_"):
                out[key] = value if isinstance(value, (str, int, float, bool, type(None))) else str(value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def use_json_logs(level: int = logging.INFO) -> None:
    """Every log line of the process (ours, uvicorn's) as one JSON object on stderr; the
    access log at INFO. uvicorn's own access log is left off: :class:`HttpMetrics` logs
    each request with its route template instead."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter())
    logging.getLogger().handlers[:] = [handler]
    access_log.setLevel(level)
    uv = logging.getLogger("uvicorn")  # its start and stop lines
    uv.handlers[:] = []
    uv.setLevel(level)
    uv.propagate = True
    logging.getLogger("uvicorn.access").disabled = True
