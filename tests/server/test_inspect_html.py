"""``synapse inspect NAMESPACE --html FILE --query Q`` (issue 51): one self-contained page,
from a folder or from a server, holding the query's hits, their score terms, the gate's
reason and the activation graph; it loads nothing from anywhere (opened from disk in
headless Chromium, it draws its graph)."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from _server_helpers import rest_server

from synapse_integrations import HashingEmbedder
from synapse_integrations.cli import main
from synapse_integrations.server.service import MemoryService

TURNS = [
    {"text": "Sam adopted a beagle called Biscuit.", "speaker": "Sam", "timestamp": "2024-02-01T10:00:00Z"},
    {"text": "Biscuit the beagle hates the rain.", "speaker": "Ana", "timestamp": "2024-02-02T10:00:00Z"},
    {"text": "Dana's cello recital is on Friday.", "speaker": "Sam", "timestamp": "2024-03-01T10:00:00Z"},
]
QUERY = "What is the beagle called that Sam adopted?"
#: a reference the browser would fetch: a src/href/url() or an import naming another origin
_EXTERNAL = re.compile(r"""(?:\bsrc|\bhref)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*(?:https?:)?//|"""
                       r"""@import|<link\b|<script[^>]+\bsrc=""", re.I)


def _data(html: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>',
                                html, re.S).group(1))


@pytest.fixture
def folder(tmp_path):
    svc = MemoryService(tmp_path / "mem", embedder=HashingEmbedder())
    svc.add_turns("alice", TURNS)
    svc.add_turns("bob", [{"text": "Bob plans to sail to Madeira."}])
    svc.close()
    return tmp_path / "mem"


def test_a_report_from_a_folder_is_one_self_contained_page(folder, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["inspect", "alice", "--html", str(out), "--query", QUERY, "--path", str(folder),
                 "--embedder", "hashing"]) == 0
    assert "3 episodes" in capsys.readouterr().out
    html = out.read_text("utf-8")
    assert not _EXTERNAL.search(html), _EXTERNAL.search(html).group(0)
    assert "cytoscape" in html and "window.synapseUI" in html  # the library and the page, inlined
    data = _data(html)
    assert data["namespace"] == "alice" and data["overview"]["episodes"] == 3
    ask = data["ask"]
    assert ask["query"] == QUERY and ask["items"][0]["text"] == TURNS[0]["text"]
    assert ask["gate"]["decision"] == "accepted" and ask["gate"]["reason"]
    assert {"similarity", "activation", "pagerank"} <= set(ask["items"][0]["components"])
    hits = {n["id"] for n in ask["graph"]["nodes"] if n["role"] == "hit"}
    assert hits == {it["id"] for it in ask["items"]}
    assert set(data["memories"]) == hits  # each hit's versions and links
    assert "Madeira" not in html  # another namespace's memories stay out


def test_the_checker_sees_an_external_reference():
    for bad in ('<script src="https://cdn.example/x.js">', "<link rel=stylesheet href=//cdn.example/a.css>",
                "background: url(https://example.org/a.png)", '<img src="http://e.org/a.png">'):
        assert _EXTERNAL.search(bad), bad
    assert not _EXTERNAL.search('<a title="see http://en.wikipedia.org/wiki/MIT_License">')


@pytest.mark.server
def test_a_report_from_a_server_needs_a_key_that_may_read_the_namespace(tmp_path, capsys):
    with rest_server(tmp_path / "mem", embedder=HashingEmbedder(), api_key="k1") as srv:
        import httpx

        httpx.post(f"{srv.url}/v1/namespaces/alice/turns", json={"turns": TURNS}, headers={"X-API-Key": "k1"})
        out = tmp_path / "remote.html"
        assert main(["inspect", "alice", "--html", str(out), "--query", QUERY, "--url", srv.url,
                     "--api-key", "k1"]) == 0
        assert _data(out.read_text("utf-8"))["ask"]["items"][0]["text"] == TURNS[0]["text"]
        wrong = tmp_path / "wrong.html"
        assert main(["inspect", "alice", "--html", str(wrong), "--url", srv.url, "--api-key", "nope"]) == 2
        assert not wrong.exists() and "API key" in capsys.readouterr().err


@pytest.mark.slow
def test_the_report_draws_its_views_from_disk_in_a_browser(folder, tmp_path):
    assert shutil.which("chromium") and shutil.which("chromedriver"), \
        "Chromium is not installed: run `make system-deps` (Debian packages chromium chromium-driver)"
    from selenium.webdriver.common.by import By

    from synapse_integrations.server.ui.browser import headless_chromium, wait_for

    out = tmp_path / "report.html"
    assert main(["inspect", "alice", "--html", str(out), "--query", QUERY, "--path", str(folder),
                 "--embedder", "hashing"]) == 0
    driver = headless_chromium()
    try:
        driver.get(out.as_uri())
        wait_for(driver, "window.synapseUI && window.synapseUI.graphNodes > 0 && window.synapseUI.timelineRows === 3")
        assert driver.execute_script("return window.synapseUI.namespaces") == 1
        assert driver.execute_script("return window.synapseUI.bars") > 0
        assert TURNS[0]["text"] in driver.find_element(By.ID, "hits").text
        assert driver.find_element(By.ID, "gate").text.startswith("Gate: accepted")
        driver.find_elements(By.CSS_SELECTOR, "#hits > li")[0].click()  # a hit's versions, from the data
        wait_for(driver, "document.querySelectorAll('#m-versions li').length > 0")
        assert driver.find_element(By.ID, "fix").get_attribute("hidden") is not None  # a report fixes nothing
    finally:
        driver.quit()
