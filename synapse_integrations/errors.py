"""The ``SynapseError`` tree.

Every error the package raises on purpose derives from :class:`SynapseError`, and each
also derives from the builtin a caller would naturally catch (``ValueError``,
``KeyError``, ``TypeError``, ...), so ``except ValueError`` keeps working:

>>> from synapse_integrations.errors import InvalidInputError
>>> issubclass(InvalidInputError, ValueError)
True
"""

from __future__ import annotations


class SynapseError(Exception):
    """Base class of every error raised by synapse-integrations."""


class ConfigError(SynapseError, ValueError):
    """A configuration value is invalid."""


class InvalidInputError(SynapseError, ValueError):
    """An argument has the right type but an unusable value (empty text, NaN, bad timestamp...)."""


class InvalidTypeError(SynapseError, TypeError):
    """An argument has the wrong type."""


class EmbeddingError(SynapseError, ValueError):
    """The embedder returned vectors of the wrong shape, dimension, or with NaN/inf."""


class NamespaceError(SynapseError, ValueError):
    """A namespace string is not allowed (empty, too long, control characters...)."""


class UnknownNamespaceError(SynapseError, KeyError):
    """A namespace that does not exist was asked for where one must exist."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class NodeNotFoundError(SynapseError, KeyError):
    """A memory id that is not in the graph (nor in the archive) was asked for."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class StorageError(SynapseError, OSError):
    """Chroma or the snapshot files could not be read or written."""


class SnapshotError(StorageError):
    """A snapshot is missing, truncated, corrupt or of an unknown schema version."""


class ExtractionError(SynapseError, RuntimeError):
    """Concept extraction failed and no fallback was possible."""


class MissingDependencyError(SynapseError, ImportError):
    """An optional dependency (an extra) is needed for this feature."""


class MemoryLockedError(StorageError):
    """Another process has this memory directory open (embedded Chroma and the snapshots
    are single-writer); close it there, or use a Chroma server and separate paths."""


class FirewallBlockedError(SynapseError, ValueError):
    """The write firewall found a secret or personal data whose action is ``block``;
    nothing was stored. ``categories`` names what was found (never the value itself)."""

    def __init__(self, message: str, categories: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.categories = tuple(categories)
