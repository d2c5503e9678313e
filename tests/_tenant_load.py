"""Many tenants through one ``synapse serve http`` process (issue 45, item 4): each new
namespace gets a turn over REST, every ``every``-th namespace the server's descriptors
(``/proc/<pid>/fd``), RSS, threads and the seconds since the start are sampled, then every
namespace is read back; ``slices`` says how long each ``every`` new namespaces took (ms per
namespace), which stays flat when opening a namespace does not slow down with the others.

Used by tests/safety/test_safety_tenants.py (a few hundred namespaces) and run by hand for the
figures in docs/deployment.md::

    python tests/_tenant_load.py --namespaces 1000 [--nofile 1024] [--deadline 1800] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))

from _server_helpers import ROOT, env, free_port, synapse_cmd, wait_healthy  # noqa: E402


def proc_figures(pid: int) -> dict[str, float]:
    """Descriptors, RSS (MiB) and threads of process ``pid``."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return {"fds": len(list(Path(f"/proc/{pid}/fd").iterdir())), "rss_mib": round(rss, 1),
            "threads": len(list(Path(f"/proc/{pid}/task").iterdir()))}


def start_server(path: Path, *, nofile: int | None = None) -> tuple[subprocess.Popen, str, Path]:
    """``synapse serve http --embedder hashing`` on a free port of 127.0.0.1, its soft
    descriptor limit set to ``nofile`` (``ulimit -n``) when given."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = path.parent / f"server-{port}.log"

    def limit() -> None:
        if nofile is not None:
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))

    with open(log_path, "ab") as log:
        proc = subprocess.Popen(synapse_cmd("serve", "http", "--path", str(path), "--port", str(port),
                                            "--embedder", "hashing"),
                                stdout=log, stderr=subprocess.STDOUT, env=env(), cwd=ROOT,
                                preexec_fn=limit)
    wait_healthy(url, timeout=120, proc=proc, log=log_path)
    return proc, url, log_path


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def run(url: str, pid: int, namespaces: int, *, every: int = 25,
        deadline_s: float = 1800.0) -> dict[str, Any]:
    """Write then read ``namespaces`` tenants; ``{"samples", "errors", "open_ms", ...}``.
    Stops (and says so) past ``deadline_s``."""
    t_start = time.monotonic()
    t_end = t_start + deadline_s

    def sample(**where: Any) -> dict[str, Any]:
        return {**where, "t_s": round(time.monotonic() - t_start, 2), **proc_figures(pid)}

    samples: list[dict[str, Any]] = [sample(namespaces=0)]
    errors: list[str] = []
    open_ms: list[float] = []
    read_ms: list[float] = []
    written = 0
    with httpx.Client(base_url=url, timeout=120) as http:
        for n in range(namespaces):
            if time.monotonic() > t_end:
                errors.append(f"deadline: stopped after {n} namespaces")
                break
            t0 = time.perf_counter()
            r = http.post(f"/v1/namespaces/tenant-{n}/turns",
                          json={"turns": [{"text": f"tenant {n} keeps bees in the garden",
                                           "id": f"t{n}"}]})
            open_ms.append((time.perf_counter() - t0) * 1000)
            if r.status_code != 200:
                errors.append(f"write tenant-{n}: {r.status_code} {r.text[:200]}")
            else:
                written += 1
            if (n + 1) % every == 0:
                samples.append(sample(namespaces=n + 1))
        for n in range(written):
            if time.monotonic() > t_end:
                errors.append(f"deadline: read back {n} namespaces")
                break
            t0 = time.perf_counter()
            r = http.post(f"/v1/namespaces/tenant-{n}/retrieve", json={"query": "bees garden", "k": 1})
            read_ms.append((time.perf_counter() - t0) * 1000)  # its engine closed since: reopened
            ids = [it.get("id") for it in r.json().get("items", [])] if r.status_code == 200 else []
            if ids != [f"t{n}"]:
                errors.append(f"read tenant-{n}: {r.status_code} {r.text[:200]}")
            if (n + 1) % every == 0:
                samples.append(sample(namespaces=namespaces, read_back=n + 1))
        samples.append(sample(namespaces=namespaces, read_back=written))
    cold, reopen = sorted(open_ms), sorted(read_ms)
    writes = [s for s in samples if "read_back" not in s]
    slices = [{"namespaces": b["namespaces"],
               "ms_per_namespace": round((b["t_s"] - a["t_s"]) * 1000 / (b["namespaces"] - a["namespaces"]), 1)}
              for a, b in zip(writes, writes[1:])]
    return {"samples": samples, "slices": slices, "errors": errors, "written": written,
            "write_s": writes[-1]["t_s"], "total_s": samples[-1]["t_s"],
            "cold_write_p50_ms": round(cold[len(cold) // 2], 1) if cold else None,
            "cold_write_p95_ms": round(cold[int(len(cold) * 0.95)], 1) if cold else None,
            "cold_read_p50_ms": round(reopen[len(reopen) // 2], 1) if reopen else None,
            "cold_read_p95_ms": round(reopen[int(len(reopen) * 0.95)], 1) if reopen else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--namespaces", type=int, default=1000)
    ap.add_argument("--nofile", type=int, default=None, help="the server's ulimit -n")
    ap.add_argument("--path", type=Path, default=None)
    ap.add_argument("--every", type=int, default=50, help="namespaces per sample and slice")
    ap.add_argument("--deadline", type=float, default=1800.0,
                    help="seconds; the run stops (and says so) past it")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    import tempfile

    path = args.path or Path(tempfile.mkdtemp(prefix="synapse-tenants-")) / "mem"
    proc, url, _ = start_server(path, nofile=args.nofile)
    try:
        out = run(url, proc.pid, args.namespaces, every=args.every, deadline_s=args.deadline)
    finally:
        stop_server(proc)
    out["nofile"] = args.nofile
    text = json.dumps(out, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)
    return 0 if not out["errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
