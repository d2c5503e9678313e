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
- :func:`split_rows` runs a product over at least :data:`SPLIT_ROWS` rows in row blocks on
  the engine's own worker threads, one block per core, each block with the limited BLAS:
  the cores share the product, and afterwards the workers wait on a queue instead of
  spinning as OpenBLAS's own threads do, so the encoder's next call finds the cores free
  (until 2026-11-29 products over 65,536 rows ran on OpenBLAS's threads instead, and the
  smaller ones on one core; the figures are in docs/benchmarks.md, "Products split over
  the cores").
- :func:`set_blas_threads` changes the limit (``None``: leave BLAS alone).

The encoder's own threads (PyTorch's OpenMP) are never limited.

>>> from synapse_integrations.core.kernels import threads
>>> with threads.engine_blas():
...     pass
>>> threads.blas_threads()
1
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from ...errors import InvalidInputError

__all__ = ["SPLIT_ROWS", "blas_threads", "engine_blas", "limit_process", "set_blas_threads",
           "split_rows"]

logger = logging.getLogger(__name__)

#: Rows from which a product is split over the cores (see :func:`split_rows`).
SPLIT_ROWS = 12_288
_ALIGN = 4_096  # rows per block edge (see _edges)

_limit: int | None = 1
_local = threading.local()    # the main thread's depth and limiter (set on no other thread)
_controller: Any = None       # threadpoolctl.ThreadpoolController, made on first use
_process_limit: int | None = None  # what limit_process set for good (None: nothing)
_pool: ThreadPoolExecutor | None = None  # split_rows' workers, made on first use
_pool_lock = threading.Lock()


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
    global _process_limit
    if _limit is None or threading.current_thread() is not threading.main_thread():
        return False
    if _limited(_limit) is None:  # kept: never restored
        return False
    _process_limit = _limit
    return True


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _blocks(rows: int) -> int:
    """How many row blocks a product over ``rows`` rows runs in on this thread, now: one
    per ``limit`` cores when BLAS is known to be limited to ``limit`` threads (inside an
    operation on the main thread, or for the whole process), else 1 (an unlimited BLAS
    already uses every core: more callers would only oversubscribe them)."""
    if rows < SPLIT_ROWS:
        return 1
    limit = _process_limit if getattr(_local, "limiter", None) is None else _limit
    if limit is None:
        return 1
    return max(1, min(_cores() // limit, rows // _ALIGN))


def _edges(rows: int, blocks: int) -> list[int]:
    """Block edges near ``rows * i / blocks``, on multiples of :data:`_ALIGN` rows: blocks
    that start on such a row gave every row the same float as one product over all rows
    with numpy's OpenBLAS (measured; edges elsewhere changed some rows' last bits).

    >>> _edges(16_500, 2), _edges(12_288, 2), _edges(40_000, 3)
    ([0, 8192, 16500], [0, 8192, 12288], [0, 12288, 28672, 40000])
    """
    inner = {round(rows * i / blocks / _ALIGN) * _ALIGN for i in range(1, blocks)}
    return [0, *sorted(e for e in inner if 0 < e < rows), rows]


def _workers() -> ThreadPoolExecutor:
    """:func:`split_rows`' pool: a worker for each core but the caller's, made on first use
    (more blocks than workers wait in its queue; a block never waits on another)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, _cores() - 1),
                                       thread_name_prefix="synapse-rows")
        return _pool


def _forget_pool() -> None:  # a forked child has none of the parent's threads
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def split_rows(rows: int, compute: Callable[[int, int], None]) -> None:
    """Call ``compute(start, stop)`` over row blocks covering ``range(rows)``: one block per
    core when the product is large and BLAS is limited (:func:`_blocks`), all but the first
    on the engine's worker threads, the first on the caller's; else ``compute(0, rows)``.
    ``compute`` writes its block's rows of a result the caller holds; an error in any block
    is raised here, after every block has finished.

    >>> import numpy as np
    >>> m, q = np.ones((4, 3), dtype=np.float32), np.ones(3, dtype=np.float32)
    >>> out = np.empty(4, dtype=np.float32)
    >>> split_rows(4, lambda a, b: np.matmul(m[a:b], q, out=out[a:b]))
    >>> out.tolist()
    [3.0, 3.0, 3.0, 3.0]
    """
    edges = _edges(rows, _blocks(rows))
    if len(edges) == 2:
        compute(0, rows)
        return
    pool = _workers()
    futures = [pool.submit(compute, a, b) for a, b in zip(edges[1:-1], edges[2:])]
    try:
        compute(edges[0], edges[1])
    finally:
        errors = [f.exception() for f in futures]  # waits for every block
    for e in errors:
        if e is not None:
            raise e
