"""The extractor interface: the :class:`Extractor` protocol (defined with the other
Protocols in :mod:`synapse_integrations.types`), the :class:`BaseExtractor` base class and
the input checks every extractor shares."""

from __future__ import annotations

import asyncio
import inspect
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

from ....errors import InvalidTypeError
from ....types import Extraction, Extractor, Turn

__all__ = ["BaseExtractor", "Extractor", "check_turns", "is_int", "takes_names"]


class BaseExtractor(ABC):
    """Base class for extractors: write :meth:`extract`, get :meth:`aextract` for free.

    The default :meth:`aextract` runs :meth:`extract` in a worker thread
    (``asyncio.to_thread``); override it when a real async path exists.
    """

    @abstractmethod
    def extract(self, turns: Sequence[Turn]) -> Extraction:
        """Extract concepts and relations from ``turns`` (one consolidation window)."""

    async def aextract(self, turns: Sequence[Turn]) -> Extraction:
        """Async twin of :meth:`extract` (runs it in a worker thread)."""
        return await asyncio.to_thread(self.extract, turns)


def check_turns(turns: Sequence[Turn]) -> tuple[Turn, ...]:
    """The window as a tuple, or :class:`InvalidTypeError` naming the first bad item."""
    if isinstance(turns, (str, bytes)) or not isinstance(turns, Iterable):
        raise InvalidTypeError(
            f"an extractor takes a sequence of Turn objects, got {type(turns).__name__}"
        )
    window = tuple(turns)
    for i, turn in enumerate(window):
        if not isinstance(turn, Turn):
            raise InvalidTypeError(
                f"turns[{i}] is a {type(turn).__name__}, not a Turn; build windows with "
                "synapse_integrations.types.Turn(id, text, speaker=...)"
            )
    return window


def takes_names(extractor: Extractor) -> bool:
    """Whether ``extractor.extract`` takes the memory's known names (a ``names`` keyword).

    Extractors are free not to: the :class:`Extractor` protocol only asks for the turns.

    >>> from synapse_integrations.core.ingest.extraction import OfflineExtractor
    >>> takes_names(OfflineExtractor())
    True
    """
    try:
        return "names" in inspect.signature(extractor.extract).parameters
    except (TypeError, ValueError):  # a callable without a signature: the protocol only
        return False


def is_int(value: object) -> bool:
    """True for an ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)
