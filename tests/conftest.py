"""Shared fixtures: the real MiniLM embedder (loaded once), fresh memories, a real Chroma server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

# the tests mirror the package's subpackages (tests/core/signals/, tests/server/...); their
# shared helpers (_server_helpers.py, _toy_models.py, ...) and fixtures stay here
sys.path.insert(0, str(Path(__file__).parent))

from synapse_integrations.bench.serve import free_port  # noqa: E402
from synapse_integrations.embeddings import as_embedder  # noqa: E402


@pytest.fixture(scope="session")
def embedder():
    """The real all-MiniLM-L6-v2, shared by every test (loading takes a few seconds)."""
    emb = as_embedder(None)
    emb.embed_query("warm up")
    return emb


@pytest.fixture
def memory(tmp_path, embedder):
    from synapse_integrations import Synapse

    mem = Synapse(tmp_path / "mem", embedder=embedder)
    yield mem
    mem.close()


def _chroma_cli() -> list[str]:
    exe = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    return [exe]


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """A real ``chroma run`` server on 127.0.0.1 (free port), stopped by its PID afterwards."""
    import chromadb

    data = tmp_path_factory.mktemp("chroma-server")
    port = free_port()
    log = open(data / "server.log", "wb")
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen(
        [*_chroma_cli(), "run", "--path", str(data / "db"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )
    deadline = time.monotonic() + 60
    client = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chroma run exited early: {(data / 'server.log').read_text()[-2000:]}")
        try:
            client = chromadb.HttpClient(host="127.0.0.1", port=port)
            client.heartbeat()
            break
        except Exception:
            time.sleep(0.3)
    else:
        proc.kill()
        raise RuntimeError("chroma server did not start within 60 s")
    yield {"host": "127.0.0.1", "port": port, "pid": proc.pid, "process": proc}
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
