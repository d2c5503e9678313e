"""Retrieval models: how energy moves from a query's anchors through the memory.

Every model implements :class:`~synapse_integrations.core.models.base.RetrievalModel`
(one ``activate`` method over the compiled graph) and is registered here under the name
``SynapseConfig(model=...)`` selects. ``synapse`` (the paper's spreading activation) is
the default.

>>> from synapse_integrations.core.models import get_model, model_names
>>> get_model("synapse").name, "synapse" in model_names()
('synapse', True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import ConfigError
from .base import Activation, LearnableEdges, LearnsEdges, Query, RetrievalModel
from .evermind import EvermindModel
from .mnemos import MnemosModel
from .ppr import PPRModel
from .synapse import SynapseModel
from .synaptic import SynapticModel

__all__ = ["Activation", "LearnableEdges", "LearnsEdges", "Query", "RetrievalModel", "get_model", "model_names", "register", "unregister"]

_REGISTRY: dict[str, Callable[..., RetrievalModel]] = {}


def register(name: str, factory: Callable[..., RetrievalModel]) -> None:
    """Make a model selectable as ``SynapseConfig(model=name)``; ``factory()`` builds it."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a model name must be a non-empty str, got {name!r}")
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    """Remove a registered model (no error when there is none)."""
    _REGISTRY.pop(name, None)


def model_names() -> list[str]:
    """The registered model names, sorted."""
    return sorted(_REGISTRY)


def get_model(name: str, **options: Any) -> RetrievalModel:
    """A new instance of the model registered as ``name``, built with ``options`` (what
    the engine hands a model, e.g. mnemos' ``tagger``)."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown retrieval model {name!r}; choose one of "
                          f"{', '.join(model_names())}") from None
    return factory(**options)


register("synapse", SynapseModel)
register("evermind", EvermindModel)
register("synaptic", SynapticModel)
register("mnemos", MnemosModel)
register("ppr", PPRModel)
