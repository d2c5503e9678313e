"""The detectors behind the memory lifecycle (mnemos, seed 004), passed to the engine as
one bundle: which earlier turns a new turn updates (:mod:`.reconsolidation`), how
surprising a turn is (:mod:`.surprisal`), and which facts a sleep keeps (:mod:`.sleep`).

The config switches each mechanism on or off (``reconsolidation``, ``surprisal_gate``,
``sleep_auto``; ``Synapse.sleep()`` always works); this bundle says *how* each decides:
offline rules by default, or any LangChain chat model with :meth:`Lifecycle.llm`.

>>> Lifecycle().reconsolidator.__class__.__name__
'RuleReconsolidator'
>>> from synapse_integrations import Synapse, SynapseConfig
>>> mem = Synapse(config=SynapseConfig(reconsolidation=True),
...               lifecycle=Lifecycle.llm(chat_model))       # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidTypeError
from .reconsolidation import LLMReconsolidator, Reconsolidator, RuleReconsolidator
from .sleep import LLMSleeper, OfflineSleeper, Sleeper
from .surprisal import LLMPredictor, Predictor, WindowPredictor

__all__ = ["Lifecycle"]


@dataclass(frozen=True)
class Lifecycle:
    """How each lifecycle mechanism decides (offline defaults)."""

    reconsolidator: Reconsolidator = field(default_factory=RuleReconsolidator)
    predictor: Predictor = field(default_factory=WindowPredictor)
    sleeper: Sleeper = field(default_factory=OfflineSleeper)

    def __post_init__(self) -> None:
        for name, method in (("reconsolidator", "superseded"), ("predictor", "surprisal"),
                             ("sleeper", "facts")):
            if not callable(getattr(getattr(self, name), method, None)):
                raise InvalidTypeError(f"Lifecycle {name} must have a {method}() method, got "
                                       f"{type(getattr(self, name)).__name__}")

    @classmethod
    def llm(cls, chat_model: Any) -> Lifecycle:
        """Every mechanism decided by ``chat_model`` (any LangChain chat model)."""
        return cls(LLMReconsolidator(chat_model), LLMPredictor(chat_model), LLMSleeper(chat_model))
