"""Helpers of the server tests: a memory server on 127.0.0.1 (in this process, on a uvicorn
thread, or as a `synapse serve` subprocess), free ports, health polling."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

from synapse_integrations.bench.serve import (
    ServerProcess,
    free_port,
    server_env,
    wait_healthy,
)

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["ROOT", "ServerProcess", "ThreadServer", "env", "free_port", "rest_server",
           "synapse_cmd", "wait_healthy"]

#: The environment of a subprocess that must import this checkout.
env = server_env


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


