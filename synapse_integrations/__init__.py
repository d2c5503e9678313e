"""synapse-integrations: SYNAPSE long-term memory for LLM agents.

>>> from synapse_integrations import Synapse, SynapseConfig
>>> with Synapse() as mem:                                    # doctest: +SKIP
...     mem.add_turn("My cousin Dana came skiing with me.", speaker="Sam")
...     result = mem.retrieve("Who came skiing?")
...     print(result.rejected, result.items[0].text)
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .config import SynapseConfig
from .core.engine import Synapse
from .core.ingest.extraction import LLMExtractor, OfflineExtractor
from .core.lifecycle.detectors import Lifecycle
from .core.lifecycle.sleep import SleepReport
from .embeddings import HashingEmbedder, MiniLMEmbedder
from .errors import (
    ConfigError,
    EmbeddingError,
    ExtractionError,
    FirewallBlockedError,
    InvalidInputError,
    InvalidTypeError,
    MemoryLockedError,
    MissingDependencyError,
    NamespaceError,
    NodeNotFoundError,
    SnapshotError,
    StorageError,
    SynapseError,
    UnknownNamespaceError,
)
from .firewall import FirewallConfig
from .namespace_keys import namespace_key
from .pool import EnginePool
from .types import (
    Concept,
    ConsistencyReport,
    ConsolidationReport,
    Extraction,
    FeedbackReport,
    ForgetResult,
    MemoryEngine,
    Relation,
    RetrievalResult,
    RetrievedItem,
    ScoreComponents,
    Turn,
)

try:
    __version__ = version("synapse-integrations")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "Concept",
    "ConfigError",
    "ConsistencyReport",
    "ConsolidationReport",
    "EmbeddingError",
    "EnginePool",
    "Extraction",
    "ExtractionError",
    "FeedbackReport",
    "FirewallBlockedError",
    "FirewallConfig",
    "ForgetResult",
    "HashingEmbedder",
    "InvalidInputError",
    "InvalidTypeError",
    "LLMExtractor",
    "Lifecycle",
    "MemoryEngine",
    "MemoryLockedError",
    "MiniLMEmbedder",
    "MissingDependencyError",
    "NamespaceError",
    "NodeNotFoundError",
    "OfflineExtractor",
    "Relation",
    "RetrievalResult",
    "RetrievedItem",
    "ScoreComponents",
    "SleepReport",
    "SnapshotError",
    "StorageError",
    "Synapse",
    "SynapseConfig",
    "SynapseError",
    "Turn",
    "UnknownNamespaceError",
    "__version__",
    "namespace_key",
]
