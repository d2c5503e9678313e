"""The contents of a snapshot read back from disk, checked: the config saved with it
(:func:`stored_config`, fields of older and newer versions read), and the graph and the
ingestion bookkeeping (:func:`validate_snapshot`), held to the same bounds as the API
(:mod:`.validation`), so that a snapshot whose checksums match but whose content the
engine would not write is refused and an older one read instead.

>>> stored_config({"lexical_stemming": True}).speaker_in_document
False
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from typing import Any

from ...config import RETIRED_FIELDS, SynapseConfig
from ...errors import InvalidInputError, SnapshotError
from ..graph.graph import EDGE_KINDS, MemoryGraph
from .validation import (
    MAX_METADATA_DEPTH,
    MAX_SPIKES,
    MAX_TEXT_CHARS,
    check_depth,
    epoch_ok,
)

logger = logging.getLogger(__name__)

__all__ = ["stored_config", "valid_sources", "validate_snapshot"]


def stored_config(data: Any, *, warn: bool = True) -> SynapseConfig:
    """The config saved with a snapshot. Fields an older version had
    (:data:`~synapse_integrations.config.RETIRED_FIELDS`) are dropped; fields this version
    does not know (written by a newer version) are ignored with a warning instead of making
    the memory unreadable."""
    if isinstance(data, Mapping):
        known = {f.name for f in dataclasses.fields(SynapseConfig)}
        data = {k: v for k, v in data.items() if k not in RETIRED_FIELDS}  # an older version's
        unknown = sorted(set(data) - known)
        if unknown:
            if warn:
                logger.warning("the snapshot's config has field(s) this version does not know, "
                               "ignored: %s", ", ".join(map(str, unknown)))
            data = {k: v for k, v in data.items() if k in known}
        if "abstraction_scope" not in data:
            # written before the field existed (0.1.0 betas): those memories linked each
            # concept to its whole window unless ``extra`` asked for mentions
            extra = data.get("extra") if isinstance(data.get("extra"), Mapping) else {}
            data = {**data, "abstraction_scope": extra.get("abstraction_scope", "window")}
        if "lexical_stemming" not in data:
            # written before the lexical index stemmed (0.1.x): it keeps matching words as
            # written, so the memory ranks as it did; a config passed at open changes it
            data = {**data, "lexical_stemming": False}
        if "speaker_in_document" not in data:
            # written before turns were read with their speaker's name (0.1.x): their
            # vectors hold the bare text, so the index reads it bare too
            data = {**data, "speaker_in_document": False}
    return SynapseConfig.from_dict(data)


_MAX_SEQ = 2 ** 53


def _int_in(v: Any, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _unit(v: Any) -> bool:
    """A finite number in [0, 1] (edge weights, confidences, PageRank)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
        and -1e-9 <= v <= 1.0 + 1e-6


def _node_problem(d: Any) -> str | None:
    """What is wrong with one node's attributes read back from disk (None: nothing).
    The same bounds as the API: a value that would hang or overflow retrieval is refused."""
    if not isinstance(d, dict) or d.get("kind") not in ("episode", "concept"):
        return "a bad kind"
    text = d.get("text")
    if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
        return "a bad text"
    if not _int_in(d.get("seq"), 0, _MAX_SEQ):
        return "a bad seq"
    if not _int_in(d.get("dormant", 0), 0, _MAX_SEQ):
        return "a bad dormancy counter"
    if not _int_in(d.get("gen", 0), 0, _MAX_SEQ):
        return "a bad generation"
    spikes = d.get("spikes", [])
    if not isinstance(spikes, list) or len(spikes) > MAX_SPIKES or not all(
            isinstance(x, list) and len(x) == 2 and epoch_ok(x[0]) and _finite(x[1])
            for x in spikes):
        return f"a bad spike train (at most {MAX_SPIKES} [epoch seconds, value] pairs)"
    affect = d.get("affect")
    if affect is not None and not (isinstance(affect, list) and len(affect) == 3
                                   and all(_finite(x) for x in affect)):
        return "a bad affect tag ([valence, arousal, complexity])"
    if d["kind"] == "episode":
        for key in ("ts", "ingest_ts"):
            if d.get(key) is not None and not epoch_ok(d[key]):
                return f"a bad timestamp ({key} outside the years 1-9999)"
        metadata = d.get("metadata", {})
        if not isinstance(metadata, dict):
            return "bad metadata"
        try:
            check_depth(metadata, what="metadata")
        except InvalidInputError:
            return f"metadata nested over {MAX_METADATA_DEPTH} levels"
        speaker = d.get("speaker")
        if speaker is not None and (not isinstance(speaker, str) or len(speaker) > 1000):
            return "a bad speaker"
    else:
        aliases = d.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            return "bad aliases"
        if not _unit(d.get("confidence", 1.0)):
            return "a bad confidence"
        if not _int_in(d.get("mentions", 1), 0, _MAX_SEQ):
            return "a bad mention count"
        attrs = d.get("attributes", {})
        if not isinstance(attrs, dict):
            return "bad attributes"
        try:
            check_depth(attrs, what="attributes")
        except InvalidInputError:
            return "attributes nested too deep"
        if not valid_sources(d):
            return "bad sources"
    return None


def _valid_entry(entry: Any) -> bool:
    """A provenance entry (:mod:`.provenance`): ``{"exact": [ids], "windows": [[ids]]}``."""
    if not isinstance(entry, dict):
        return False
    exact, windows = entry.get("exact", []), entry.get("windows", [])
    return isinstance(exact, list) and all(isinstance(i, str) for i in exact) \
        and isinstance(windows, list) \
        and all(isinstance(w, list) and all(isinstance(i, str) for i in w) for w in windows)


def valid_sources(d: dict[str, Any]) -> bool:
    """A concept's provenance: ``sources`` maps each name/alias to an entry, and
    ``attribute_sources`` (optional) is one entry."""
    sources = d.get("sources", {})
    return isinstance(sources, dict) and all(_valid_entry(e) for e in sources.values()) \
        and (d.get("attribute_sources") is None or _valid_entry(d["attribute_sources"]))


def _edge_problem(d: Any) -> str | None:
    if not isinstance(d, dict) or d.get("kind") not in EDGE_KINDS or not _unit(d.get("weight")):
        return "a bad kind/weight"
    if "rel" in d and not isinstance(d["rel"], str):
        return "a bad relation"
    if "sources" in d and not _valid_entry(d["sources"]):
        return "bad sources"
    return None


def validate_snapshot(manifest: dict[str, Any], files: dict[str, Any], *, namespace: str) -> None:
    """Reject (with :class:`SnapshotError`) a snapshot whose checksums match but whose
    content is not what the engine writes, or holds a value outside the bounds the API
    and the config accept (a timestamp past the year 9999, an iteration count that would
    hang retrieval, a NaN PageRank...); the snapshot store then falls back to an older
    one."""
    if manifest.get("namespace") not in (None, namespace):
        raise SnapshotError(f"snapshot belongs to namespace {manifest.get('namespace')!r}, "
                            f"not {namespace!r}")
    try:
        stored_config(manifest.get("config"), warn=False)
    except Exception as exc:  # any malformed config is a bad snapshot
        raise SnapshotError(f"snapshot config is unusable: {exc}") from None
    try:
        mg = MemoryGraph.from_json(files.get("graph"), dim=1)
    except SnapshotError:
        raise
    except Exception as exc:
        raise SnapshotError(f"graph snapshot is malformed: {exc}") from None
    for n, d in mg.g.nodes(data=True):
        if not isinstance(n, str) or len(n) > 512:
            raise SnapshotError(f"graph snapshot node {str(n)[:80]!r} has a bad id")
        problem = _node_problem(d)
        if problem:
            raise SnapshotError(f"graph snapshot node {n!r} has {problem}")
    for u, v, d in mg.g.edges(data=True):
        problem = _edge_problem(d)
        if problem:
            raise SnapshotError(f"graph snapshot edge {u!r}->{v!r} has {problem}")
    if not all(_unit(p) for p in mg.pagerank.values()):
        raise SnapshotError("graph snapshot holds a PageRank outside [0, 1] (or NaN)")
    if not all(_unit(w) for table in mg.learned.values() for w in table.values()):
        raise SnapshotError("graph snapshot holds a learned weight outside [0, 1] (or NaN)")
    for n, rec in mg.archive.items():
        if not (isinstance(rec, dict) and isinstance(rec.get("node"), dict)
                and isinstance(rec.get("edges"), list)
                and all(isinstance(e, list) and len(e) == 3 and isinstance(e[0], str)
                        and isinstance(e[1], str) and _edge_problem(e[2]) is None
                        for e in rec["edges"])) or _node_problem(rec["node"]) is not None:
            raise SnapshotError(f"graph snapshot archive record {str(n)[:80]!r} is malformed")
    state = files.get("state", {})
    if not isinstance(state, dict) or not isinstance(state.get("pending", []), list) \
            or not all(isinstance(i, str) for i in state.get("pending", [])) \
            or not isinstance(state.get("last_episode"), (str, type(None))) \
            or not _int_in(state.get("windows", 0), 0, _MAX_SEQ):
        raise SnapshotError("snapshot state section is malformed")
