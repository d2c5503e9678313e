"""Property tests of the REST API against its own OpenAPI spec, on 127.0.0.1: schemathesis
generates requests for every operation (valid ones and, with hypothesis, malformed
ones) and checks that none is answered with a 5xx, that every status is one the spec
documents and that every body matches the documented schema. User error is always 4xx."""

from __future__ import annotations

import json

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


# /freeze is left out: a frozen namespace answers its writes with a 503 by design (retry
# while it moves to another shard), which this property would count as a server error;
# tests/server/test_server_shards.py drives it
@schema.exclude(path_regex="/freeze$").parametrize()
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_no_request_the_spec_allows_is_a_server_error(case, api):
    case.call_and_validate(headers={"X-API-Key": KEY},
                           checks=[not_a_server_error, status_code_conformance,
                                   response_schema_conformance])


# A second, hand-written property: arbitrary JSON bodies (any shape) on every write and
# read route are answered with a documented 4xx or a 2xx, never a 5xx.
# (values a JSON encoder can write: the client refuses infinities; the malformed-text
# property below sends NaN, Infinity and 1e999 as raw text)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
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


# A third: malformed JSON text, not only odd values: the numbers JSON cannot carry (NaN,
# Infinity, 1e999, which Python's parser reads as floats), huge integers, lone surrogate
# escapes, deep nesting, truncated and corrupted bodies, on one keep-alive connection.
# Every answer is a 4xx or a 2xx, and the next request on the same connection is answered.
ODD_NUMBERS = ["NaN", "-NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e-999", "0.1e400",
               "123456789012345678901234567890123", "-0", "1E+2"]
scalar_text = (st.sampled_from(ODD_NUMBERS + ["true", "false", "null", '"\\ud800"', '"\\u0000"', '""'])
               | st.integers().map(str) | st.floats(allow_nan=False, allow_infinity=False).map(repr)
               | st.text(max_size=12).map(json.dumps))


def _array(items: list[str]) -> str:
    return "[" + ",".join(items) + "]"


def _object(fields: dict[str, str]) -> str:
    return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in fields.items()) + "}"


json_text = st.recursive(scalar_text, lambda children: st.lists(children, max_size=4).map(_array)
                         | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), children,
                                           max_size=4).map(_object), max_leaves=10)
turn_text = st.dictionaries(st.sampled_from(["text", "speaker", "timestamp", "metadata", "id", "vector"]),
                            json_text, max_size=4).map(_object)
shaped = (st.dictionaries(st.sampled_from(FIELDS), json_text, min_size=1, max_size=4).map(_object)
          | st.lists(turn_text, max_size=3).map(lambda ts: _object({"turns": _array(ts)})))
deep = st.integers(50, 5000).map(lambda n: "[" * n + "]" * n)


@st.composite
def malformed(draw: st.DrawFn) -> bytes:
    text = draw(shaped | json_text | deep).encode("utf-8", "surrogatepass")
    how = draw(st.sampled_from(["as is", "as is", "truncated", "corrupted"]))
    if how == "truncated" and text:
        return text[:draw(st.integers(0, len(text) - 1))]
    if how == "corrupted":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.binary(min_size=1, max_size=4)) + text[at:]
    return text


MALFORMED_ROUTES = ["turns", "retrieve", "forget", "update", "feedback", "archive", "restore"]
STATUSES: dict[int, int] = {}


@pytest.fixture(scope="module")
def keep_alive(api):
    with httpx.Client(base_url=api.url, headers={"X-API-Key": KEY}, timeout=60) as client:
        yield client
    print(f"\nmalformed bodies: statuses {dict(sorted(STATUSES.items()))}")


@given(route=st.sampled_from(MALFORMED_ROUTES), namespace=st.sampled_from(["seed", "a%2Fb", "fresh-ns2"]),
       body=malformed())
@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_malformed_json_is_a_4xx_and_the_connection_stays_usable(keep_alive, route, namespace, body):
    r = keep_alive.post(f"/v1/namespaces/{namespace}/{route}", content=body,
                        headers={"content-type": "application/json"})
    STATUSES[r.status_code] = STATUSES.get(r.status_code, 0) + 1
    assert r.status_code < 500, (route, body[:300], r.text[:500])
    if r.status_code >= 400:
        err = r.json()["error"]
        assert err["status"] == r.status_code and err["message"] and err["type"]
        assert len(r.content) < 20_000  # an error never sends the body back
    follow = keep_alive.get("/v1/namespaces/seed/stats")
    assert follow.status_code == 200 and follow.json()["episodes"] == len(SEED)
