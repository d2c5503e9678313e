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
- :func:`list_episodes`: the episodic nodes of a memory (active and archived) in order;
- :func:`feedback_engine`, :func:`memory_ids`: usage feedback (which recalled memories an
  answer used) for the adapters' feedback hooks.

:class:`~synapse_integrations.pool.EnginePool` (one memory per namespace) lives in
:mod:`synapse_integrations.pool`.

>>> from synapse_integrations._adapter_utils import namespace_from_configurable
>>> namespace_from_configurable({"thread_id": "t1", "user_id": "u7"}, ("user_id", "thread_id"))
'@agent:user_id:u7'
"""

from __future__ import annotations

import dataclasses
import importlib
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any, Union

from .core.documents import speaker_prefix
from .errors import InvalidTypeError, MissingDependencyError
from .pool import EnginePool, namespace_from_configurable, namespace_key
from .types import LearnsFromFeedback, MemoryEngine, RetrievalResult, RetrievedItem, ScoreComponents

__all__ = [
    "DEFAULT_EMPTY_TEXT",
    "DEFAULT_NAMESPACE_KEYS",
    "MEMORY_HEADER",
    "EnginePool",
    "EngineSource",
    "feedback_engine",
    "finished_turn",
    "format_memories",
    "item_metadata",
    "list_episodes",
    "memory_ids",
    "namespace_from_configurable",
    "namespace_key",
    "require",
    "resolve_engine",
    "role_filter",
    "score_terms",
    "speaker_prefix",
    "turn_id",
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
    time, ISO 8601 or None), ``score`` (hybrid score), ``components`` (the score's terms:
    ``similarity``, ``activation``, ``pagerank``, ``lexical``, ``distinct`` (evidence only
    this memory holds), their ``weights``, and
    ``echo``, ``superseded``, ``salience``, ``hop``, ``reply`` and ``focus``: the demotion
    of an assistant echo, the version ranking of an outdated version and its replacement,
    the surprisal gate's low-salience demotion, the discount of a memory found one hop
    further by the entity-feedback pass, a reply's lift from the question it answers, and
    the demotion of other speakers' turns when the question names one; plus the anchor ranks ``bm25_rank`` and ``dense_rank``),
    ``path`` (node ids along which activation reached it) and ``metadata`` (what was stored
    with the turn). The score is ``sum(weights[n] * components[n]) + echo + superseded +
    salience + hop + reply + focus`` (see :func:`score_terms`).
    """
    d = item.to_dict()
    return {
        "id": d["id"],
        "kind": d["kind"],
        "speaker": d["speaker"],
        "timestamp": d["timestamp"],
        "score": d["score"],
        "components": {key: d[key] for key in
                       ("similarity", "activation", "pagerank", "lexical", "distinct", "echo",
                        "superseded", "salience", "hop", "reply", "focus", "weights", "bm25_rank",
                         "dense_rank")},
        "path": d["path"],
        "concepts": d["concepts"],
        "superseded_by": d["superseded_by"],
        "supersedes": d["supersedes"],
        "metadata": d["metadata"],
    }


def score_terms(components: Mapping[str, Any]) -> dict[str, float]:
    """The score of a memory as a sum, from its ``components`` metadata: ``weight x value``
    per weighted component, plus ``echo``, ``superseded``, ``salience``, ``hop``, ``reply``
    and ``focus``. Empty when the retrieval model used its own score.

    >>> terms = score_terms({"similarity": 0.8, "activation": 0.5, "pagerank": 1.0,
    ...     "lexical": 0.5, "echo": 0.0, "weights": {"similarity": 0.5, "activation": 0.3,
    ...     "pagerank": 0.1, "lexical": 0.3}})
    >>> round(sum(terms.values()), 3)
    0.8
    """
    if not components.get("weights"):
        return {}
    known = {f.name for f in dataclasses.fields(ScoreComponents)}  # ScoreComponents.terms()
    return ScoreComponents(**{k: v for k, v in components.items()
                              if k in known and v is not None}).terms()


def _line(item: RetrievedItem) -> str:
    when = f"[{item.timestamp.date().isoformat()}] " if item.timestamp else ""
    who = speaker_prefix(item.speaker, item.text)
    tag = "(concept) " if item.kind == "concept" else ""
    return f"- {when}{tag}{who}{item.text}"


def format_memories(result: RetrievalResult | Iterable[RetrievedItem], *,
                    empty: str = DEFAULT_EMPTY_TEXT) -> str:
    """Prompt text for retrieved memories: one line per item (date, speaker, text), or
    ``empty`` when there is nothing; when an evidence check of the gate rejected the query
    (not the topic check), ``empty`` and the gate's reason, so the model can say *why* it
    does not know ("the race was Melanie's, not Caroline's").

    >>> format_memories([])
    'Nothing relevant in memory.'
    """
    items = result.accepted if isinstance(result, RetrievalResult) else tuple(result)
    if items:
        return "\n".join(_line(it) for it in items)
    verdict = result.verdict if isinstance(result, RetrievalResult) else None
    if verdict is not None and verdict.rejected and verdict.check != "topic":
        return f"{empty} (Memory check: {result.reason}.)"
    return empty


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


def feedback_engine(engine: Any) -> LearnsFromFeedback:
    """``engine`` when it takes usage feedback (a ``Synapse`` does), else
    :class:`InvalidTypeError` saying so."""
    if not isinstance(engine, LearnsFromFeedback):
        raise InvalidTypeError(f"{type(engine).__name__} takes no usage feedback (no "
                               f"feedback/afeedback); a Synapse engine does")
    return engine


def memory_ids(items: Any, what: str) -> list[str]:
    """Memory ids from a list of ids, of things with an ``id`` (a retrieved item, a
    LlamaIndex node) or a ``metadata["id"]`` (a LangChain ``Document``, a recalled-memory
    dict); :class:`InvalidTypeError` for a single str or anything without an id.

    >>> memory_ids(["ep-1", {"id": "ep-2"}], "used")
    ['ep-1', 'ep-2']
    """
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise InvalidTypeError(f"{what} must be a list of memories or memory ids, "
                               f"got {type(items).__name__}")
    out = []
    for it in items:
        meta = getattr(it, "metadata", None)
        found = (it if isinstance(it, str) else it.get("id") if isinstance(it, Mapping)
                 else meta.get("id") if isinstance(meta, Mapping) and "id" in meta
                 else getattr(it, "id", None))
        if not isinstance(found, str):
            raise InvalidTypeError(f"{what}: {type(it).__name__} {it!r:.60} carries no memory id")
        out.append(found)
    return out


def list_episodes(engine: MemoryEngine, *, include_archived: bool = True) -> list[dict[str, Any]]:
    """Episodic nodes of ``engine`` as ``{"id", "text", "speaker", "ts", "seq", "metadata", ...}``
    dicts in ingestion order (archived episodes included unless asked otherwise)."""
    return engine.episodes(include_archived=include_archived)


def _message_text(message: Any) -> str:
    text = getattr(message, "text", None)
    if callable(text) and not isinstance(text, str):  # older message classes: text() is a method
        text = text()
    return text if isinstance(text, str) else str(getattr(message, "content", ""))


_AI_TYPES = ("ai", "AIMessageChunk")
_HUMAN_TYPES = ("human", "HumanMessageChunk")

#: The roles a turn can be recorded as.
ROLES = ("user", "assistant")

Roles = Union[Sequence[str], Callable[[str, str], bool]]
"""Which turns an adapter records: roles (``("user",)``, ``("user", "assistant")``) or a
callable ``(role, text) -> bool``."""


def role_filter(roles: Roles) -> Callable[[str, str], bool]:
    """``roles`` as a predicate ``(role, text) -> bool``.

    >>> keep = role_filter(("user",))
    >>> keep("user", "I live in Porto"), keep("assistant", "Noted!")
    (True, False)
    """
    if callable(roles):
        return roles
    if isinstance(roles, str):
        roles = (roles,)
    wanted = tuple(roles)
    unknown = [r for r in wanted if r not in ROLES]
    if unknown:
        raise InvalidTypeError(f"roles must be among {list(ROLES)} or a callable (role, text) -> bool, "
                               f"got {unknown}")
    return lambda role, text: role in wanted


def turn_id(role: str, text: str, context: str = "") -> str:
    """A stable id for a message that has none: ``"msg-"`` + a hash of its role, its text
    and ``context`` (the text before it), so recording the same exchange again (a replay)
    finds it already stored, while the same words said after something else are a new turn.

    >>> turn_id("user", "hi") == turn_id("user", "hi"), turn_id("user", "hi") == turn_id("user", "hi", "x")
    (True, False)
    """
    digest = hashlib.sha256("\x1f".join((role, context, text)).encode("utf-8")).hexdigest()
    return f"msg-{digest[:32]}"


def new_turns(candidates: Iterable[Mapping[str, Any]], engine: MemoryEngine, *,
              roles: Roles = ROLES) -> list[dict[str, Any]]:
    """The turns to store from ``candidates`` (dicts with ``text``, ``role``, ``speaker``
    and ``id``): those whose role ``roles`` accepts, that have text, and that the memory
    does not hold yet (by id), each with ``metadata["role"]``."""
    keep = role_filter(roles)
    out, seen = [], set()
    for c in candidates:
        text, role = c["text"], c["role"]
        if not text.strip() or not keep(role, text) or c["id"] in seen or engine.contains(c["id"]):
            continue
        seen.add(c["id"])
        out.append({"text": text, "speaker": c["speaker"], "id": c["id"],
                    "metadata": {**(c.get("metadata") or {}), "role": role}})
    return out


def finished_turn(messages: Sequence[Any], engine: MemoryEngine, *, user_speaker: str,
                  ai_speaker: str, roles: Roles = ROLES) -> list[dict[str, Any]]:
    """The turns to record when a conversation turn has ended: the final answer (the last
    AI message, when it calls no tool and has text) and the user message before it.

    ``messages`` are LangChain-style messages (``type`` ``"human"``/``"ai"``, ``text``,
    ``id``, ``tool_calls``). A message is stored as ``"msg-<id>"`` (a message without an id
    under :func:`turn_id`) and skipped when the memory already holds it, so replaying a turn
    (a retried node, a resumed thread) records nothing twice. ``roles`` chooses which sides
    are recorded. Returns ``[]`` when the turn has not ended.
    """
    answer = next((i for i in range(len(messages) - 1, -1, -1)
                   if getattr(messages[i], "type", None) in _AI_TYPES), None)
    if answer is None or getattr(messages[answer], "tool_calls", None) \
            or not _message_text(messages[answer]).strip():
        return []
    human = next((m for m in reversed(messages[:answer])
                  if getattr(m, "type", None) in _HUMAN_TYPES and _message_text(m).strip()), None)
    candidates = []
    context = ""
    for message, role, speaker in ((human, "user", user_speaker),
                                   (messages[answer], "assistant", ai_speaker)):
        if message is None:
            continue
        text = _message_text(message)
        mid = f"msg-{message.id}" if getattr(message, "id", None) else turn_id(role, text, context)
        candidates.append({"text": text, "role": role, "speaker": speaker, "id": mid})
        context = text
    return new_turns(candidates, engine, roles=roles)
