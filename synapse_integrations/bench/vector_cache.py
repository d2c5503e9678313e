"""An on-disk cache of text embeddings for the benchmarks (``--embed-cache DIR``).

LongMemEval-S haystacks are long (about 38,000 distinct turns of ~1,000 characters in the
82-question dev slice); all-MiniLM-L6-v2 embeds them at 15-30 texts/s on 2 CPU cores,
which is most of a run. A benchmark run embeds each distinct text once anyway
(:class:`~synapse_integrations.bench.retrieval.CachingEmbedder`); this cache keeps those
vectors between runs, so a re-run (another method set, another k) skips the embedding.

Layout: ``manifest.json`` (``{"format": 1, "embedder": name, "dim": d}``) and shards
``vectors-NNNNN.npz`` (``keys``: SHA-256 hex of each text, ``vectors``: float32 rows),
each written atomically by :meth:`VectorCache.flush`, never rewritten; ``allow_pickle=False`` on read. A cache made by
another embedder (manifest name or dimension differs) is refused with an error, never
mixed.

>>> import tempfile
>>> import numpy as np
>>> d = tempfile.mkdtemp()
>>> store = VectorCache(d, embedder="toy", dim=2)
>>> store.put(["hi"], np.array([[1.0, 0.0]], dtype=np.float32))
>>> store.flush()
>>> VectorCache(d, embedder="toy", dim=2).get(["hi", "new"])[0].tolist()
[1.0, 0.0]
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import InvalidInputError

__all__ = ["VectorCache", "text_key"]

_FORMAT = 1


def text_key(text: str) -> str:
    """The cache key of a text: the SHA-256 hex digest of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class VectorCache:
    """Vectors of texts under ``path`` for one embedder (``embedder`` names it)."""

    def __init__(self, path: str | Path, *, embedder: str, dim: int) -> None:
        self.path = Path(path)
        self.embedder = embedder
        self.dim = int(dim)
        self.path.mkdir(parents=True, exist_ok=True)
        manifest = self.path / "manifest.json"
        want = {"format": _FORMAT, "embedder": embedder, "dim": self.dim}
        if manifest.exists():
            have = json.loads(manifest.read_text("utf-8"))
            if have != want:
                raise InvalidInputError(
                    f"{self.path} holds vectors of {have}, not of {want}: use another "
                    "--embed-cache folder (vectors of different embedders are never mixed)")
        else:
            _atomic_write(manifest, json.dumps(want).encode("utf-8"))
        self._rows: dict[str, np.ndarray] = {}
        self._pending: dict[str, np.ndarray] = {}
        self.flush_every = 4096
        self._shards = 0
        for shard in sorted(self.path.glob("vectors-*.npz")):
            with np.load(shard, allow_pickle=False) as z:
                keys, vecs = z["keys"], z["vectors"]
            if vecs.ndim != 2 or vecs.shape != (len(keys), self.dim):
                raise InvalidInputError(f"{shard}: vectors of shape {vecs.shape}, expected "
                                        f"({len(keys)}, {self.dim})")
            for k, v in zip(keys.tolist(), vecs):
                self._rows[k] = v
            self._shards += 1

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The cached vector of each text, or ``None`` where there is none."""
        return [self._rows.get(text_key(t)) for t in texts]

    def put(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Store the vectors of ``texts`` (texts already cached are skipped). They are
        readable at once; on disk they go into the next shard, written by :meth:`flush`
        (called by the benchmarks after each memory, and whenever
        ``flush_every`` rows are pending)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(texts), self.dim):
            raise InvalidInputError(f"expected {len(texts)} vectors of dim {self.dim}, "
                                    f"got shape {vectors.shape}")
        for t, v in zip(texts, vectors):
            k = text_key(t)
            if k not in self._rows:
                self._rows[k] = v
                self._pending[k] = v
        if len(self._pending) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Write the pending vectors as one new shard (atomically; nothing if none)."""
        if not self._pending:
            return
        keys = np.array(list(self._pending), dtype="<U64")
        vecs = np.stack(list(self._pending.values()))
        while (self.path / f"vectors-{self._shards:05d}.npz").exists():
            self._shards += 1
        target = self.path / f"vectors-{self._shards:05d}.npz"
        tmp = target.with_name(target.name + ".tmp")
        with tmp.open("wb") as fh:
            np.savez(fh, keys=keys, vectors=vecs)
        os.replace(tmp, target)
        self._shards += 1
        self._pending = {}


def _atomic_write(target: Path, data: bytes) -> None:
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
