"""Export and import of a memory as JSONL: one turn per line.

A line is ``{"id", "text", "speaker", "timestamp", "metadata"}``, plus ``"archived": true``
for an episode that was archived, ``"supersedes"``: the id of the older version it
replaced (``Synapse.update``; an import links them again, :func:`link_versions`) and,
with ``--with-vectors``, ``"vector"`` (its stored
embedding, so that an import does not embed the text again and retrieves exactly as the
original did). ``timestamp`` is the event time in Unix epoch seconds (UTC), written exactly;
an import also accepts an ISO 8601 string. Lines are in ingestion order; importing them in
that order rebuilds the same episodes (same ids, texts, speakers, times, metadata) and,
with vectors, the same retrieval. Concepts are not exported: they are derived, and the
import extracts them again in the same order.

>>> line = turn_from_line('{"id": "a", "text": "hi", "timestamp": 1.5, "vector": [1, 0]}')
>>> line["turn"], line["archived"], line["vector"], line["supersedes"]
({'id': 'a', 'text': 'hi', 'timestamp': 1.5}, False, [1, 0], None)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import IO, Any

from ..errors import InvalidInputError

__all__ = ["LINE_FIELDS", "export_lines", "link_versions", "read_lines", "turn_from_line"]

#: The fields of an export line (the first five are the turn itself).
LINE_FIELDS = ("id", "text", "speaker", "timestamp", "metadata", "archived", "supersedes", "vector")


def export_lines(engine: Any, *, with_vectors: bool = False) -> list[dict[str, Any]]:
    """Every episode of a local engine (active and archived) as export lines, in ingestion
    order, read while holding the memory's lock (one consistent moment). Vectors come
    from the active graph; an archived episode is exported without its vector (the import
    embeds it again, then archives it)."""
    with engine.inspect_retrieval() as steps:
        episodes = engine.episodes(include_archived=True)
        archived = {a["id"] for a in engine.archived()}
        view = steps.view if with_vectors else None
        lines = []
        for ep in episodes:
            line: dict[str, Any] = {"id": ep["id"], "text": ep["text"], "speaker": ep.get("speaker"),
                                    "timestamp": ep.get("ts"), "metadata": ep.get("metadata") or {}}
            if ep["id"] in archived:
                line["archived"] = True
            if ep.get("supersedes"):
                line["supersedes"] = ep["supersedes"]
            if view is not None and ep["id"] in view.index:
                line["vector"] = [float(x) for x in view.embeddings[view.index[ep["id"]]]]
            lines.append(line)
    return lines


def turn_from_line(text: str | dict[str, Any], *, lineno: int | None = None) -> dict[str, Any]:
    """One export line parsed: ``{"turn": {...}, "archived": bool, "vector": list | None}``;
    :class:`InvalidInputError` naming the line when it is not a turn."""
    where = f"line {lineno}: " if lineno is not None else ""
    if isinstance(text, str):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidInputError(f"{where}not JSON ({exc})") from None
    else:
        data = text
    if not isinstance(data, dict):
        raise InvalidInputError(f"{where}a line must be a JSON object (one turn)")
    unknown = sorted(set(data) - set(LINE_FIELDS))
    if unknown:
        raise InvalidInputError(f"{where}unknown field(s) {unknown}; a line has {list(LINE_FIELDS)}")
    if "text" not in data:
        raise InvalidInputError(f"{where}a turn needs a 'text'")
    turn = {k: data[k] for k in ("id", "text", "speaker", "timestamp", "metadata")
            if data.get(k) is not None}
    archived = data.get("archived", False)
    if not isinstance(archived, bool):
        raise InvalidInputError(f"{where}'archived' must be true or false")
    older = data.get("supersedes")
    if older is not None and (not isinstance(older, str) or "id" not in data):
        raise InvalidInputError(f"{where}'supersedes' must be the id of a turn, on a turn with an 'id'")
    return {"turn": turn, "archived": archived, "vector": data.get("vector"), "supersedes": older}


def link_versions(target: Any, lines: Iterable[dict[str, Any]]) -> int:
    """Link again the versions that stored export ``lines`` replaced (each line as it was
    exported or parsed: ``"supersedes"`` and its own ``"id"``), on ``target`` (anything with
    ``supersede(old_id, new_id)``); before archiving, which a link needs both active for.
    Returns how many links were made."""
    n = 0
    for line in lines:
        older = line.get("supersedes")
        if older:
            target.supersede(older, line["id"] if "id" in line else line["turn"]["id"])
            n += 1
    return n


def read_lines(stream: IO[str] | Iterable[str]) -> Iterator[dict[str, Any]]:
    """Parsed export lines of a JSONL stream (blank lines skipped)."""
    for lineno, raw in enumerate(stream, 1):
        if raw.strip():
            yield turn_from_line(raw, lineno=lineno)


def write_lines(lines: Iterable[dict[str, Any]], stream: IO[str]) -> int:
    """Write export lines as JSONL; returns how many."""
    n = 0
    for line in lines:
        stream.write(json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n")
        n += 1
    return n
