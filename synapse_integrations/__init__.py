"""synapse-integrations: SYNAPSE long-term memory for LLM agents."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .config import SynapseConfig
from .errors import SynapseError

try:
    __version__ = version("synapse-integrations")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = ["SynapseConfig", "SynapseError", "__version__"]
