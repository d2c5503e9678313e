"""What a chat model's reply says: its text, and the JSON object in it (for the LLM
variants of extraction, reconsolidation, surprisal and sleep; no LangChain import)."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["parse_json", "parse_reply", "reply_text"]


def reply_text(message: Any) -> str:
    """The text of a chat model's reply (string content or content blocks).

    >>> reply_text("plain")
    'plain'
    """
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "".join(parts)
    return "" if content is None else str(content)


_FENCE_RE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def parse_json(text: str) -> Any:
    """The first JSON object or array in ``text`` (fences and prose around it allowed)."""
    chunks = [m.group(1) for m in _FENCE_RE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for chunk in chunks:
        for start, char in enumerate(chunk):
            if char in "{[":
                try:
                    value, _ = decoder.raw_decode(chunk, start)
                except json.JSONDecodeError:
                    continue
                if isinstance(value, dict) or (
                    isinstance(value, list) and value and all(isinstance(v, dict) for v in value)
                ):
                    return value
    snippet = text.strip().replace("\n", " ")
    snippet = snippet[:120] + ("..." if len(snippet) > 120 else "")
    raise ValueError(f"the reply contains no JSON object (it began: {snippet!r})")


def parse_reply(message: Any) -> Any:
    """The first JSON object or array in a chat model's reply (a message or a string);
    :class:`ValueError` when there is none.

    >>> parse_reply('Sure: {"outdated": ["ep-1"]} (one)')
    {'outdated': ['ep-1']}
    """
    return parse_json(reply_text(message))
