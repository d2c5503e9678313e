"""Sleep consolidation (mnemos, section 3.4): episodes become durable semantic facts.

A sleep takes the episodes stored since the last one (the *buffer*), asks a
:class:`Sleeper` for the lasting facts they state, and adds each fact to the graph as a
semantic node (a concept of type ``"Fact"`` whose name is the fact) linked both ways to the
episodes it was drawn from (abstraction edges; :func:`~.provenance` records them, so
forgetting those episodes removes the fact). Facts go through the consolidator's
de-duplication: a fact whose embedding is within ``dedup_threshold`` of an existing one
merges into it, gaining the new sources.

When: on demand (:meth:`Synapse.sleep`), and with ``sleep_auto`` once the buffer holds
``sleep_episodes`` episodes (10, the paper's) and ``sleep_seconds`` (an hour, the paper's)
of *event time* have passed since the last sleep (the turns' timestamps, so a replayed
history sleeps as it would have live).

Archiving (``sleep_archive_sources``, off by default): the episodes a fact was drawn from
are archived (out of the active graph, restorable with :meth:`Synapse.restore`); episodes
that yielded no fact stay. mnemos prunes the raw episodes; we keep them recoverable.

In retrieval (``fact_role``): with ``"evidence"`` (default) a fact is its sources'
evidence, not a rival of them: an episode is as close to the question as the closest of
the facts drawn from it (:func:`lend_similarity`), and facts are not anchors. With
``"anchor"`` a fact is a concept like any other (anchor, spreader, ranked). The difference
is measured in docs/concepts.md ("Sleep consolidation"): facts as anchors crowd the dense
triggers with short sentences that match a question mostly by the speaker's name.

Sleepers:

* :class:`OfflineSleeper`: a fact is a sentence of a turn that is not a question, speaks in
  the first person and has at least :data:`MIN_FACT_WORDS` content words, prefixed with the
  speaker ("Sam: I moved to Denver in May."). It is extraction, not abstraction: honest
  about what a rule can do (docs/concepts.md measures it).
* :class:`LLMSleeper`: any LangChain chat model reviews the buffer and writes the facts,
  each naming its source turns.

>>> [c.name for c in OfflineSleeper().facts([
...     {"id": "e1", "text": "I moved to Denver in May for the new job.", "speaker": "Sam"},
...     {"id": "e2", "text": "ok thanks! Where is it?", "speaker": "Sam"}])]
['Sam: I moved to Denver in May for the new job.']
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ...errors import InvalidTypeError
from ...types import Concept
from ..graph.graph import FACT_TYPE
from ..text.documents import without_any_speaker
from ..text.lexicon import FACT_FIRST_PERSON
from ..text.llm_reply import parse_reply
from ..text.tokens import sentences, tokenize

logger = logging.getLogger(__name__)

__all__ = ["LLMSleeper", "MIN_FACT_WORDS", "OfflineSleeper", "SleepReport", "Sleeper", "due",
           "run_sleep"]


#: Content words a sentence needs to be kept as a fact offline.
MIN_FACT_WORDS = 4


@dataclass(frozen=True)
class SleepReport:
    """What one sleep did: episodes reviewed, facts created / merged into existing ones,
    sources archived, and the compression ratio (episodes per fact node added)."""

    episodes: int
    facts_created: int
    facts_merged: int
    archived: int

    @property
    def compression(self) -> float:
        """Episodes reviewed per new fact (0 when none was created)."""
        return self.episodes / self.facts_created if self.facts_created else 0.0


class Sleeper(Protocol):
    """Turns the buffer's episodes (``{"id", "text", "speaker"}``) into facts: concepts
    of type ``"Fact"`` whose ``source_ids`` name the episodes they came from."""

    def facts(self, episodes: Sequence[Mapping[str, Any]]) -> list[Concept]: ...


class OfflineSleeper:
    """First-person statements as facts (see the module docstring)."""

    def __init__(self, *, min_words: int = MIN_FACT_WORDS) -> None:
        self.min_words = min_words

    def facts(self, episodes: Sequence[Mapping[str, Any]]) -> list[Concept]:
        out: dict[str, Concept] = {}
        for ep in episodes:
            body = without_any_speaker(ep["text"])
            for sentence in sentences(body):
                s = " ".join(sentence.split())
                if not s or s.endswith("?") or not FACT_FIRST_PERSON.search(s) \
                        or len(tokenize(s)) < self.min_words:
                    continue
                name = f"{ep['speaker']}: {s}" if ep.get("speaker") else s
                key = name.lower()
                if key not in out:
                    out[key] = Concept(name, FACT_TYPE, 1.0, {}, (ep["id"],))
        return list(out.values())


_PROMPT = """Below are messages from a conversation, each with its id. Write down the lasting \
facts and preferences they state about the people in it (who they are, what they have, \
like, plan or did), one short self-contained sentence each, naming the ids of the messages \
each fact comes from. Leave out small talk and anything only true for that moment.

{episodes}

Answer with one JSON object and nothing else: \
{{"facts": [{{"fact": "...", "sources": ["<id>", ...]}}]}}"""


class LLMSleeper:
    """Any LangChain chat model reviews the buffer (one call per sleep). Facts without a
    known source id are dropped; a reply that is not the asked JSON yields no fact
    (logged)."""

    def __init__(self, chat_model: Any, *, max_chars: int = 2000) -> None:
        if not hasattr(chat_model, "invoke"):
            raise InvalidTypeError("LLMSleeper needs a LangChain chat model (with invoke), "
                                   f"got {type(chat_model).__name__}")
        self.chat_model = chat_model
        self.max_chars = max_chars

    def facts(self, episodes: Sequence[Mapping[str, Any]]) -> list[Concept]:
        if not episodes:
            return []

        listing = "\n".join(f"[{e['id']}] {e['text'][:self.max_chars]}" for e in episodes)
        try:
            data = parse_reply(self.chat_model.invoke(_PROMPT.format(episodes=listing)))
        except ValueError as exc:
            logger.warning("sleep: unusable reply ignored: %s", exc)
            return []
        known = {e["id"] for e in episodes}
        out = []
        for f in (data.get("facts") if isinstance(data, dict) else None) or []:
            if not isinstance(f, dict) or not isinstance(f.get("fact"), str) or not f["fact"].strip():
                continue
            sources = tuple(s for s in f.get("sources") or [] if isinstance(s, str) and s in known)
            if sources:
                out.append(Concept(f["fact"].strip()[:500], FACT_TYPE, 1.0, {}, sources))
        return out


def due(state: Any, cfg: Any) -> bool:
    """``sleep_auto`` and the buffer is full: ``sleep_episodes`` episodes and
    ``sleep_seconds`` of event time since the last sleep."""
    if not cfg.sleep_auto:
        return False
    # checked after every stored turn: walk back from the newest episode only as far as
    # the last sleep (episodes are added in creation order), not over the whole graph
    mark = state.slept.get("seq", 0)
    g = state.graph
    times = []
    for n in g.newest_first("episode"):
        d = g.node(n)
        if d.get("seq", 0) <= mark:
            break
        times.append(d.get("ts") or d.get("ingest_ts") or 0.0)
    if len(times) < cfg.sleep_episodes:
        return False
    last = state.slept.get("ts")
    return max(times) - (min(times) if last is None else last) >= cfg.sleep_seconds


def _buffer(state: Any) -> list[dict[str, Any]]:
    """Active episodes stored since the last sleep, oldest first."""
    mark = state.slept.get("seq", 0)
    g = state.graph
    return sorted(({"id": n, **d} for n, d in g.g.nodes(data=True)
                   if d.get("kind") == "episode" and d.get("seq", 0) > mark),
                  key=lambda d: d["seq"])


def run_sleep(state: Any, consolidator: Any, sleeper: Sleeper, *, archive: bool) -> SleepReport:
    """One sleep over the buffer (see the module docstring)."""
    buffer = _buffer(state)
    if not buffer:
        return SleepReport(0, 0, 0, 0)
    facts = sleeper.facts([{"id": b["id"], "text": b["text"], "speaker": b.get("speaker")}
                           for b in buffer])
    created, merged = consolidator.add_semantic(facts, [b["id"] for b in buffer])
    moved: list[str] = []
    if archive and facts:
        sources = {s for f in facts for s in f.source_ids}
        moved = state.archive([b["id"] for b in buffer if b["id"] in sources])
    state.slept = {"seq": buffer[-1]["seq"],
                   "ts": max((b.get("ts") or b.get("ingest_ts") or 0.0) for b in buffer)}
    return SleepReport(len(buffer), created, merged, len(moved))
