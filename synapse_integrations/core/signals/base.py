"""The Signal seam: what a ranking signal is, and what it sees of a retrieval pass.

A signal adjusts the hybrid score of a pass's candidates after the retrieval model ran
(a demoted echo, a reply lifted by its question, an older version placed below its
replacement...). It has a ``name`` (its score component, shown with every returned item),
a config ``section`` (the :class:`~synapse_integrations.config.SynapseConfig` fields it
reads), and up to five hooks; only :meth:`Signal.adjust` is required:

- :meth:`Signal.widen`: candidates it brings before scoring (a reply to a found question);
- :meth:`Signal.adjust`: the new scores and the adjustment per candidate;
- :meth:`Signal.settle`: after every signal ran, what the pass keeps for the merge;
- :meth:`Signal.merge`: its part in merging the entity-feedback pass into the first one;
- :meth:`Signal.write`: a write-time annotation of the turns about to be stored.

Signals run in registration order (:func:`~synapse_integrations.core.signals.signals`).

>>> import numpy as np
>>> class Halve(Signal):
...     name = "halve"
...     def adjust(self, ctx, score):
...         change = np.where(ctx.cand % 2 == 1, -score / 2, 0.0)
...         return score + change, change
>>> ctx = Candidates(view=None, state=None, cfg=None, cand=np.arange(3), asked="q", at=None)
>>> Halve().adjust(ctx, np.array([1.0, 1.0, 1.0]))[1].tolist()
[0.0, -0.5, 0.0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ...config import SynapseConfig
    from ..graph.graph import Compiled
    from ..state.state import MemoryState

__all__ = ["HOP", "Candidates", "Signal", "WriteContext", "holds_place", "own_evidence"]

#: The entity-feedback pass's discount of a memory found one hop further: a component of
#: the merge (:func:`~synapse_integrations.core.retrieval.passes.merge_feedback`), not a signal.
HOP = "hop"
#: A ``stands_in`` adjustment above this lifted the memory into another's place (a version
#: lift is at least :data:`~.versions.VERSION_MARGIN`, 1e-6).
LIFT_MIN = 1e-9


@dataclass
class Candidates:
    """What a signal sees of one retrieval pass: the compiled ``view``, the memory's
    ``state`` (read only), the query-time ``cfg``, the candidates ``cand`` (positions in
    the view), the question as the user ``asked`` it and when (``at``, epoch seconds or
    None), and the moment the memory is read at (``as_of``, None: now;
    :mod:`..state.validity`). ``notes`` is where a signal keeps what its
    :meth:`Signal.settle` needs."""

    view: Compiled
    state: MemoryState
    cfg: SynapseConfig
    cand: np.ndarray
    asked: str
    at: float | None
    as_of: float | None = None
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WriteContext:
    """What a signal's write hook may use: the memory's ``state`` and ``embed_names`` (the
    memory's cached embedder of short names, :class:`~.ingest.consolidation.NameVectors`)."""

    state: MemoryState
    embed_names: Any


class Signal:
    """One ranking signal (subclass it; override :meth:`adjust` and any other hook).

    ``lent``: the adjustment is lent by another memory (a reply scores with its question),
    not the memory's own evidence: the gate and the entity-feedback pass read each
    memory's score without it. ``stands_in``: a positive adjustment puts the memory in
    another's place (a newer version above the turn it replaced): the gate judges the
    memories that hold their place by their own relevance.
    """

    name: ClassVar[str] = ""
    section: ClassVar[str] = ""  # its SynapseConfig section ("" when it reads none)
    lent: ClassVar[bool] = False
    stands_in: ClassVar[bool] = False
    #: the name of what :meth:`settle` keeps in the pass (None: it keeps nothing)
    carries: ClassVar[str | None] = None

    def widen(self, view: Compiled, cfg: SynapseConfig, cand: np.ndarray) -> np.ndarray:
        """The candidates to score (sorted positions): ``cand`` plus any this signal
        brings. Default: ``cand``."""
        return cand

    def adjust(self, ctx: Candidates, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(new scores, the adjustment per candidate)`` for the candidates' ``score``."""
        raise NotImplementedError

    def settle(self, ctx: Candidates, score: np.ndarray) -> Any:
        """What the pass keeps of this signal once every signal ran (its final
        ``score``), under :attr:`carries`, for :meth:`merge`. Default: nothing."""
        return None

    def merge(self, cand: np.ndarray, score: np.ndarray, kept: Sequence[Any]
              ) -> tuple[np.ndarray, np.ndarray | None, Any]:
        """Its part in merging passes: ``(scores, change to its adjustment or None, what
        the merged pass keeps)`` for the merged ``cand`` and ``score``, from what each pass
        kept (``kept``, first pass first). Default: nothing changes."""
        return score, None, None

    def write(self, rows: Sequence[dict[str, Any]], embs: np.ndarray, ctx: WriteContext) -> None:
        """Annotate the validated ``rows`` about to be stored (their unit ``embs``) in
        place. Default: nothing."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def own_evidence(score: np.ndarray, adjustments: Mapping[str, np.ndarray],
              signals: Sequence[Signal]) -> np.ndarray:
    """``score`` without what the ``lent`` signals lent it (each memory's own evidence)."""
    out = score
    for s in signals:
        if s.lent and s.name in adjustments:
            out = out - adjustments[s.name]
    return out


def holds_place(adjustments: Mapping[str, np.ndarray], signals: Sequence[Signal],
                rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` hold their place by their own relevance: no ``stands_in``
    signal lifted them into another memory's place."""
    keep = np.ones(len(rows), dtype=bool)
    for s in signals:
        if s.stands_in and s.name in adjustments:
            keep &= adjustments[s.name][rows] <= LIFT_MIN
    return keep
