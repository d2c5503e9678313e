"""Property tests of the REST API against its own OpenAPI spec, on 127.0.0.1: schemathesis
generates requests for every operation (valid ones and, with hypothesis, malformed
ones) and checks that none is answered with a 5xx, that every status is one the spec
documents and that every body matches the documented schema. User error is always 4xx."""

from __future__ import annotations

import httpx
import pytest
from _server_helpers import rest_server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synapse_integrations import HashingEmbedder
from synapse_integrations.server.client import RemoteMemory

schemathesis = pytest.importorskip("schemathesis")
from schemathesis.checks import (  # noqa: E402
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

KEY = "fuzz-key"
SEED = [{"text": f"turn {i}: Sam and Dana talk about {topic}", "speaker": ["Sam", "Dana"][i % 2],
         "timestamp": 1_700_000_000 + 3600 * i, "metadata": {"topic": topic, "n": i}, "id": f"id{i}"}
        for i, topic in enumerate(["skiing", "Lisbon", "architecture", "Biscuit", "cello", "exams"] * 2)]


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    with rest_server(tmp_path_factory.mktemp("fuzz") / "mem", embedder=HashingEmbedder(), api_key=KEY) as srv:
        for ns in ("default", "seed", "a/b"):
            RemoteMemory(srv.url, ns, api_key=KEY).add_turns(SEED)
        yield srv


@pytest.fixture(scope="module")
def api_schema(api):
    return schemathesis.openapi.from_url(f"{api.url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_no_request_the_spec_allows_is_a_server_error(case, api):
    case.call_and_validate(headers={"X-API-Key": KEY},
                           checks=[not_a_server_error, status_code_conformance,
                                   response_schema_conformance])


# A second, hand-written property: arbitrary JSON bodies (any shape) on every write and
# read route are answered with a documented 4xx or a 2xx, never a 5xx.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)
ROUTES = ["turns", "retrieve", "forget", "update", "archive", "restore"]
FIELDS = ["text", "turns", "query", "k", "kinds", "speakers", "since", "until", "where", "config",
          "ids", "id", "speaker", "everything", "metadata", "timestamp", "keep_history", "vector"]


@given(route=st.sampled_from(ROUTES), namespace=st.sampled_from(["seed", "fresh-ns", "a%2Fb", "%00", "x" * 300]),
       body=st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=5) | json_values)
@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_any_json_body_is_answered_without_a_server_error(api, route, namespace, body):
    r = httpx.post(f"{api.url}/v1/namespaces/{namespace}/{route}", json=body, headers={"X-API-Key": KEY},
                   timeout=60)
    assert r.status_code < 500, (route, body, r.text)
    if r.status_code >= 400:
        err = r.json()["error"]
        assert err["status"] == r.status_code and err["message"] and err["type"]
