"""The memory explorer (issue 51, docs/explorer.md) driven in a real headless browser
(Debian's Chromium under Selenium, no browser download) against a real
``synapse serve http --ui`` process on 127.0.0.1: list the namespaces, open one, ask a
question and see its score bars and activation graph, forget a memory through the
confirmation and check through the REST API that it is gone; a wrong key sees nothing, a
scoped key only its namespaces, and without ``--ui`` there is no page."""

from __future__ import annotations

import json
import re
import shutil

import httpx
import pytest
from _server_helpers import ServerProcess, rest_server

from synapse_integrations import HashingEmbedder
from synapse_integrations.server.ui import ASSETS, STATIC

pytestmark = pytest.mark.server

ADMIN, ALICE = "key-admin-ui", "key-alice-ui"
KEYS = {"keys": [{"name": "admin", "key": ADMIN, "namespaces": ["*"]},
                 {"name": "alice-app", "key": ALICE, "namespaces": ["alice"]}]}
ALICE_TURNS = [
    {"text": "Dana studies architecture in Lisbon.", "speaker": "Sam", "timestamp": "2024-01-02T10:00:00Z", "id": "a1"},
    {"text": "Lisbon has yellow trams climbing to the Alfama district.", "speaker": "Ana",
     "timestamp": "2024-01-03T10:00:00Z", "id": "a2"},
    {"text": "Sam adopted a beagle called Biscuit.", "speaker": "Sam", "timestamp": "2024-02-01T10:00:00Z",
     "metadata": {"topic": "pets"}, "id": "a3"},
    {"text": "Biscuit the beagle hates the rain.", "speaker": "Ana", "timestamp": "2024-02-02T10:00:00Z",
     "metadata": {"topic": "pets"}, "id": "a4"},
    {"text": "Dana's cello recital is on Friday.", "speaker": "Sam", "timestamp": "2024-03-01T10:00:00Z", "id": "a5"},
    {"text": "The recital hall is near the harbour.", "speaker": "Ana", "timestamp": "2024-03-02T10:00:00Z", "id": "a6"},
]
BOB_TURNS = [{"text": "Bob's secret plan is to sail to Madeira.", "speaker": "Bob", "id": "b1"}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("ui")
    (root / "keys.json").write_text(json.dumps(KEYS))
    srv = ServerProcess("http", root / "mem", "--embedder", "hashing", "--ui",
                        "--key-file", str(root / "keys.json"))
    with srv:
        for ns, turns in (("alice", ALICE_TURNS), ("bob", BOB_TURNS)):
            r = httpx.post(f"{srv.url}/v1/namespaces/{ns}/turns", json={"turns": turns},
                           headers={"X-API-Key": ADMIN}, timeout=60)
            assert r.status_code == 200, r.text
        httpx.post(f"{srv.url}/v1/namespaces/alice/consolidate", headers={"X-API-Key": ADMIN}, timeout=60)
        yield srv


@pytest.fixture(scope="module")
def browser():
    assert shutil.which("chromium") and shutil.which("chromedriver"), \
        "Chromium is not installed: run `make system-deps` (Debian packages chromium chromium-driver)"
    from synapse_integrations.server.ui.browser import headless_chromium

    driver = headless_chromium()
    yield driver
    driver.quit()


def _open(browser, server, key: str) -> None:
    from selenium.webdriver.common.by import By

    from synapse_integrations.server.ui.browser import wait_for

    browser.get(f"{server.url}/ui/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(f"{server.url}/ui/")
    wait_for(browser, "window.synapseUI && window.synapseUI.ready")
    browser.execute_script("window.synapseUI.ready = false")
    box = browser.find_element(By.ID, "key")
    box.send_keys(key)
    box.submit()
    wait_for(browser, "window.synapseUI.ready && window.synapseUI.busy === 0")


def _namespaces(browser) -> list[str]:
    from selenium.webdriver.common.by import By

    return [r.get_attribute("data-ns") for r in browser.find_elements(By.CSS_SELECTOR, "#ns-table tbody tr")]


def test_the_page_lists_opens_asks_and_forgets(browser, server):
    from selenium.webdriver.common.by import By

    from synapse_integrations.server.ui.browser import wait_for

    _open(browser, server, ADMIN)
    assert sorted(_namespaces(browser)) == ["alice", "bob"]
    row = browser.find_element(By.CSS_SELECTOR, "#ns-table tr[data-ns='alice']")
    assert row.find_elements(By.TAG_NAME, "td")[1].text == str(len(ALICE_TURNS))  # its episodes
    row.click()
    wait_for(browser, f"window.synapseUI.timelineRows === {len(ALICE_TURNS)}")
    timeline = browser.find_element(By.ID, "timeline").text
    assert all(t["text"] in timeline for t in ALICE_TURNS)

    # the timeline's filters: one speaker, then a metadata filter
    browser.find_element(By.ID, "f-speaker").send_keys("Ana")
    browser.find_element(By.ID, "f-where").send_keys('{"topic": "pets"}')
    browser.find_element(By.CSS_SELECTOR, "#filters button").click()
    wait_for(browser, "window.synapseUI.timelineRows === 1")
    assert "Biscuit the beagle hates the rain." in browser.find_element(By.ID, "timeline").text

    # ask: ranked hits with a bar per score term, the gate's reason, the activation graph
    browser.find_element(By.CSS_SELECTOR, "#tabs [data-tab=ask]").click()
    query = browser.find_element(By.ID, "query")
    query.send_keys("What is the beagle called that Sam adopted?")
    query.submit()
    wait_for(browser, "window.synapseUI.hits > 0 && window.synapseUI.graphNodes > 0")
    hits = browser.find_elements(By.CSS_SELECTOR, "#hits > li")
    assert "Biscuit" in hits[0].text
    widths = [b.find_element(By.TAG_NAME, "span").get_attribute("style")
              for b in hits[0].find_elements(By.CSS_SELECTOR, ".bar")]
    terms = {b.get_attribute("data-term") for b in hits[0].find_elements(By.CSS_SELECTOR, ".bar")}
    assert {"similarity", "activation", "pagerank", "lexical"} <= terms
    assert any(float(re.search(r"width:\s*([\d.]+)%", w).group(1)) > 0 for w in widths)
    gate = browser.find_element(By.ID, "gate").text
    assert gate.startswith("Gate: accepted") and "gate_tau" in gate
    ui = browser.execute_script("const u = window.synapseUI; return {nodes: u.cy.nodes().length, "
                                "hits: u.cy.nodes('[role = \"hit\"]').length, edges: u.cy.edges().length, "
                                "canvas: document.querySelectorAll('#graph canvas').length}")
    assert ui["hits"] == len(hits) and ui["nodes"] > ui["hits"] and ui["edges"] > 0 and ui["canvas"] > 0

    # open the top hit: its versions and place in the graph; forget it through the confirmation
    target = hits[0].get_attribute("data-id")
    hits[0].click()
    wait_for(browser, f"document.getElementById('m-id').textContent === {json.dumps(target)}")
    assert browser.find_elements(By.CSS_SELECTOR, "#m-versions li")
    browser.find_element(By.ID, "m-forget").click()
    wait_for(browser, "document.getElementById('confirm').open")
    listed = [li.get_attribute("data-id") for li in browser.find_elements(By.CSS_SELECTOR, "#confirm-list li")]
    assert target in listed
    browser.find_element(By.ID, "confirm-yes").click()
    wait_for(browser, "!document.getElementById('result').hidden && window.synapseUI.busy === 0")
    assert "Forgotten" in browser.find_element(By.ID, "result").text
    assert f"removed {target}" in browser.find_element(By.ID, "result").text

    # gone, as the REST API sees it
    api = f"{server.url}/v1/namespaces/alice"
    head = {"X-API-Key": ADMIN}
    assert httpx.get(f"{api}/memories/{target}/exists", headers=head).json() == {"exists": False}
    out = httpx.post(f"{api}/retrieve", json={"query": "What is the beagle called that Sam adopted?", "k": 10},
                     headers=head).json()
    assert target not in [it["id"] for it in out["items"]]


def test_a_wrong_key_sees_nothing_and_a_scoped_key_only_its_namespaces(browser, server):
    from selenium.webdriver.common.by import By

    _open(browser, server, "not-a-key")
    assert _namespaces(browser) == []
    assert "refused" in browser.find_element(By.ID, "status").text
    assert "Madeira" not in browser.page_source and "Lisbon" not in browser.page_source
    _open(browser, server, ALICE)
    assert _namespaces(browser) == ["alice"]
    assert "Madeira" not in browser.page_source


def test_the_page_is_served_only_with_ui_and_loads_nothing_from_elsewhere(server, tmp_path):
    page = httpx.get(f"{server.url}/ui/")
    assert page.status_code == 200 and "SYNAPSE memory explorer" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert httpx.get(f"{server.url}/ui").status_code == 307
    assert httpx.get(f"{server.url}/ui/../v1/namespaces").status_code in (401, 404)
    assert httpx.get(f"{server.url}/ui/nope.js").status_code == 404
    assert httpx.get(f"{server.url}/v1/namespaces").status_code == 401  # the API still needs its key
    for name in ASSETS:
        assert httpx.get(f"{server.url}/ui/{name}").status_code == 200
    html = (STATIC / "index.html").read_text()
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert refs and all(r in ASSETS for r in refs), refs
    with rest_server(tmp_path / "plain", embedder=HashingEmbedder()) as plain:
        assert httpx.get(f"{plain.url}/ui/").status_code == 404
        assert httpx.get(f"{plain.url}/ui/app.js").status_code == 404


def test_the_explorer_routes_keep_the_key_rules(server):
    url = f"{server.url}/v1/namespaces"
    ask = {"query": "Where does Bob sail?"}
    for method, tail, body in (("GET", "/overview", None), ("GET", "/timeline", None),
                               ("POST", "/explain", ask), ("POST", "/forget/preview", {"ids": ["b1"]})):
        assert httpx.request(method, f"{url}/bob{tail}", json=body).status_code == 401
        assert httpx.request(method, f"{url}/bob{tail}", json=body, headers={"X-API-Key": "nope"}).status_code == 401
        assert httpx.request(method, f"{url}/bob{tail}", json=body, headers={"X-API-Key": ALICE}).status_code == 403
        assert httpx.request(method, f"{url}/bob{tail}", json=body, headers={"X-API-Key": ADMIN}).status_code == 200
    preview = httpx.post(f"{url}/bob/forget/preview", json={"ids": ["b1"]}, headers={"X-API-Key": ADMIN}).json()
    assert [m["id"] for m in preview["memories"]] == ["b1"]
    assert httpx.get(f"{url}/bob/memories/b1/exists", headers={"X-API-Key": ADMIN}).json() == {"exists": True}
    bad = httpx.get(f"{url}/bob/timeline", params={"where": "{not json"}, headers={"X-API-Key": ADMIN})
    assert bad.status_code == 400 and "where" in bad.json()["error"]["message"]
