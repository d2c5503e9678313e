"""Assistant echoes: an assistant turn that restates what the user just said.

Chat models often repeat the user's fact back ("Noted: Ana lives in Lisbon now."). Such a
reply is worded like a question about the fact, so it tends to outrank the user's own
statement ("My sister Ana moved to Lisbon last year."), although it adds nothing and may
be wrong. Two steps keep the user's statement first:

1. **at ingestion** (:func:`mark`): an *assistant* turn is marked as an echo of a *user*
   statement (a user turn that does not end with ``?``: an answer to a question is not an
   echo of it) when their embeddings' cosine is at least :data:`ECHO_COSINE` and the user
   turn is one of the :data:`ECHO_LOOKBACK` episodes just before it (in the same
   ``add_turns`` call or already stored). The best such user turn is its source: the turn's metadata gets
   ``echo_of: <source id>``. Roles come from the turn's metadata ``role`` (``"user"`` /
   ``"assistant"``, which the framework adapters set) or, without one, from the speaker
   name (:data:`~..text.lexicon.USER_SPEAKERS`, :data:`~..text.lexicon.ASSISTANT_SPEAKERS`, case-insensitive). An
   ``echo_of`` already in the metadata is kept.
2. **at retrieval** (:func:`demote`): when an echo and its source are both candidates, the
   echo's score is lowered to just below its source's (by :data:`ECHO_MARGIN`); otherwise
   it keeps its score (it may be the only trace of that fact the query reached). The
   change is reported as the item's ``echo`` score component, so the shown terms still
   add up to the score.

The threshold was chosen on MiniLM cosines of replies to a statement: restatements
("Noted: Ana lives in Lisbon now." 0.81, "Got it: you adopted a beagle named Biscuit."
0.93) are above 0.75; replies that add something or only react ("Lisbon is lovely." 0.64,
"Noted, good luck to Dana!" 0.62, an answer to a question 0.45) are below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..graph.roles import is_role
from .base import Candidates, Signal, WriteContext

__all__ = ["ECHO_COSINE", "ECHO_LOOKBACK", "ECHO_MARGIN",
           "demote", "mark"]

#: Minimum cosine between an assistant turn and a recent user turn for it to be an echo.
ECHO_COSINE = 0.75
#: How many episodes before an assistant turn may be its source.
ECHO_LOOKBACK = 4
#: How far below its source an echo is ranked.
ECHO_MARGIN = 0.01


def _stored_before(state: Any, count: int) -> list[tuple[str, dict[str, Any]]]:
    """The ``count`` newest stored episodes, newest first (along the temporal chain)."""
    g = state.graph.g
    out: list[tuple[str, dict[str, Any]]] = []
    node = state.last_episode
    while node is not None and node in g and len(out) < count:
        out.append((node, g.nodes[node]))
        node = next((u for u in g.predecessors(node)
                     if g.edges[u, node].get("kind") == "temporal"), None)
    return out


def mark(rows: Sequence[dict[str, Any]], embs: np.ndarray, state: Any) -> int:
    """Mark the assistant rows that echo a recent user turn (``metadata["echo_of"]``).
    ``rows`` are the validated turns about to be stored, ``embs`` their unit embeddings.
    Returns how many were marked."""
    if not any(is_role(r, "assistant") for r in rows):
        return 0
    stored = _stored_before(state, ECHO_LOOKBACK)
    marked = 0
    for k, row in enumerate(rows):
        if not is_role(row, "assistant") or "echo_of" in row["metadata"]:
            continue
        # the ECHO_LOOKBACK episodes before this row: earlier rows of the batch, then stored
        before = [(rows[j]["id"], rows[j], embs[j]) for j in range(k - 1, -1, -1)]
        before += [(nid, d, state.graph.vectors[nid]) for nid, d in stored]
        best, best_cos = None, ECHO_COSINE
        for nid, turn, vec in before[:ECHO_LOOKBACK]:
            if not is_role(turn, "user") or str(turn.get("text", "")).rstrip().endswith("?"):
                continue
            cos = float(np.dot(np.asarray(vec, dtype=np.float64), np.asarray(embs[k], dtype=np.float64)))
            if cos >= best_cos:
                best, best_cos = nid, cos
        if best is not None:
            row["metadata"] = {**row["metadata"], "echo_of": best}
            marked += 1
    return marked


def _sources(view: Any, start: int = 0) -> np.ndarray:
    """Compiled index of each node's echo source (-1: not an echo, or its source is gone),
    from node ``start`` on."""
    out = np.full(view.n - start, -1, dtype=np.int64)
    for i, meta in enumerate(view.node_values("metadata")[start:]):
        if not meta:  # most turns carry no metadata, concepts none at all
            continue
        src = meta.get("echo_of") if isinstance(meta, Mapping) else None
        if src is not None and src in view.index:
            out[i] = view.index[src]
    return out


def demote(view: Any, cand: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scores with every echo placed :data:`ECHO_MARGIN` below its source when both are
    candidates, and the change per candidate (0, or negative for a demoted echo)."""
    score = np.asarray(score, dtype=np.float64)
    change = np.zeros(score.shape)
    if cand.size == 0:
        return score, change
    sources = view.per_node("echo-sources", _sources, positions=True)
    src = sources[cand]
    if not np.any(src >= 0):
        return score, change
    position = np.full(view.n, -1, dtype=np.int64)
    position[cand] = np.arange(cand.size)
    for j in np.flatnonzero(src >= 0):
        p = position[src[j]]
        if p >= 0:
            capped = score[p] - ECHO_MARGIN
            if score[j] > capped:
                change[j] = capped - score[j]
    return score + change, change


class Echoes(Signal):
    """An assistant echo ranks just below the user statement it restates (``echo``):
    marked at write time (:func:`mark`), demoted at retrieval (:func:`demote`)."""

    name = "echo"

    def adjust(self, ctx: Candidates, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return demote(ctx.view, ctx.cand, score)

    def write(self, rows: Sequence[dict[str, Any]], embs: np.ndarray, ctx: WriteContext) -> None:
        mark(rows, embs, ctx.state)
