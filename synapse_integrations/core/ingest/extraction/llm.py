"""The LLM extractor: schema-guided extraction with any LangChain chat model.

:class:`LLMExtractor`, its counters (:class:`ExtractorStats`), the prompt and the
dialogue with the model (a retry, the fallback); the schema it asks for and what a reply
becomes are in :mod:`.schema`. ``langchain_core`` is imported only when an
:class:`LLMExtractor` is built, never at import time.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ....errors import (
    ConfigError,
    ExtractionError,
    InvalidTypeError,
    MissingDependencyError,
)
from ....types import Extraction, Turn
from ...text.llm_reply import parse_json, reply_text
from .offline import OfflineExtractor
from .protocol import BaseExtractor, Extractor, check_turns, is_int, takes_names
from .schema import ExtractionSchema, short_error, to_extraction, validate_reply

if TYPE_CHECKING:  # pragma: no cover - typing only
    from langchain_core.language_models import BaseChatModel

__all__ = ["ExtractorStats", "LLMExtractor"]

# the package's logger name, as before the split into modules
logger = logging.getLogger(__package__)


@dataclass
class ExtractorStats:
    """Counters of an :class:`LLMExtractor` (read a snapshot via ``extractor.stats``).

    ``calls`` counts requests sent to the model (a retry is a second call); ``retries``
    counts windows whose first answer was malformed; ``fallbacks`` counts windows answered
    by the fallback extractor; ``input_tokens`` / ``output_tokens`` sum the
    ``usage_metadata`` of the model's messages (0 when the model reports none).
    """

    calls: int = 0
    retries: int = 0
    fallbacks: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


_SYSTEM_PROMPT = """\
You maintain the long-term memory of an assistant. You will see a short stretch of a \
conversation (a few turns, each with its id and speaker) and you turn it into entries of a \
knowledge graph.

Work in this order:
1. Look for what is worth remembering later: the people mentioned, facts about who \
someone is, what they like or dislike, things that happened or are planned, skills, work \
and technical matters, places and belongings. Ignore greetings and small talk.
2. Give each item a short canonical name that a later conversation would reuse: a noun \
phrase rather than a sentence (someone "went hiking in the Alps" gives "Hiking" and \
"Alps"). People keep their names as written.
3. Give each item one type: Person, Identity, Preference, Event, Technical, Place, \
Object or Concept; a confidence between 0 and 1; and, when useful, attributes as short \
key/value strings (a date, a place, a detail).
4. Connect items that belong together with edges. "src" and "tgt" must be names from \
your own node list, "rel" is a short label in UPPER_SNAKE_CASE (for example LIKES, \
WORKS_ON, VISITED, PART_OF) and "weight" between 0 and 1 says how strong the link is.

Return at most {max_nodes} nodes. Answer with a single JSON object and nothing else:
{{"nodes": [{{"name": "...", "type": "...", "confidence": 0.9, "attributes": {{}}}}], \
"edges": [{{"src": "...", "rel": "...", "tgt": "...", "weight": 0.8}}]}}"""


def _require_langchain() -> Any:
    """``langchain_core.messages``, or :class:`MissingDependencyError` saying how to install it."""
    try:
        from langchain_core import messages
    except ImportError as exc:
        raise MissingDependencyError(
            "LLMExtractor needs langchain-core: pip install synapse-integrations[llm] "
            "(or use OfflineExtractor, which needs no model)"
        ) from exc
    return messages


@dataclass(frozen=True)
class _Failed:
    """Marker returned by the dialogue when the fallback extractor must answer."""

    reason: str
    error: BaseException | None = None


class LLMExtractor(BaseExtractor):
    """Schema-guided extraction with any LangChain chat model (SYNAPSE appendix A.2).

    The model is asked for ``{"nodes": [...], "edges": [...]}`` (see
    :class:`~.schema.ExtractionSchema`). When the model supports ``with_structured_output`` it
    is used (``include_raw=True``, so token usage is still counted); when that raises
    ``NotImplementedError`` (as langchain-core's fake chat models do) the extractor
    sends the same prompt and parses JSON from the reply text (code fences and prose
    around the JSON are tolerated).

    Validation: names are stripped and must be non-empty (empty ones are dropped),
    confidences and weights are clamped to [0, 1], nodes with the same name
    (case-insensitive) are merged, edges whose ends are not extracted nodes are dropped.
    A reply that cannot be parsed or validated is retried once, with a message saying
    what was wrong; if the retry fails too, or the model raises, the window is handed to
    ``fallback`` (an :class:`OfflineExtractor` by default), or, with ``strict=True``,
    :class:`~synapse_integrations.errors.ExtractionError` is raised.

    ``source_ids`` of a concept are the window's turns whose text mentions its name
    (case-insensitive, whole words) or whose speaker it is.

    ``stats`` gives a snapshot of :class:`ExtractorStats`; the counters are guarded by a
    lock, so one extractor may serve several threads and tasks. :meth:`aextract` is a
    real async path (``ainvoke``), not a thread.

    >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
    >>> from synapse_integrations.types import Turn
    >>> reply = '{"nodes": [{"name": "Camping", "type": "Preference"}], "edges": []}'
    >>> ex = LLMExtractor(FakeListChatModel(responses=[reply]))
    >>> ex.extract([Turn("t1", "We love camping.", speaker="Ann")]).concepts[0].source_ids
    ('t1',)
    >>> ex.stats.calls, ex.stats.fallbacks
    (1, 0)
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        fallback: Extractor | None = None,
        strict: bool = False,
        max_concepts: int | None = 12,
        structured_output: bool = True,
        system_prompt: str | None = None,
    ) -> None:
        _require_langchain()
        if not (hasattr(model, "invoke") and hasattr(model, "ainvoke")):
            raise InvalidTypeError(
                "LLMExtractor needs a LangChain chat model (BaseChatModel), "
                f"got {type(model).__name__}"
            )
        if max_concepts is not None and (not is_int(max_concepts) or max_concepts < 1):
            raise ConfigError(f"max_concepts must be a positive int or None, got {max_concepts!r}")
        if fallback is not None and not isinstance(fallback, Extractor):
            raise InvalidTypeError(
                f"fallback must be an extractor (extract/aextract), got {type(fallback).__name__}"
            )
        self.model = model
        self.fallback: Extractor = OfflineExtractor() if fallback is None else fallback
        self.strict = strict
        self.max_concepts = max_concepts
        self.system_prompt = system_prompt or _SYSTEM_PROMPT.format(max_nodes=max_concepts or 20)
        self._structured: Any = None
        if structured_output and hasattr(model, "with_structured_output"):
            try:
                self._structured = model.with_structured_output(ExtractionSchema, include_raw=True)
            except NotImplementedError:
                logger.debug(
                    "%s has no structured output; parsing JSON from text", type(model).__name__
                )
        self._lock = threading.Lock()
        self._stats = ExtractorStats()

    def __repr__(self) -> str:
        structured = self._structured is not None
        return f"LLMExtractor(model={type(self.model).__name__}, structured={structured})"

    @property
    def stats(self) -> ExtractorStats:
        """A snapshot of the counters (a copy; later calls do not change it)."""
        with self._lock:
            return ExtractorStats(**vars(self._stats))

    def reset_stats(self) -> None:
        """Set every counter back to zero."""
        with self._lock:
            self._stats = ExtractorStats()

    # -- the two faces: the same dialogue, driven by invoke or by ainvoke --------------

    def extract(self, turns: Sequence[Turn], *, names: Iterable[str] = ()) -> Extraction:
        """Extract nodes and edges from one window with the chat model.

        ``names``: names the memory already holds (the consolidator passes them). Those
        the window's text says are listed for the model, so that it reuses them as
        written, and all of them go to the fallback extractor when it takes names.
        """
        window = check_turns(turns)
        if not window:
            return Extraction()
        names = tuple(names)
        dialogue = self._dialogue(window, names)
        request = next(dialogue)
        try:
            while True:
                runnable, messages = request
                try:
                    response: Any = runnable.invoke(messages)
                except Exception as exc:  # a model failure is answered by the fallback
                    response = exc
                request = dialogue.send(response)
        except StopIteration as done:
            outcome = done.value
        if isinstance(outcome, _Failed):
            self._note_fallback(window, outcome)
            return self.fallback.extract(window, **self._fallback_names(names))
        return outcome

    async def aextract(self, turns: Sequence[Turn], *, names: Iterable[str] = ()) -> Extraction:
        """Async twin of :meth:`extract` (uses the model's ``ainvoke``)."""
        window = check_turns(turns)
        if not window:
            return Extraction()
        names = tuple(names)
        dialogue = self._dialogue(window, names)
        request = next(dialogue)
        try:
            while True:
                runnable, messages = request
                try:
                    response: Any = await runnable.ainvoke(messages)
                except Exception as exc:
                    response = exc
                request = dialogue.send(response)
        except StopIteration as done:
            outcome = done.value
        if isinstance(outcome, _Failed):
            self._note_fallback(window, outcome)
            return await self.fallback.aextract(window, **self._fallback_names(names))
        return outcome

    def _fallback_names(self, names: tuple[str, ...]) -> dict[str, Any]:
        """The keyword that hands the memory's names to the fallback (none when it does
        not take them)."""
        return {"names": names} if names and takes_names(self.fallback) else {}

    def _note_fallback(self, window: tuple[Turn, ...], failed: _Failed) -> None:
        if self.strict:
            raise ExtractionError(
                f"LLM extraction failed for the window {window[0].id}..{window[-1].id}: "
                f"{failed.reason} (pass strict=False to use the fallback extractor instead)"
            ) from failed.error
        logger.warning(
            "LLM extraction failed (%s); using %s for this window",
            failed.reason,
            type(self.fallback).__name__,
        )
        with self._lock:
            self._stats.fallbacks += 1

    def _dialogue(
        self, window: tuple[Turn, ...], names: tuple[str, ...] = ()
    ) -> Generator[tuple[Any, list[Any]], Any, Extraction | _Failed]:
        """The conversation with the model, free of I/O: yields (runnable, messages) and
        receives the model's answer (or the exception it raised)."""
        lc = _require_langchain()
        messages: list[Any] = [
            lc.SystemMessage(content=self.system_prompt),
            lc.HumanMessage(content=_render_window(window, names)),
        ]
        runnable = self._structured if self._structured is not None else self.model
        problem = ""
        for attempt in range(2):
            with self._lock:
                self._stats.calls += 1
                self._stats.retries += attempt
            response = yield runnable, messages
            if isinstance(response, Exception):
                return _Failed(f"the model raised {type(response).__name__}: {response}", response)
            raw, payload, problem = self._read(response)
            self._count_tokens(raw)
            if payload is not None:
                return to_extraction(payload, window, self.max_concepts)
            logger.info("malformed extraction reply (attempt %d): %s", attempt + 1, problem)
            retry = (
                f"Your answer could not be used: {problem}. Answer again with only the JSON "
                'object {"nodes": [...], "edges": [...]} described above.'
            )
            if self._structured is None and raw is not None:  # show the model its answer
                messages = [*messages, lc.AIMessage(content=reply_text(raw))]
            messages = [*messages, lc.HumanMessage(content=retry)]
        return _Failed(f"malformed reply after one retry: {problem}")

    def _read(self, response: Any) -> tuple[Any, ExtractionSchema | None, str]:
        """(raw message, validated payload or None, problem) from one model answer."""
        if isinstance(response, dict) and "raw" in response:  # structured, include_raw=True
            raw = response.get("raw")
            parsed = response.get("parsed")
            error = response.get("parsing_error")
            if isinstance(parsed, ExtractionSchema):
                return raw, parsed, ""
            if parsed is not None:
                return (raw, *validate_reply(parsed))
            if error is not None:
                return raw, None, short_error(error)
            text = reply_text(raw) if raw is not None else ""
            if text.strip():  # some models answer in text despite the tool
                try:
                    return (raw, *validate_reply(parse_json(text)))
                except ValueError as exc:
                    return raw, None, str(exc)
            return raw, None, "no structured answer was returned"
        try:
            return (response, *validate_reply(parse_json(reply_text(response))))
        except ValueError as exc:
            return response, None, str(exc)

    def _count_tokens(self, raw: Any) -> None:
        usage = getattr(raw, "usage_metadata", None)
        if not usage:
            return
        with self._lock:
            self._stats.input_tokens += int(usage.get("input_tokens", 0) or 0)
            self._stats.output_tokens += int(usage.get("output_tokens", 0) or 0)


_KNOWN_NAMES_SHOWN = 30  # at most this many known names are listed for one window


def _known_in_window(window: Sequence[Turn], names: Sequence[str]) -> list[str]:
    """The known ``names`` the window's text says (whole words, any case), spelled as the
    text spells them, in order of first appearance; speakers are left out (the turns
    name them already).

    >>> w = [Turn("a", "Agnes brought a cake. agnes is kind.", speaker="Ann")]
    >>> _known_in_window(w, ["agnes", "ann", "new york", "bob"])
    ['Agnes']
    >>> _known_in_window([Turn("b", "We ate Agnes's cake in New York.")], ["agnes", "new york"])
    ['Agnes', 'New York']
    """
    wanted = {" ".join(n.lower().split()) for n in names if n and n.strip()}
    wanted -= {" ".join(t.speaker.lower().split()) for t in window if t.speaker}
    if not wanted:
        return []
    longest = max(len(n.split()) for n in wanted)
    found: dict[str, str] = {}
    for turn in window:
        words = [w[:-2] if w.lower().endswith("'s") else w  # "Agnes's" is Agnes
                 for w in re.findall(r"[\w'&.-]*\w", turn.text)]
        for i in range(len(words)):
            for n in range(min(longest, len(words) - i), 0, -1):
                said = " ".join(words[i:i + n])
                if said.lower() in wanted and said.lower() not in found:
                    found[said.lower()] = said
                    break
    return list(found.values())[:_KNOWN_NAMES_SHOWN]


def _render_window(window: Sequence[Turn], names: Sequence[str] = ()) -> str:
    """The window as the model sees it: one line per turn, ``[id] speaker: text``; then
    the known names the turns say, if any, for the model to reuse as written."""
    lines = ["Conversation turns:"]
    for turn in window:
        text = " ".join(turn.text.split())
        if turn.speaker and not text.lower().startswith(turn.speaker.strip().lower() + ":"):
            text = f"{turn.speaker.strip()}: {text}"
        when = ""
        if turn.timestamp is not None:
            when = f" ({turn.timestamp.isoformat(sep=' ', timespec='minutes')})"
        lines.append(f"[{turn.id}]{when} {text}")
    known = _known_in_window(window, names)
    if known:
        lines.append("")
        lines.append("Names this memory already holds (reuse them as written): "
                     + ", ".join(known))
    return "\n".join(lines)
