"""Ranking signals: the adjustments applied after the hybrid score, one module each.

A signal is a :class:`~.base.Signal` (a name, a config section, an ``adjust`` per
candidate and optional widen/settle/merge/write hooks) registered here; the retrieval
pipeline applies the registered signals in order, and each signal's adjustment shows as a
score component of every returned item (in the CLI, REST, MCP and the adapters' metadata)
with no other edit.

>>> from synapse_integrations.core.signals import signal_names
>>> signal_names()
('salience', 'superseded', 'echo', 'reply', 'asked', 'focus')
"""

from __future__ import annotations

import dataclasses

from ...errors import ConfigError
from ...types import ScoreComponents
from .asks import Asks
from .base import HOP, Candidates, Signal, WriteContext, holds_place, own_evidence
from .echoes import Echoes
from .focus import Focus
from .replies import Replies
from .salience import Salience
from .versions import Versions

__all__ = ["HOP", "Candidates", "Signal", "WriteContext", "holds_place", "own_evidence", "register",
           "signal_names", "signals", "unregister"]

_SIGNALS: dict[str, Signal] = {}  # in order of registration: the order they apply in
#: names a signal may not take: the hybrid score's components and the feedback hop
_RESERVED = frozenset(f.name for f in dataclasses.fields(ScoreComponents)) | {HOP}


def register(signal: Signal) -> None:
    """Apply ``signal`` after the registered ones (its ``name`` is its score component;
    registering a name again replaces that signal in its place)."""
    name = getattr(signal, "name", None)
    if not isinstance(signal, Signal) or not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(f"a signal must be a Signal with an identifier name, got {signal!r}")
    if name in _RESERVED:
        raise ConfigError(f"signal name {name!r} is taken by a score component; choose another")
    _SIGNALS[name] = signal


def unregister(name: str) -> None:
    """Remove a registered signal (no error when there is none)."""
    _SIGNALS.pop(name, None)


def signals() -> tuple[Signal, ...]:
    """The registered signals, in the order they apply."""
    return tuple(_SIGNALS.values())


def signal_names() -> tuple[str, ...]:
    """The registered signals' names (their score components), in the order they apply."""
    return tuple(_SIGNALS)


register(Salience())
register(Versions())
register(Echoes())
register(Replies())
register(Asks())
register(Focus())
