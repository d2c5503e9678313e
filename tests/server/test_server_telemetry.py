"""What a server tells its operator (server/telemetry.py): Prometheus metrics at /metrics
read with prometheus_client's own parser, behind the key rules; OpenTelemetry spans of the
memory operations captured with the SDK's in-memory exporter; JSON logs of a real
`synapse serve http --log-format json` process."""

from __future__ import annotations

import json

import httpx
import pytest
from _server_helpers import ServerProcess, rest_server
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client.parser import text_string_to_metric_families

from synapse_integrations.embeddings import BatchingEmbedder, HashingEmbedder
from synapse_integrations.errors import UnknownNamespaceError
from synapse_integrations.server.access import ApiKey, KeyRing
from synapse_integrations.server.service import MemoryService
from synapse_integrations.server.telemetry import route_of

TURNS = "/v1/namespaces/{namespace}/turns"
RETRIEVE = "/v1/namespaces/{namespace}/retrieve"


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def test_metrics_count_requests_by_route_template_and_status(tmp_path):
    with rest_server(tmp_path / "mem", embedder=BatchingEmbedder(HashingEmbedder())) as srv:
        c = httpx.Client(base_url=srv.url)
        for i in range(3):
            assert c.post("/v1/namespaces/alice/turns",
                          json={"turns": [{"text": f"Alice skied in Kyoto {i}", "id": f"a{i}"}]}).status_code == 200
        assert c.post("/v1/namespaces/a%2Fb/turns", json={"turns": [{"text": "slash"}]}).status_code == 200
        assert c.post("/v1/namespaces/alice/retrieve", json={"query": "Kyoto", "k": 3}).status_code == 200
        assert c.post("/v1/namespaces/nobody/retrieve", json={"query": "x"}).status_code == 404
        assert c.post("/v1/namespaces/alice/turns", json={"turns": "not a list"}).status_code == 422
        assert c.get("/no/such/path").status_code == 404
        r = c.get("/metrics")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
        m = _samples(r.text)
    # each namespace in the path is one label value: the route template
    assert _value(m, "synapse_http_requests_total", method="POST", route=TURNS, status="200") == 4
    assert _value(m, "synapse_http_requests_total", method="POST", route=TURNS, status="422") == 1
    assert _value(m, "synapse_http_requests_total", method="POST", route=RETRIEVE, status="404") == 1
    assert _value(m, "synapse_http_requests_total", method="GET", route="unmatched", status="404") == 1
    assert _value(m, "synapse_http_request_duration_seconds_count", method="POST", route=TURNS) == 5
    assert not any("alice" in str(labels) for _, labels in m)  # no tenant name in a label
    # the memory operations: four stored requests, each its own commit of one turn here
    assert _value(m, "synapse_operation_duration_seconds_count", operation="add_turns") == 4
    assert _value(m, "synapse_operation_duration_seconds_count", operation="commit") == 4
    assert _value(m, "synapse_commit_turns_sum") == 4
    assert _value(m, "synapse_operation_errors_total", operation="retrieve",
                  error="UnknownNamespaceError") == 1
    assert _value(m, "synapse_namespaces") == 2 and _value(m, "synapse_open_namespaces") >= 1
    assert _value(m, "synapse_write_queue") == 0
    # 4 stored turns and 1 query (the unknown namespace's is refused before embedding),
    # one request at a time here, so each its own pass
    assert _value(m, "synapse_embedded_texts_total") == _value(m, "synapse_embed_passes_total") == 5
    assert _value(m, "process_open_fds") > 0 and _value(m, "process_resident_memory_bytes") > 0


def test_metrics_need_a_key_for_every_namespace(tmp_path):
    ring = KeyRing([ApiKey.of("alice-app", "key-alice", ["alice"]),
                    ApiKey.of("operator", "key-operator", ["*"])])
    with rest_server(tmp_path / "mem", embedder=HashingEmbedder(), keys=ring) as srv:
        assert httpx.get(f"{srv.url}/metrics").status_code == 401
        scoped = httpx.get(f"{srv.url}/metrics", headers={"X-API-Key": "key-alice"})
        assert scoped.status_code == 403 and "every namespace" in scoped.json()["error"]["message"]
        ok = httpx.get(f"{srv.url}/metrics", headers={"Authorization": "Bearer key-operator"})
        assert ok.status_code == 200
        m = _samples(ok.text)
    # the refused requests were counted too, under their route
    assert _value(m, "synapse_http_requests_total", method="GET", route="/metrics", status="401") == 1
    assert _value(m, "synapse_http_requests_total", method="GET", route="/metrics", status="403") == 1


def test_spans_of_the_memory_operations(tmp_path):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    svc = MemoryService(tmp_path / "mem", embedder=HashingEmbedder())
    try:
        svc.enable_telemetry(tracer_provider=provider)
        svc.add_turns("u1", [{"text": "Dana studies architecture in Lisbon."}])
        svc.retrieve("u1", "Where does Dana study?", 3)
        with pytest.raises(UnknownNamespaceError):
            svc.stats("nobody")
    finally:
        svc.close()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert {"synapse.add_turns", "synapse.commit", "synapse.retrieve", "synapse.stats"} <= set(spans)
    assert spans["synapse.retrieve"].attributes["synapse.namespace"] == "u1"
    assert spans["synapse.commit"].attributes["synapse.turns"] == 1
    # the commit ran inside its request's span
    assert spans["synapse.commit"].parent.span_id == spans["synapse.add_turns"].context.span_id
    failed = spans["synapse.stats"]
    assert failed.status.status_code is StatusCode.ERROR
    assert any(e.name == "exception" for e in failed.events)


def test_without_telemetry_the_service_records_nothing(tmp_path):
    svc = MemoryService(tmp_path / "mem", embedder=HashingEmbedder())
    try:
        assert svc.telemetry is None
        assert svc.add_turns("u1", [{"text": "hello"}])  # operations run as before
    finally:
        svc.close()


def test_route_of_matches_the_raw_path():
    from starlette.routing import Route

    routes = [Route("/v1/namespaces/{namespace}/turns", lambda r: None, methods=["POST"]),
              Route("/health", lambda r: None, methods=["GET"])]
    scope = {"type": "http", "method": "POST", "path": "/v1/namespaces/a/b/turns",
             "raw_path": b"/v1/namespaces/a%2Fb/turns?x=1"}
    assert route_of(routes, scope) == "/v1/namespaces/{namespace}/turns"
    assert route_of(routes, {"type": "http", "method": "POST", "path": "/health"}) == "/health"  # 405
    assert route_of(routes, {"type": "http", "method": "GET", "path": "/x"}) == "unmatched"


@pytest.mark.server
def test_json_logs_of_a_real_server(tmp_path):
    srv = ServerProcess("http", tmp_path / "mem", "--embedder", "hashing", "--log-format", "json",
                        "--log-level", "info")
    with srv:
        assert httpx.post(f"{srv.url}/v1/namespaces/u1/turns",
                          json={"turns": [{"text": "hello"}]}).status_code == 200
    lines = [json.loads(x) for x in srv.log_path.read_text().splitlines() if x.startswith("{")]
    access = [x for x in lines if x["logger"] == "synapse_integrations.server.access"]
    assert {"method": "POST", "route": TURNS, "status": 200} in [
        {k: x[k] for k in ("method", "route", "status")} for x in access]
    assert all(isinstance(x["duration_ms"], float) and x["time"].endswith("Z") for x in access)
    assert any(x["logger"].startswith("uvicorn") for x in lines)  # uvicorn's own lines, as JSON
