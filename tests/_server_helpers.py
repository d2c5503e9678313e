"""Helpers of the server tests: a memory server on 127.0.0.1 (in this process, on a uvicorn
thread, or as a `synapse serve` subprocess), free ports, health polling."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, *, timeout: float = 60.0, proc: subprocess.Popen | None = None,
                 log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}): "
                               f"{log.read_text()[-3000:] if log else ''}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"no healthy server at {url} within {timeout} s")


class ThreadServer:
    """A uvicorn server on a thread of this process, serving ``app`` on 127.0.0.1."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the in-process server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def rest_server(path: Path, **kwargs: Any) -> ThreadServer:
    """The REST API over ``path`` on a thread (``kwargs``: create_app's, e.g. embedder)."""
    from synapse_integrations.server.rest import create_app

    return ThreadServer(create_app(path, **kwargs))


def synapse_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "synapse_integrations.cli", *args]


def env() -> dict[str, str]:
    """The environment of a subprocess that must import this checkout."""
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "ANONYMIZED_TELEMETRY": "False", "TOKENIZERS_PARALLELISM": "false"}


class ServerProcess:
    """``synapse serve http|mcp ...`` as a subprocess on a free port of 127.0.0.1."""

    def __init__(self, kind: str, path: Path, *extra: str, port: int | None = None,
                 log: Path | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.path = path
        self.log_path = log or path.parent / f"server-{self.port}.log"
        self.args = synapse_cmd("serve", kind, "--path", str(path), "--port", str(self.port), *extra)
        self.proc: subprocess.Popen | None = None

    def start(self, *, timeout: float = 60.0) -> ServerProcess:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, env=env(), cwd=ROOT)
        log.close()
        wait_healthy(self.url, timeout=timeout, proc=self.proc, log=self.log_path)
        return self

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
