"""Chroma's persisted HNSW index files, read and checked without Chroma.

An embedded Chroma keeps each collection's approximate-nearest-neighbour index (hnswlib)
in a folder beside ``chroma.sqlite3``: ``header.bin`` (the index's parameters),
``data_level0.bin`` (per element: its level-0 neighbour list, its vector, its label),
``link_lists.bin`` (per element: the size of its upper-level lists, then the lists),
``length.bin`` and ``index_metadata.pickle``. Chroma loads these files in native code:
a corrupt file (flipped bytes, a truncated copy) can crash the whole process with
SIGSEGV instead of raising. :func:`check_index` reads them with numpy first and names
what is wrong (a neighbour id past the element count, a list longer than the index
allows, a size that does not add up), so that the engine can rebuild the index instead
of handing it to Chroma. :func:`zero_hnsw_slack` clears the unused space Chroma fills
with stale heap bytes.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import numpy as np

from ..errors import StorageError

logger = logging.getLogger(__name__)

__all__ = ["check_index", "zero_hnsw_slack"]

_HEADER = struct.Struct("<I6QiI3QdQ")  # persist version, hnswlib's saveIndex fields
_MAX_M = 1 << 12
_MAX_LEVEL = 64


def _header(folder: Path) -> tuple:
    head = (folder / "header.bin").read_bytes()
    if len(head) < _HEADER.size:
        raise ValueError(f"header.bin has {len(head)} bytes, expected {_HEADER.size}")
    return _HEADER.unpack_from(head, 0)


def check_index(folder: str | Path) -> str | None:
    """What is wrong with a persisted HNSW index (None: nothing this check can see).
    A folder without ``header.bin`` (an index Chroma has not persisted yet) is fine."""
    folder = Path(folder)
    if not (folder / "header.bin").exists():
        return None
    try:
        (_v, off0, max_el, count, size, label_off, off_data, max_level, enter, max_m,
         max_m0, m, _mult, _ef) = _header(folder)
        if not (off0 == 0 and 0 <= count <= max_el < 1 << 40 and 0 < max_m <= _MAX_M
                and 0 < max_m0 <= _MAX_M and 0 < m <= max_m0):
            return "header.bin holds impossible sizes"
        if off_data != 4 + 4 * max_m0 or label_off != size - 8 or label_off <= off_data \
                or (label_off - off_data) % 4:
            return "header.bin's offsets do not fit its element size"
        if count and not (0 <= max_level <= _MAX_LEVEL and enter < count):
            return "header.bin's entry point or top level is out of range"
        total = (folder / "data_level0.bin").stat().st_size
        if size == 0 or total % size or total < count * size or total // size > max_el:
            return "data_level0.bin's size does not match header.bin"
        data = np.fromfile(folder / "data_level0.bin", dtype=np.uint8, count=count * size)
        rows = data.reshape(count, size)
        links = rows[:, :off_data].copy().view("<u4")  # [count word, neighbour ids...]
        n = links[:, 0] & 0xFFFF
        if (n > max_m0).any():
            return "a level-0 neighbour list is longer than the index allows"
        ids = links[:, 1:]
        used = np.arange(max_m0)[None, :] < n[:, None]
        if (ids[used] >= count).any():
            return "a level-0 neighbour id points past the last element"
        vectors = rows[:, off_data:label_off].copy().view("<f4")
        if not np.isfinite(vectors).all():
            return "a stored vector is not finite"
        labels = rows[:, label_off:].copy().view("<u8")[:, 0]
        if len(np.unique(labels)) != count:
            return "two elements share a label"
        problem = _check_upper_levels(folder / "link_lists.bin", count, max_m, max_level)
        if problem:
            return problem
    except (OSError, ValueError, struct.error) as exc:
        return f"unreadable index files: {exc}"
    return None


def _check_upper_levels(path: Path, count: int, max_m: int, max_level: int) -> str | None:
    raw = path.read_bytes()
    block = 4 + 4 * max_m
    pos = 0
    for _ in range(count):
        if pos + 4 > len(raw):
            return "link_lists.bin ends early"
        size = int.from_bytes(raw[pos:pos + 4], "little")
        pos += 4
        if size % block or size // block > max_level or pos + size > len(raw):
            return "link_lists.bin holds a list size that does not fit"
        if size:
            lists = np.frombuffer(raw, dtype="<u4", count=size // 4, offset=pos).reshape(-1, max_m + 1)
            n = lists[:, 0] & 0xFFFF
            if (n > max_m).any():
                return "an upper-level neighbour list is longer than the index allows"
            used = np.arange(max_m)[None, :] < n[:, None]
            if (lists[:, 1:][used] >= count).any():
                return "an upper-level neighbour id points past the last element"
        pos += size
    if pos != len(raw):
        return "link_lists.bin is longer than its lists"
    return None


def zero_hnsw_slack(folder: str | Path) -> int:
    """Zero the unused tails of a persisted HNSW index's ``data_level0.bin`` and
    ``length.bin``.

    Chroma's HNSW index (hnswlib) allocates room for ``max_elements`` without clearing it
    and can write the whole buffer to disk: the slots past ``cur_element_count`` hold whatever
    the process's heap held before, which can be the text of recent writes, forgotten ones
    included. ``length.bin`` (one float per element: the vector's norm, kept by Chroma's
    hnswlib to return un-normalised vectors for cosine) is written the same way. Those
    bytes are never read as data, so zeroing them is safe. The header is checked against
    the file sizes first; anything unexpected is left alone (and logged). Returns the
    number of bytes zeroed.
    """
    folder = Path(folder)
    header, data = folder / "header.bin", folder / "data_level0.bin"
    try:
        head = header.read_bytes()
        total = data.stat().st_size
    except OSError:
        return 0
    if len(head) < 36:
        return 0
    # a u32 persist version, then hnswlib's fields: offsetLevel0, max_elements,
    # cur_element_count, size_data_per_element (u64 each, little-endian)
    _version, _offset0, max_elements, count, size = struct.unpack_from("<I4Q", head, 0)
    # the file holds either the used slots only or the whole allocation (max_elements)
    if size == 0 or total % size or count * size > total or total // size > max_elements:
        logger.warning("unexpected HNSW header in %s; its unused space is not cleared", folder)
        return 0
    zeroed = _zero_tail(data, count * size, total)
    lengths = folder / "length.bin"
    try:
        length_total = lengths.stat().st_size
    except OSError:
        return zeroed
    if length_total % 4 or count * 4 > length_total or length_total // 4 > max_elements:
        logger.warning("unexpected length.bin size in %s; its unused space is not cleared", folder)
        return zeroed
    return zeroed + _zero_tail(lengths, count * 4, length_total)


def _zero_tail(path: Path, start: int, total: int) -> int:
    """Write zeros over bytes ``[start, total)`` of ``path`` (synced); returns how many."""
    if start >= total:
        return 0
    try:
        with open(path, "r+b") as fh:
            fh.seek(start)
            left = total - start
            block = bytes(min(left, 1 << 20))
            while left > 0:
                fh.write(block[:left])
                left -= min(left, len(block))
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise StorageError(f"could not clear unused space in {path}: {exc}") from exc
    return total - start


