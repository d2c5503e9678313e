"""The namespace a REST path names: its raw (percent-encoded) segment decoded, one rule
for the API's routes (:mod:`.rest`) and the explorer's (:mod:`.explain`)."""

from __future__ import annotations

from urllib.parse import unquote

from ..errors import NamespaceError

__all__ = ["namespace_of"]


def namespace_of(segment: str) -> str:
    """The namespace a raw (percent-encoded) path segment names.

    >>> namespace_of("team%2Falice")
    'team/alice'
    """
    try:
        return unquote(segment, errors="strict")
    except UnicodeDecodeError:
        raise NamespaceError("the namespace in the URL is not percent-encoded UTF-8") from None
