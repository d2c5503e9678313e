"""Who said a turn: the user's and the assistant's turns of a view, and its speakers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..text.lexicon import ASSISTANT_SPEAKERS, USER_SPEAKERS
from .view import Compiled

__all__ = ["distinct_speakers", "is_role", "role_turns", "speaker_names"]


def is_role(row: Mapping[str, Any], role: str) -> bool:
    """Whether a turn (``speaker``, ``metadata``) is the ``"user"``'s or the ``"assistant"``'s.

    >>> is_role({"speaker": "AI", "metadata": {}}, "assistant")
    True
    """
    meta = row.get("metadata") or {}
    if isinstance(meta.get("role"), str):
        return meta["role"].lower() == role
    speaker = str(row.get("speaker") or "").strip().lower()
    return speaker in (USER_SPEAKERS if role == "user" else ASSISTANT_SPEAKERS)


def role_turns(view: Any, role: str, start: int = 0) -> np.ndarray:
    """Whether each node of a compiled view from ``start`` on is a turn of ``role``
    (:func:`is_role`; False for concepts): a ``per_node`` value."""
    speakers, metas = view.node_values("speaker"), view.node_values("metadata")
    out = np.zeros(view.n - start, dtype=bool)
    for i in np.flatnonzero(view.is_episode[start:]).tolist():
        out[i] = is_role({"speaker": speakers[start + i], "metadata": metas[start + i] or {}},
                         role)
    return out


def distinct_speakers(speakers: np.ndarray) -> list[str]:
    """The distinct speaker names of ``speakers`` (non-empty strings), sorted."""
    return sorted({s for s in speakers.tolist() if isinstance(s, str) and s})


def speaker_names(view: Compiled) -> list[str]:
    """The names of the memory's speakers (its episodes'), sorted; cached per view and
    grown with it."""
    return view.derived("gate.names", lambda v: distinct_speakers(v.speakers()[v.is_episode]),
                        lambda old, v, m: sorted({*old, *distinct_speakers(
                            v.speakers()[m:][v.is_episode[m:]])}))
