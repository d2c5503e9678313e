"""Reconsolidation: a turn that restates an attribute with a new value supersedes the older
turn (mnemos' MutableRAG, section 3.2, done at write time instead of on recall).

"I've put 10-12 hours into my ocean sculpture" after "I've spent 5-6 hours on my ocean
sculpture" is a new version of the same fact. When a turn is stored
(:func:`reconsolidate`), its *statements* are compared with earlier turns of the same
speaker, and each earlier turn it updates is marked superseded through the path
:meth:`Synapse.update` uses (:meth:`MemoryState.supersede`): kept, linked both ways
(``superseded_by`` / ``supersedes``), timed (``superseded_at``: the new turn's event time)
and ranked with its replacement (:func:`~synapse_integrations.core.signals.versions.rank_versions`).

**The offline rule** (:class:`RuleReconsolidator`, measured in docs/concepts.md). A
*statement* is a sentence of a turn that

* is not a question (one ending in "?" that does not open with a question word still
  counts: "remember when I got pre-approved for $400,000?"),
* speaks in the first person (``I``, ``my``, ``we``...) and is not a request (it neither
  addresses the listener, ``you``/``please``, nor opens with a request verb, "Give me..."),
* is not anchored to one moment ("three weeks ago", "last weekend": an event),
* is not a plan, a wish or a guess before its first value ("I want to watch 1 episode
  daily", "I'm thinking of 2 sessions a week", "maybe 2-3 hours": ``PLAN_WORDS``),
* has at most :data:`MAX_WORDS` content words and :data:`MAX_VALUES` distinct values,
* and holds a *value*: a number (``3``, ``$420``, ``5-6``), a number word (``three``,
  ``twice``, ``single``) or an ordinal (``fifth``); a number next to a month name is a
  date and one before ``am``/``pm`` a time of day, not values.

Its *slot* is the content words within :data:`SLOT_WINDOW` words of a value (``hours``,
``issue``, ``level``), its *frame* the other content words (crudely stemmed; chat filler,
``GENERIC_STATEMENT_WORDS``, left out). Assistant turns (role ``assistant`` in the metadata, or
speaker ``assistant``/``AI``) are never compared: their "I" quotes or plays a part. An
earlier statement of the same speaker is an older version when

1. they share a slot word (the same attribute),
2. besides one slot word they share at least :data:`MIN_SHARED` content words, and the
   shared words carry at least :data:`MIN_OVERLAP` of the smaller statement's IDF mass
   (the memory's BM25 IDF; the same subject),
3. no value is common to both (the value changed; "third" and "three" are the same).

**Changes without a number.** A sentence in which the speaker says they changed something
(a ``CHANGE_VERBS`` verb right after ``I``/``we``: "I moved to Denver", "I switched
providers to FiberNest") supersedes an earlier statement of theirs that shares its subject:
shared content words carrying at least :data:`CHANGE_OVERLAP` of the smaller statement's
IDF mass (capitalised names left out: they are the values here), the old statement naming
something a change can replace (a name or a value: "I'm not sure how it works" names
nothing), and something new named (a name or a value the old one lacks). Words of one attribute count as one
(``ATTRIBUTE_WORDS``: "live", "apartment", "moved to" are all where one lives).

Candidates are the earlier episodes the BM25 index ranks highest for the new turn (at
most :data:`CANDIDATES`), so a write costs one lexical query.

The word lists the rule reads (``CHANGE_VERBS``, ``ATTRIBUTE_WORDS``, ...) live in
:mod:`~synapse_integrations.core.text.lexicon`.

**The LLM variant** (:class:`LLMReconsolidator`) asks any LangChain chat model which of
the same candidates the new turn updates.

**At retrieval** the versions rank together (the read half:
:mod:`~synapse_integrations.core.signals.versions`).

>>> [(sorted(s.values), sorted(s.slot)) for s in statements(
...     "I have 2 road bikes. Do you like bikes? Dana has three cats.")]
[(['2'], ['bike', 'road'])]
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...errors import InvalidTypeError
from ..graph.roles import is_role
from ..text.documents import without_any_speaker
from ..text.lexicon import (
    ADDRESSEE_WORDS,
    ATTRIBUTE_WORDS,
    CHANGE_SUBJECTS,
    CHANGE_VERBS,
    CLOCK_WORDS,
    DEICTIC_WORDS,
    GENERIC_STATEMENT_WORDS,
    INDEX_STOPWORDS,
    MOMENT_WORDS,
    MONTH_NAMES,
    MOVE_DIRECTIONS,
    MOVE_VERBS,
    NAME_TITLES,
    NUMBER_WORDS,
    PERIOD_WORDS,
    PLAN_PHRASES,
    PLAN_WORDS,
    QUESTION_OPENERS,
    REQUEST_VERBS,
    STATEMENT_FIRST_PERSON,
)
from ..text.llm_reply import parse_reply
from ..text.tokens import sentences

logger = logging.getLogger(__name__)

__all__ = ["CANDIDATES", "LLMReconsolidator", "MIN_OVERLAP", "MIN_SHARED", "Reconsolidator",
           "RuleReconsolidator", "Statement", "is_update", "reconsolidate", "statements"]

#: Earlier episodes (BM25's best for a statement) compared with a new turn.
CANDIDATES = 8
#: Frame words two statements must share to be about the same subject.
MIN_SHARED = 2
#: ... and the share of the smaller frame they must make up.
MIN_OVERLAP = 0.4
#: The share of the smaller statement's IDF mass a change must share with what it replaces.
CHANGE_OVERLAP = 0.5
#: Event time (seconds) that must separate two statements of a value for the newer to
#: supersede the older: within one conversation a new value of the same frame is another
#: item of a list ("100 more points for a free book", then "50 more points for a free
#: dessert"), not a change; and a change told twice in one conversation ("since I upgraded
#: my RAM...") is the same change, not a new one.
MIN_GAP = 3600.0

_NAME_RE = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-zA-Z]+")
#: A sentence with more distinct values than this is a list (prices, a schedule), not a
#: statement of one attribute.
MAX_VALUES = 2
#: A sentence with more content words than this is an instruction or a specification.
MAX_WORDS = 25
#: How close (in words) to a value a content word must be to name its slot.
SLOT_WINDOW = 3
_WORD_RE = re.compile(r"\$?\d[\d,]*(?:\.\d+)?(?:\s*-\s*\d[\d,]*)?%?|[a-z][a-z']*")


@dataclass(frozen=True)
class Statement:
    """A first-person sentence with a value: the values (normalised), the slot (content
    words next to a value) and the frame (the other content words), all stemmed;
    ``words`` maps each stem to a word it came from (for IDF weights)."""

    values: frozenset[str]
    slot: frozenset[str]
    frame: frozenset[str]
    words: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    change: bool = False  # says that something changed ("I moved", "I switched")
    names: frozenset[str] = frozenset()  # capitalised names in it ("Denver", "FiberNest")


def _stem(word: str) -> str:
    """A crude stem: possessive, then ``-ing`` / ``-ed`` / plural ``-s`` dropped."""
    word = word.split("'")[0]
    for end, keep in (("ing", 4), ("ed", 4)):
        if word.endswith(end) and len(word) - len(end) >= keep:
            return word[:-len(end)]
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _value(token: str) -> str | None:
    if token[0] in "$0123456789":
        return re.sub(r"[\s,$]", "", token)
    return NUMBER_WORDS.get(token)


def _changed(words: Sequence[str]) -> bool:
    """The speaker says they changed something: a change verb right after a first-person
    subject ("I moved", "we've just switched"; not "Rachel moved", "my habits changed",
    "I was moved by", "I sold out")."""
    return any(w in CHANGE_VERBS and CHANGE_SUBJECTS.intersection(words[max(0, k - 3):k])
               and words[k + 1:k + 2] != ["by"] and words[k + 1:k + 2] != ["out"]
               for k, w in enumerate(words))


def _anchored(words: Sequence[str]) -> bool:
    """The sentence names one moment (see the lexicon's ``MOMENT_WORDS``)."""
    return bool(MOMENT_WORDS.intersection(words)) or any(
        a in DEICTIC_WORDS and b in PERIOD_WORDS for a, b in zip(words, words[1:]))


def _planned(words: Sequence[str]) -> bool:
    """The sentence is a plan, a wish or a guess (the lexicon's ``PLAN_WORDS`` and
    ``PLAN_PHRASES``) before its first value: "I want to watch 1 episode daily" states no
    value that holds; "I have two free nights, so I might use them" still does."""
    first = next((k for k, w in enumerate(words) if _value(w) is not None), len(words))
    head = words[:first]
    return bool(PLAN_WORDS.intersection(head)) or any(
        (a, b) in PLAN_PHRASES for a, b in zip(head, head[1:]))


def _sentences(text: str) -> list[str]:
    """The sentences of ``text``, a sentence cut after an honorific ("I see Dr. Okafor")
    joined again.

    >>> _sentences("I see Dr. Okafor now. Fine.")
    ['I see Dr Okafor now.', ' Fine.']
    """
    out: list[str] = []
    for piece in sentences(text):
        last = out[-1].rstrip() if out else ""
        if last.endswith(".") and last[:-1].split()[-1:] and last[:-1].split()[-1] in NAME_TITLES:
            out[-1] = last[:-1] + " " + piece.lstrip()  # "Dr Okafor": the name is a name
        else:
            out.append(piece)
    return out


def statements(text: str) -> list[Statement]:
    """The statements of a turn's text (see the module docstring), in order: sentences with
    a value, sentences that say something changed, and (as what a change may replace)
    other short first-person sentences."""
    out = []
    for original in _sentences(without_any_speaker(text)):
        sentence = original.lower()
        words = _WORD_RE.findall(sentence)
        if sentence.rstrip().endswith("?") and (not words or words[0] in QUESTION_OPENERS):
            continue
        change = _changed(words)
        if not STATEMENT_FIRST_PERSON.intersection(words) or ADDRESSEE_WORDS.intersection(words) \
                or (words and words[0] in REQUEST_VERBS) or (_anchored(words) and not change) \
                or _planned(words):
            continue
        names = frozenset(n.lower() for n in _NAME_RE.findall(original.strip()) if n != "I")
        content: list[tuple[int, str]] = []
        raw: dict[str, str] = {}
        values: dict[int, str] = {}
        for pos, w in enumerate(words):
            v = _value(w)
            near = words[max(0, pos - 2):pos + 3]
            if v is not None and not MONTH_NAMES.intersection(near) \
                    and not CLOCK_WORDS.intersection(words[pos + 1:pos + 2]):  # a date, a time of day
                values[pos] = v
            elif (w in ATTRIBUTE_WORDS or _stem(w) in ATTRIBUTE_WORDS) and not (
                    w in MOVE_VERBS and words[pos + 1:pos + 2] and words[pos + 1] not in MOVE_DIRECTIONS):
                content.append((pos, ATTRIBUTE_WORDS.get(w) or ATTRIBUTE_WORDS[_stem(w)]))
                raw.setdefault(content[-1][1], w)
            elif w.split("'")[0] not in INDEX_STOPWORDS and len(w) > 1 and w not in STATEMENT_FIRST_PERSON \
                    and w not in GENERIC_STATEMENT_WORDS and w not in CHANGE_VERBS:
                content.append((pos, _stem(w)))
                raw.setdefault(_stem(w), w.split("'")[0])
        if len(set(values.values())) > MAX_VALUES or len(content) > MAX_WORDS:
            continue  # a list of figures or a long instruction states no one attribute
        if not values and _anchored(words) and not change:
            continue
        slot = {w for pos, w in content if any(abs(pos - p) <= SLOT_WINDOW for p in values)}
        out.append(Statement(frozenset(values.values()), frozenset(slot),
                             frozenset(w for _, w in content) - slot, raw, change, names))
    return out


def is_update(new: Statement, old: Statement, *, min_shared: int = MIN_SHARED,
              min_overlap: float = MIN_OVERLAP,
              idf: Callable[[str], float] | None = None) -> bool:
    """The offline rule: ``new`` states the same slot of the same subject as ``old`` with
    a different value. The overlap is weighted by ``idf(word)`` when given (the memory's
    BM25 IDF: "national geographic" counts for more than "really"), else each word 1.

    >>> a, = statements("I've spent 5-6 hours on my abstract ocean sculpture.")
    >>> b, = statements("I've put in 10-12 hours on my abstract ocean sculpture so far.")
    >>> c, = statements("I've spent 2 hours on my garden.")
    >>> is_update(b, a), is_update(c, a)
    (True, False)
    """
    def mass(stems: frozenset[str], st: Statement) -> float:
        return sum(idf(st.words.get(w, w)) for w in stems) if idf else float(len(stems))

    frame_new, frame_old = new.frame | new.slot, old.frame | old.slot
    shared = frame_new & frame_old
    if new.change and not (new.values and old.values):
        # a change: the same subject, and something new named ("I moved to Denver")
        fn, fo = frame_new - new.names, frame_old - old.names  # names are the values here
        shared = fn & fo
        if not (old.names or old.values):  # the old sentence names nothing a change replaces
            return False
        if not shared or not (new.names - old.names or new.values - old.values):
            return False
        return mass(shared, new) / (min(mass(fn, new), mass(fo, old)) or 1.0) >= CHANGE_OVERLAP
    if not new.slot & old.slot or new.values & old.values:
        return False
    if len(shared) - 1 < min_shared:  # the slot word, and min_shared more
        return False
    smaller = min(mass(frame_new, new), mass(frame_old, old)) or 1.0
    return mass(shared, new) / smaller >= min_overlap


class Reconsolidator(Protocol):
    """Decides which earlier turns a new turn updates. ``new`` and each candidate are
    ``{"id", "text", "speaker", "ts"}`` mappings; ``idf`` gives the memory's BM25 IDF of a
    word (a rule may weight words by it). Returns the ids of the candidates it supersedes."""

    def superseded(self, new: Mapping[str, Any], candidates: Sequence[Mapping[str, Any]],
                   idf: Callable[[str], float] | None = None) -> list[str]: ...


class RuleReconsolidator:
    """The offline rule (:func:`is_update` on every pair of statements); a turn less than
    ``min_gap`` seconds of event time after the older one (both ``ts`` known) supersedes
    nothing: within one conversation a new value is another item of a list, and a change
    said again is the same change.

    >>> rule = RuleReconsolidator()
    >>> old = {"id": "a", "text": "I need 100 more points for a free book.", "ts": 0.0}
    >>> new = {"id": "b", "text": "I need 50 more points for a free book.", "ts": 60.0}
    >>> rule.superseded(new, [old]), rule.superseded({**new, "ts": 86400.0}, [old])
    ([], ['a'])
    """

    def __init__(self, *, min_shared: int = MIN_SHARED, min_overlap: float = MIN_OVERLAP,
                 min_gap: float = MIN_GAP) -> None:
        self.min_shared = min_shared
        self.min_overlap = min_overlap
        self.min_gap = min_gap

    def superseded(self, new: Mapping[str, Any], candidates: Sequence[Mapping[str, Any]],
                   idf: Callable[[str], float] | None = None) -> list[str]:
        mine = statements(new["text"])
        out = []
        for c in candidates:
            theirs = statements(c["text"])
            close = new.get("ts") is not None and c.get("ts") is not None \
                and new["ts"] - c["ts"] < self.min_gap  # one conversation: a list, not a change
            if close:  # one conversation: a list, or a change told again, not a new value
                continue
            if any(is_update(a, b, min_shared=self.min_shared, min_overlap=self.min_overlap,
                             idf=idf) for a in mine for b in theirs):
                out.append(c["id"])
        return out


_PROMPT = """You keep a user's memory up to date. A new message was just said. Below it are \
earlier messages by the same speaker. Which earlier messages does the new one make out of \
date, because it states the same attribute of the same thing with a different value (a new \
count, place, amount, frequency, goal...)? Messages about other things, or that agree, are \
not out of date.

New message:
{new}

Earlier messages:
{candidates}

Answer with one JSON object and nothing else: {{"outdated": ["<id>", ...]}}"""


class LLMReconsolidator:
    """The LLM variant: any LangChain chat model (``invoke`` with a prompt string) judges
    which candidates the new turn makes out of date. Ids the model invents are ignored;
    a reply that is not the asked JSON supersedes nothing (logged)."""

    def __init__(self, chat_model: Any, *, prefilter: bool = True) -> None:
        if not hasattr(chat_model, "invoke"):
            raise InvalidTypeError("LLMReconsolidator needs a LangChain chat model (with invoke), "
                                   f"got {type(chat_model).__name__}")
        self.chat_model = chat_model
        self.prefilter = prefilter  # only turns with a first-person value statement

    def superseded(self, new: Mapping[str, Any], candidates: Sequence[Mapping[str, Any]],
                   idf: Callable[[str], float] | None = None) -> list[str]:
        if not candidates or (self.prefilter and not statements(new["text"])):
            return []

        listing = "\n".join(f"[{c['id']}] {c['text']}" for c in candidates)
        reply = self.chat_model.invoke(_PROMPT.format(new=new["text"], candidates=listing))
        try:
            data = parse_reply(reply)
        except ValueError as exc:
            logger.warning("reconsolidation: unusable reply ignored: %s", exc)
            return []
        ids = data.get("outdated") if isinstance(data, dict) else None
        known = {c["id"] for c in candidates}
        return [i for i in ids if isinstance(i, str) and i in known] if isinstance(ids, list) else []


def _candidates(state: Any, node_id: str, text: str, speaker: Any) -> list[dict[str, Any]]:
    """Earlier active episodes of the same speaker that BM25 ranks best for ``text``,
    not yet superseded."""
    g = state.graph
    seq = g.node(node_id).get("seq", 0)
    ids, _ = state.bm25.query(text, 4 * CANDIDATES)
    out = []
    for i in ids:
        if i == node_id or i not in g:
            continue
        d = g.node(i)
        if d["kind"] != "episode" or d.get("speaker") != speaker or d.get("seq", 0) >= seq \
                or d.get("superseded_by"):
            continue
        out.append({"id": i, "text": d["text"], "speaker": speaker, "ts": d.get("ts")})
        if len(out) >= CANDIDATES:
            break
    return out


def reconsolidate(state: Any, detector: Reconsolidator, node_id: str) -> list[str]:
    """Compare the stored episode ``node_id`` with its candidates and mark every earlier
    turn it updates as superseded by it. Returns the ids marked."""
    d = state.graph.node(node_id)
    if is_role(d, "assistant"):  # the assistant's "I" is no fact about a person
        return []
    candidates = _candidates(state, node_id, d["text"], d.get("speaker"))
    if not candidates:
        return []
    new = {"id": node_id, "text": d["text"], "speaker": d.get("speaker"), "ts": d.get("ts")}
    old = detector.superseded(new, candidates, state.bm25.idf)
    for i in old:
        state.supersede(i, node_id, at=d.get("ts") if d.get("ts") is not None
                        else d.get("ingest_ts") or 0.0)
    if old:
        logger.debug("reconsolidation: %s supersedes %s", node_id, old)
    return old


