"""The BLAS threads of the engine's own work: numpy's OpenBLAS kept to one thread while the
engine computes, so that it does not fight the sentence encoder for the cores.

On a CPU two thread pools take turns in every write and every query: PyTorch's (the
encoder: OpenMP threads) and numpy's OpenBLAS (the graph's products). Each keeps its
threads spinning for a while after a call (OpenBLAS up to about 0.1 s), so the next call
of the other pool finds the cores taken. Measured on 2 cores (2026-11-29): embedding eight
concept names took 16.7 ms back to back and 31-43 ms right after one small numpy product,
and the query embedding of a ``retrieve()`` right after the previous query's 18 ms instead
of 9.4. The engine's products are small (a window's names against the concepts, the
query against a few thousand rows), so one BLAS thread costs them little and spares the
encoder the spinning (what that gives ``retrieve(text)``, ingestion and the LongMemEval
bench: docs/benchmarks.md, "The encoder's cores, long texts, batch size").

What this module does:

- :func:`engine_blas` wraps every engine operation that computes (writes, consolidation,
  sleep, retrieval, forgetting, repair): while the outermost one runs, BLAS is limited to
  :func:`blas_threads` threads (threadpoolctl, a maintained library that finds the
  loaded BLAS libraries and sets their thread counts), and the process's own setting is
  restored when it returns.
- Only on the main thread. OpenBLAS's thread count belongs to the process, and the
  OpenBLAS of numpy's wheels (0.3.31 here) ignores changes asked for from any other
  thread (measured: a worker thread's limit neither showed nor slowed a product). So an
  operation run from a worker thread (the async twins, a server's thread pool) changes
  nothing, and never leaves the process limited. A process that serves from worker
  threads limits BLAS once, from its main thread, with :func:`limit_process` (``synapse
  serve`` does).
- :func:`wide` lifts the limit for one product over at least :data:`WIDE_ROWS` rows, where
  a second thread saves more than the spinning costs (at 157,000 x 384: 11.1 ms on one
  thread, 5.3-6.2 on two).
- :func:`set_blas_threads` changes the limit (``None``: leave BLAS alone).

The encoder's own threads (PyTorch's OpenMP) are never limited.

>>> from synapse_integrations.core import threads
>>> with threads.engine_blas():
...     pass
>>> threads.blas_threads()
1
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import InvalidInputError

__all__ = ["WIDE_ROWS", "blas_threads", "engine_blas", "limit_process", "set_blas_threads",
           "wide"]

logger = logging.getLogger(__name__)

#: Rows from which a product runs on all the process's BLAS threads (see :func:`wide`).
WIDE_ROWS = 65_536

_limit: int | None = 1
_local = threading.local()    # the main thread's depth and limiter (set on no other thread)
_controller: Any = None       # threadpoolctl.ThreadpoolController, made on first use


def blas_threads() -> int | None:
    """The BLAS threads the engine's operations run with (``None``: not limited)."""
    return _limit


def set_blas_threads(n: int | None) -> None:
    """Run the engine's operations with ``n`` BLAS threads (``None``: leave the process's
    setting alone), from the next outermost operation on.

    >>> set_blas_threads(2); blas_threads()
    2
    >>> set_blas_threads(1)
    """
    global _limit
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise InvalidInputError(f"BLAS threads must be an int >= 1 or None, got {n!r}")
    _limit = n


def _get_controller() -> Any:
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


def _limited(n: int) -> Any:
    """threadpoolctl's limiter after limiting BLAS to ``n`` threads (``None`` when no
    BLAS library could be limited: a speed setting never fails the operation)."""
    try:
        return _get_controller().limit(limits=n, user_api="blas")
    except Exception as exc:
        logger.debug("BLAS threads not limited: %s", exc)
        return None


@contextmanager
def engine_blas() -> Iterator[None]:
    """BLAS limited to :func:`blas_threads` while the block runs on the main thread
    (re-entrant: the outermost block limits and restores); elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    depth = getattr(_local, "depth", 0)
    if depth == 0:
        _local.limiter = None if _limit is None else _limited(_limit)
    _local.depth = depth + 1
    try:
        yield
    finally:
        _local.depth = depth
        if depth == 0 and _local.limiter is not None:
            _local.limiter.restore_original_limits()
            _local.limiter = None


def limit_process() -> bool:
    """For a process that runs the engine from worker threads (``synapse serve``): limit
    BLAS to :func:`blas_threads` for the rest of the process, from the main thread (the
    only thread whose request OpenBLAS honours). Returns whether a limit was set (not
    on another thread, with ``None``, or when no BLAS library can be limited)."""
    if _limit is None or threading.current_thread() is not threading.main_thread():
        return False
    return _limited(_limit) is not None  # kept: never restored


@contextmanager
def wide(rows: int) -> Iterator[None]:
    """Inside :func:`engine_blas`: a product over ``rows`` rows runs on the process's own
    BLAS threads when ``rows >= WIDE_ROWS`` (below that, and outside a limited
    operation, this changes nothing)."""
    limiter = getattr(_local, "limiter", None)
    if rows < WIDE_ROWS or limiter is None:
        yield
        return
    original = limiter.get_original_num_threads().get("blas")
    if not original:
        yield
        return
    with _get_controller().limit(limits=original, user_api="blas"):
        yield
