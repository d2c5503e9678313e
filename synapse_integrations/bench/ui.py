"""The explorer's speed (issue 51; docs/benchmarks.md, "The explorer"): a memory of
``turns`` synthetic turns (:func:`~.synthetic.synthetic_turns`, the hashing embedder, so
the figures are the server's and the page's own cost), a real ``synapse serve http --ui``
process on 127.0.0.1 with an API key, and Debian's headless Chromium under Selenium:

- **page load**: from the navigation's start to the namespace table drawn (the page, its
  script, style sheet and Cytoscape.js, ``/v1/namespaces`` and each namespace's
  ``/overview``), read from the page's own clock (``performance.now()``);
- **query round trip**: from the Ask button to the hits, their score bars and the
  activation graph drawn (``POST .../explain`` and the drawing), in the page; and the
  same request alone over HTTP (httpx), without the browser.

p50 and p95 of each. ``--screenshots DIR`` also saves the views (a namespace's timeline,
Ask, a forget's confirmation) of a small hand-written memory, for the docs::

    python -m synapse_integrations.bench.ui --turns 10000 --out ui.json --screenshots docs
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from .metrics import percentiles
from .serve import ServerProcess
from .synthetic import synthetic_queries, synthetic_turns

__all__ = ["DEMO_TURNS", "add_ui_args", "cmd_bench_ui", "format_ui_table", "main", "run_ui"]

KEY = "bench-ui-key"
NAMESPACE = "bench"
#: The memory the screenshots show (a question across sessions: the ski trip, then the news).
DEMO_TURNS = [
    ("Sam", "2024-01-14T19:30:00Z", "I went on a ski trip to Whistler with my cousin Dana last week."),
    ("Riley", "2024-01-14T19:31:00Z", "Whistler! Did Dana manage the black runs?"),
    ("Sam", "2024-01-14T19:32:00Z", "Dana skied better than me, honestly."),
    ("Sam", "2024-03-02T18:00:00Z", "Big news: Dana got accepted into an architecture program in Lisbon."),
    ("Riley", "2024-03-02T18:01:00Z", "Architecture in Lisbon, that suits Dana."),
    ("Sam", "2024-04-20T09:00:00Z", "I adopted a beagle called Biscuit."),
    ("Riley", "2024-04-20T09:02:00Z", "Biscuit is adorable. Does he like the rain?"),
    ("Sam", "2024-04-20T09:03:00Z", "Biscuit hates the rain; walks are short in April."),
    ("Sam", "2024-06-10T20:00:00Z", "I moved from Portland to Seattle for the new job."),
    ("Riley", "2024-06-10T20:02:00Z", "Seattle has even more rain for Biscuit."),
]


def _build(path: Path, turns: int, log: Any) -> float:
    from ..embeddings import HashingEmbedder
    from ..server.service import MemoryService

    t0 = time.perf_counter()
    svc = MemoryService(path, embedder=HashingEmbedder())
    try:
        rows = synthetic_turns(turns, seed=7)
        for i in range(0, len(rows), 500):
            svc.add_turns(NAMESPACE, rows[i:i + 500])
        svc.consolidate(NAMESPACE)
        svc.add_turns("demo", [{"speaker": s, "timestamp": t, "text": x, "id": f"demo-{k}"}
                               for k, (s, t, x) in enumerate(DEMO_TURNS)])
        svc.consolidate("demo")
    finally:
        svc.close()
    seconds = time.perf_counter() - t0
    log(f"built {turns} turns in {seconds:.0f} s")
    return seconds


def _ms(values: list[float]) -> dict[str, float]:
    return {k: round(v, 1) for k, v in percentiles(values).items()}


def _page_loads(driver: Any, url: str, rounds: int) -> list[float]:
    from ..server.ui.browser import wait_for

    driver.get(f"{url}/ui/")
    driver.execute_script(f"sessionStorage.setItem('synapse-explorer-key', {json.dumps(KEY)})")
    out = []
    for _ in range(rounds + 2):
        driver.get(f"{url}/ui/")
        wait_for(driver, "window.synapseUI && window.synapseUI.ready && window.synapseUI.busy === 0 "
                         "&& window.synapseUI.namespaces > 0")
        out.append(float(driver.execute_script("return window.synapseUI.readyAt")))
    return out[2:]  # the first loads fill the browser's and the server's caches


def _asks(driver: Any, queries: list[str]) -> list[float]:
    from selenium.webdriver.common.by import By

    from ..server.ui.browser import wait_for

    driver.find_element(By.CSS_SELECTOR, f"#ns-table tr[data-ns='{NAMESPACE}']").click()
    wait_for(driver, "window.synapseUI.timelineRows > 0")
    driver.find_element(By.CSS_SELECTOR, "#tabs [data-tab=ask]").click()
    out = []
    for n, q in enumerate(queries):
        driver.execute_script("document.getElementById('query').value = arguments[0]", q)
        driver.find_element(By.CSS_SELECTOR, "#ask-form button").click()
        wait_for(driver, f"window.synapseUI.asks === {n + 1} && window.synapseUI.busy === 0")
        out.append(float(driver.execute_script("return window.synapseUI.askMs")))
    return out[2:]


def _http_asks(url: str, queries: list[str]) -> list[float]:
    import httpx

    out = []
    with httpx.Client(headers={"X-API-Key": KEY}, timeout=60) as client:
        for q in queries:
            t0 = time.perf_counter()
            r = client.post(f"{url}/v1/namespaces/{NAMESPACE}/explain", json={"query": q, "k": 10})
            r.raise_for_status()
            out.append(1000 * (time.perf_counter() - t0))
    return out[2:]


def _screenshots(driver: Any, url: str, folder: Path) -> list[Path]:
    from selenium.webdriver.common.by import By

    from ..server.ui.browser import wait_for

    folder.mkdir(parents=True, exist_ok=True)
    shots = []
    driver.get(f"{url}/ui/")
    wait_for(driver, "window.synapseUI.ready && window.synapseUI.busy === 0")
    driver.find_element(By.CSS_SELECTOR, "#ns-table tr[data-ns='demo']").click()
    wait_for(driver, "window.synapseUI.timelineRows > 0 && window.synapseUI.busy === 0")
    driver.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")[3].click()
    wait_for(driver, "!document.getElementById('memory').hidden && window.synapseUI.busy === 0")
    shots.append(folder / "explorer_timeline.png")
    driver.save_screenshot(str(shots[-1]))
    driver.find_element(By.CSS_SELECTOR, "#tabs [data-tab=ask]").click()
    driver.execute_script("document.getElementById('query').value = arguments[0]",
                          "What program did Dana from the Whistler ski trip get into?")
    driver.find_element(By.CSS_SELECTOR, "#ask-form button").click()
    wait_for(driver, "window.synapseUI.graphNodes > 0 && window.synapseUI.busy === 0")
    driver.find_elements(By.CSS_SELECTOR, "#hits > li")[0].click()
    wait_for(driver, "!document.getElementById('memory').hidden && window.synapseUI.busy === 0")
    time.sleep(0.3)
    shots.append(folder / "explorer_ask.png")
    driver.save_screenshot(str(shots[-1]))
    driver.find_element(By.ID, "m-forget").click()
    wait_for(driver, "document.getElementById('confirm').open")
    shots.append(folder / "explorer_forget.png")
    driver.save_screenshot(str(shots[-1]))
    driver.find_element(By.ID, "confirm-no").click()
    return shots


def run_ui(turns: int = 10_000, *, rounds: int = 20, queries: int = 30,
           screenshots: str | Path | None = None, log: Any = print) -> dict[str, Any]:
    """Build the memory, serve it with ``--ui`` and time the page (see the module
    docstring); returns the figures in milliseconds."""
    from ..server.ui.browser import headless_chromium

    qs = synthetic_queries(queries + 2, seed=7)
    with tempfile.TemporaryDirectory(prefix="synapse-bench-ui-") as tmp:
        path = Path(tmp) / "mem"
        build_s = _build(path, turns, log)
        with ServerProcess("http", path, "--embedder", "hashing", "--ui", "--api-key", KEY) as srv:
            driver = headless_chromium()
            try:
                loads = _page_loads(driver, srv.url, rounds)
                asks = _asks(driver, qs)
                http = _http_asks(srv.url, qs)
                shots = [str(p) for p in _screenshots(driver, srv.url, Path(screenshots))] if screenshots else []
            finally:
                driver.quit()
    return {"turns": turns, "build_s": round(build_s, 1), "page_load_ms": _ms(loads),
            "query_page_ms": _ms(asks), "query_http_ms": _ms(http), "rounds": len(loads),
            "queries": len(asks), "screenshots": shots}


def format_ui_table(results: dict[str, Any]) -> str:
    """The figures as a small table."""
    lines = [f"explorer on a memory of {results['turns']} turns (hashing embedder)",
             f"{'':<38} {'p50 ms':>8} {'p95 ms':>8}"]
    for key, what in (("page_load_ms", "page load (to the namespaces drawn)"),
                      ("query_page_ms", "query round trip in the page (drawn)"),
                      ("query_http_ms", "query round trip over HTTP (explain)")):
        lines.append(f"{what:<38} {results[key]['p50']:>8.1f} {results[key]['p95']:>8.1f}")
    return "\n".join(lines)


def add_ui_args(p: argparse.ArgumentParser) -> None:
    """The options of ``synapse bench ui`` (and of ``python -m synapse_integrations.bench.ui``)."""
    p.add_argument("--turns", type=int, default=10_000, help="turns in the memory (default 10000)")
    p.add_argument("--rounds", type=int, default=20, help="timed page loads (default 20)")
    p.add_argument("--queries", type=int, default=30, help="timed queries (default 30)")
    p.add_argument("--out", help="results JSON")
    p.add_argument("--screenshots", metavar="DIR", help="save the views as PNG in DIR")


def cmd_bench_ui(args: argparse.Namespace) -> int:
    """Run the benchmark for parsed :func:`add_ui_args` options; prints the table."""
    results = run_ui(args.turns, rounds=args.rounds, queries=args.queries, screenshots=args.screenshots)
    print(format_ui_table(results))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m synapse_integrations.bench.ui [--turns N] [--out FILE] [--screenshots DIR]``
    (the same as ``synapse bench ui``)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    add_ui_args(p)
    return cmd_bench_ui(p.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
