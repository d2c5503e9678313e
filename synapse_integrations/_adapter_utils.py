"""Helpers shared by the framework adapters (no framework is imported here).

Everything an adapter needs beyond "convert this type and call the engine" lives in this one
module, so the LangChain, LlamaIndex and LangGraph adapters stay thin and agree on:

- :func:`require`: import a framework module or raise :class:`MissingDependencyError` naming
  the extra to install;
- :func:`item_metadata`: the metadata dict every adapter attaches to a retrieved memory
  (``id``, ``kind``, ``speaker``, ``timestamp`` as ISO 8601, ``score``, ``components``, ...);
- :func:`format_memories`: the text a prompt sees, with an explicit "nothing in memory" line;
- :data:`MEMORY_HEADER`, :data:`DEFAULT_NAMESPACE_KEYS`, :data:`DEFAULT_EMPTY_TEXT`: the
  defaults every adapter shares;
- :func:`resolve_engine`: a memory, a pool or a factory -> the memory for this run;
- :func:`finished_turn`: the turns to record when a conversation turn ends, idempotent by
  message id;
- :func:`list_episodes`: the episodic nodes of a memory (active and archived) in order.

:class:`~synapse_integrations.pool.EnginePool` (one memory per namespace) lives in
:mod:`synapse_integrations.pool`.

>>> from synapse_integrations._adapter_utils import namespace_from_configurable
>>> namespace_from_configurable({"thread_id": "t1", "user_id": "u7"}, ("user_id", "thread_id"))
'@agent:user_id:u7'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import Any, Union

from .errors import InvalidTypeError, MissingDependencyError
from .pool import EnginePool, namespace_from_configurable, namespace_key
from .types import MemoryEngine, RetrievalResult, RetrievedItem

__all__ = [
    "DEFAULT_EMPTY_TEXT",
    "DEFAULT_NAMESPACE_KEYS",
    "MEMORY_HEADER",
    "EnginePool",
    "EngineSource",
    "finished_turn",
    "format_memories",
    "item_metadata",
    "list_episodes",
    "namespace_from_configurable",
    "namespace_key",
    "require",
    "resolve_engine",
    "speaker_prefix",
]

#: The ``config["configurable"]`` keys that name a run's memory, first match wins: one
#: memory per user across threads, else one per thread.
DEFAULT_NAMESPACE_KEYS = ("user_id", "thread_id")

#: The line above the memories in the text a model sees.
MEMORY_HEADER = "Long-term memories that may be relevant (from SYNAPSE):"

#: What a prompt sees when the gate rejected the query or memory is empty.
DEFAULT_EMPTY_TEXT = "Nothing relevant in memory."


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the extra.

    >>> require("json", "langchain").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"this adapter needs {module.split('.')[0]!r}, which is not installed: "
            f"pip install 'synapse-integrations[{extra}]'"
        ) from exc


def item_metadata(item: RetrievedItem) -> dict[str, Any]:
    """The metadata every adapter attaches to a retrieved memory.

    Keys: ``id``, ``kind`` (``"episode"`` / ``"concept"``), ``speaker``, ``timestamp`` (event
    time, ISO 8601 or None), ``score`` (hybrid score), ``components`` (``similarity``,
    ``activation``, ``pagerank``, ``bm25_rank``, ``dense_rank``), ``path`` (node ids along which
    activation reached it) and ``metadata`` (what was stored with the turn).
    """
    d = item.to_dict()
    return {
        "id": d["id"],
        "kind": d["kind"],
        "speaker": d["speaker"],
        "timestamp": d["timestamp"],
        "score": d["score"],
        "components": {key: d[key] for key in
                       ("similarity", "activation", "pagerank", "bm25_rank", "dense_rank")},
        "path": d["path"],
        "concepts": d["concepts"],
        "superseded_by": d["superseded_by"],
        "supersedes": d["supersedes"],
        "metadata": d["metadata"],
    }


def speaker_prefix(speaker: str | None, text: str) -> str:
    """``"<speaker>: "`` for a memory's line, or ``""`` when there is no speaker or the
    text already starts with it (turns are often stored as ``"Sam: ..."``).

    >>> speaker_prefix("Sam", "I went skiing"), speaker_prefix("Sam", "Sam: I went skiing")
    ('Sam: ', '')
    """
    if not speaker or text.lstrip().lower().startswith(f"{speaker.strip().lower()}:"):
        return ""
    return f"{speaker}: "


def _line(item: RetrievedItem) -> str:
    when = f"[{item.timestamp.date().isoformat()}] " if item.timestamp else ""
    who = speaker_prefix(item.speaker, item.text)
    tag = "(concept) " if item.kind == "concept" else ""
    return f"- {when}{tag}{who}{item.text}"


def format_memories(result: RetrievalResult | Iterable[RetrievedItem], *,
                    empty: str = DEFAULT_EMPTY_TEXT) -> str:
    """Prompt text for retrieved memories: one line per item (date, speaker, text), or
    ``empty`` when there is nothing (or the gate rejected the query).

    >>> format_memories([])
    'Nothing relevant in memory.'
    """
    items = result.accepted if isinstance(result, RetrievalResult) else tuple(result)
    return "\n".join(_line(it) for it in items) if items else empty


EngineSource = Union[MemoryEngine, EnginePool, Callable[[str], MemoryEngine]]
"""A memory for every run, a pool (a memory per namespace), or a factory namespace -> memory."""


def resolve_engine(source: EngineSource, namespace: Callable[[], str]) -> MemoryEngine:
    """The engine to use: ``source`` itself when it is one engine, else the pool's (or the
    factory's) engine for ``namespace()`` (called only then)."""
    if isinstance(source, EnginePool):
        return source.get(namespace())
    if hasattr(source, "retrieve") and hasattr(source, "add_turns"):
        return source  # type: ignore[return-value]
    if callable(source):
        return source(namespace())
    raise InvalidTypeError(
        f"expected a Synapse, an EnginePool or a callable namespace -> Synapse, got {type(source).__name__}"
    )


def list_episodes(engine: MemoryEngine, *, include_archived: bool = True) -> list[dict[str, Any]]:
    """Episodic nodes of ``engine`` as ``{"id", "text", "speaker", "ts", "seq", "metadata", ...}``
    dicts in ingestion order (archived episodes included unless asked otherwise)."""
    return engine.episodes(include_archived=include_archived)


def _message_text(message: Any) -> str:
    text = getattr(message, "text", None)
    if callable(text):  # older message classes: text() is a method
        text = text()
    return text if isinstance(text, str) else str(getattr(message, "content", ""))


_AI_TYPES = ("ai", "AIMessageChunk")
_HUMAN_TYPES = ("human", "HumanMessageChunk")


def finished_turn(messages: Sequence[Any], engine: MemoryEngine, *, user_speaker: str,
                  ai_speaker: str) -> list[dict[str, Any]]:
    """The turns to record when a conversation turn has ended: the final answer (the last
    AI message, when it calls no tool and has text) and the user message before it.

    ``messages`` are LangChain-style messages (``type`` ``"human"``/``"ai"``, ``text``,
    ``id``, ``tool_calls``). A message with an id is stored as ``"msg-<id>"`` and skipped
    when the memory already holds it, so replaying a turn (a retried node, a resumed
    thread) records nothing twice. Returns ``[]`` when the turn has not ended.
    """
    answer = next((i for i in range(len(messages) - 1, -1, -1)
                   if getattr(messages[i], "type", None) in _AI_TYPES), None)
    if answer is None or getattr(messages[answer], "tool_calls", None) \
            or not _message_text(messages[answer]).strip():
        return []
    human = next((m for m in reversed(messages[:answer])
                  if getattr(m, "type", None) in _HUMAN_TYPES and _message_text(m).strip()), None)
    turns = []
    for message, speaker in ((human, user_speaker), (messages[answer], ai_speaker)):
        if message is None:
            continue
        turn: dict[str, Any] = {"text": _message_text(message), "speaker": speaker}
        if getattr(message, "id", None):
            turn["id"] = f"msg-{message.id}"
            if engine.contains(turn["id"]):
                continue  # recorded already
        turns.append(turn)
    return turns
