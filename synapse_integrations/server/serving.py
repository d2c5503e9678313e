"""Running a server process: uvicorn until SIGTERM or SIGINT, then the caller's final work
(the memories' last snapshot), then a normal exit (status 0).

uvicorn handles both signals while it serves, shuts down gracefully, then restores the
handlers it found and raises the signal again so that the process ends "as the signal
would"; with the default handlers that kills it (exit -15) before any code after the
server runs. Inside :func:`stop_signals` the handlers it finds record the signal instead,
so the code after the server, inside the block, runs to the end: a second signal during
the final snapshot cannot cut it short either (``kill -9`` still can).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["run_uvicorn", "stop_signals"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def stop_signals() -> Iterator[list[str]]:
    """Within the block SIGTERM and SIGINT are recorded (their names, in the yielded list)
    rather than fatal; the previous handlers come back on exit. Off the main thread,
    where signals cannot be handled, it changes nothing."""
    received: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def record(signum: int, frame: Any) -> None:
        received.append(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, record) for sig in STOP_SIGNALS}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_uvicorn(app: Any, *, host: str, port: int, log_level: str, graceful_s: float = 10,
                keep_logging: bool = False) -> None:
    """Serve ``app`` on ``host:port`` until SIGTERM or SIGINT (call it inside
    :func:`stop_signals`; in-flight requests get ``graceful_s`` seconds to finish).
    ``keep_logging``: leave the logging set up as it is (JSON logs) instead of uvicorn's
    own configuration."""
    import uvicorn

    extra: dict[str, Any] = {"log_config": None} if keep_logging else {}
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level,
                                  timeout_graceful_shutdown=graceful_s, **extra)).run()
