"""Reconsolidation: a turn that restates an attribute with a new value supersedes the older
turn (mnemos' MutableRAG, section 3.2, done at write time instead of on recall).

"I've put 10-12 hours into my ocean sculpture" after "I've spent 5-6 hours on my ocean
sculpture" is a new version of the same fact. When a turn is stored
(:func:`reconsolidate`), its *statements* are compared with earlier turns of the same
speaker, and each earlier turn it updates is marked superseded through the path
:meth:`Synapse.update` uses (:meth:`MemoryState.supersede`): kept, linked both ways
(``superseded_by`` / ``supersedes``), timed (``superseded_at``: the new turn's event time)
and ranked with its replacement (:func:`rank_versions`).

**The offline rule** (:class:`RuleReconsolidator`, measured in docs/concepts.md). A
*statement* is a sentence of a turn that

* is not a question (one ending in "?" that does not open with a question word still
  counts: "remember when I got pre-approved for $400,000?"),
* speaks in the first person (``I``, ``my``, ``we``...) and is not a request (it neither
  addresses the listener, ``you``/``please``, nor opens with a request verb, "Give me..."),
* is not anchored to one moment ("three weeks ago", "last weekend": an event),
* has at most :data:`MAX_WORDS` content words and :data:`MAX_VALUES` distinct values,
* and holds a *value*: a number (``3``, ``$420``, ``5-6``), a number word (``three``,
  ``twice``, ``single``) or an ordinal (``fifth``); a number next to a month name is a
  date and one before ``am``/``pm`` a time of day, not values.

Its *slot* is the content words within :data:`SLOT_WINDOW` words of a value (``hours``,
``issue``, ``level``), its *frame* the other content words (crudely stemmed; chat filler,
:data:`GENERIC_WORDS`, left out). Assistant turns (role ``assistant`` in the metadata, or
speaker ``assistant``/``AI``) are never compared: their "I" quotes or plays a part. An
earlier statement of the same speaker is an older version when

1. they share a slot word (the same attribute),
2. besides one slot word they share at least :data:`MIN_SHARED` content words, and the
   shared words carry at least :data:`MIN_OVERLAP` of the smaller statement's IDF mass
   (the memory's BM25 IDF; the same subject),
3. no value is common to both (the value changed; "third" and "three" are the same).

**Changes without a number.** A sentence in which the speaker says they changed something
(a :data:`CHANGE_VERBS` verb right after ``I``/``we``: "I moved to Denver", "I switched
providers to FiberNest") supersedes an earlier statement of theirs that shares its subject:
shared content words carrying at least :data:`CHANGE_OVERLAP` of the smaller statement's
IDF mass (capitalised names left out: they are the values here), and something new named
(a name or a value the old one lacks). Words of one attribute count as one
(:data:`ATTRIBUTE_WORDS`: "live", "apartment", "moved to" are all where one lives).

Candidates are the earlier episodes the BM25 index ranks highest for the new turn (at
most :data:`CANDIDATES`), so a write costs one lexical query.

**The LLM variant** (:class:`LLMReconsolidator`) asks any LangChain chat model which of
the same candidates the new turn updates.

**At retrieval** (:func:`rank_versions`): a version and its replacement that are both
candidates rank together at the better of their two scores, the newest first (its history
right below it). A superseded version whose replacement was not reached keeps
``superseded_weight`` of its score; for a question about the past (:func:`query_tense`:
"before", "previous", "used to"...) all of it. Versions no write linked are found at
question time (:func:`rank_recent`, ``SynapseConfig.version_recency``): the newest user
turn that holds most of the question's words is placed above older ones holding no other.

>>> [(sorted(s.values), sorted(s.slot)) for s in statements(
...     "I have 2 road bikes. Do you like bikes? Dana has three cats.")]
[(['2'], ['bike', 'road'])]
>>> query_tense("What was my previous goal?"), query_tense("Where do I live now?")
('past', 'current')
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from .documents import without_any_speaker
from .echoes import is_role
from .gate import attribute_terms
from .tokens import STOPWORDS, sentences, tokenize

logger = logging.getLogger(__name__)

__all__ = ["CANDIDATES", "LLMReconsolidator", "MIN_OVERLAP", "MIN_SHARED", "Reconsolidator",
           "RuleReconsolidator", "Statement", "is_update", "query_tense", "rank_versions",
           "rank_recent", "reconsolidate", "statements"]

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
#: dessert"), not a change. Changes said with a change verb ("I moved to Denver") need no gap.
MIN_GAP = 3600.0
#: How far apart (in the score) a version is placed from the one it is ranked with.
VERSION_MARGIN = 1e-6

_NUMBER_WORDS = {
    "single": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
    "fifteen": "15", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50",
    "hundred": "100", "twice": "2", "thrice": "3", "second": "2", "third": "3",
    "fourth": "4", "fifth": "5", "sixth": "6", "seventh": "7", "eighth": "8", "ninth": "9",
    "tenth": "10", "dozen": "12", "couple": "2",
}
_FIRST_PERSON = frozenset({"i", "my", "mine", "we", "our", "i'm", "i've", "i'd", "i'll",
                           "we're", "we've"})
#: A sentence that addresses the listener ("I want you to write 60 characters") or opens
#: with a request verb ("Give me chapter 2") is a request, not a fact about the speaker.
_ADDRESSEE = frozenset({"you", "your", "you're", "you've", "yourself", "please"})
#: A sentence anchored to one moment ("three weeks ago", "last weekend", "next Monday")
#: tells of an event, not of an attribute that a later value replaces.
_MOMENT = frozenset({"ago", "yesterday", "tomorrow", "tonight"})
_DEICTIC = frozenset({"last", "next", "this"})
_PERIODS = frozenset("""week weekend month year night morning evening summer winter spring fall
monday tuesday wednesday thursday friday saturday sunday""".split())
#: Verbs that say an attribute changed: such a sentence supersedes an earlier one about the
#: same thing even without a number ("I switched providers to FiberNest").
CHANGE_VERBS = frozenset("""moved switched changed quit replaced upgraded swapped
transferred relocated""".split())
#: Words of one attribute, read as that attribute ("I live in Boston" / "I moved to
#: Denver": both about where one lives).
ATTRIBUTE_WORDS: dict[str, str] = {
    **dict.fromkeys("live lives living lived moved move relocated apartment flat house home "
                    "rent renting".split(), "@home"),
    **dict.fromkeys("job jobs employer hired employed".split(), "@job"),
}
_SUBJECTS = frozenset({"i", "we", "i've", "we've", "i'd", "we'd"})
#: "moved" is about where one lives only when it says where ("moved to", "moved out"), not
#: in "I moved the meeting".
_MOVES = frozenset({"moved", "move", "relocated"})
_AWAY = frozenset({"to", "into", "back", "out", "in", "here", "there", "away", "abroad", "from"})
_NAME_RE = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-zA-Z]+")
_REQUESTS = frozenset("""give write provide suggest tell list make create explain show help
summarize summarise rewrite generate find recommend describe send let translate add""".split())
#: Words too common in chat to say what a statement is about ("by the way", "I think").
GENERIC_WORDS = frozenset("""way really actually also think just usually around oh lot pretty
still now well get got go goes going see like thing things make sure need want know feel
thinking planning trying try last next new good great much many able bit kind far interested
looking curious wondering""".split())
_MONTHS = frozenset("january february march april may june july august september october "
                    "november december jan feb mar apr jun jul aug sep sept oct nov dec".split())
_CLOCK = frozenset({"am", "pm", "a.m", "p.m", "o'clock"})
#: Words that open a real question (a sentence ending in "?" that starts otherwise,
#: "remember when I got pre-approved for $400,000?", still states something).
_QUESTION_OPENERS = frozenset("""what how when where who whom whose why which do does did can
could would will is are was were should shall have has had any may might am isn't aren't
don't doesn't didn't won't wouldn't couldn't""".split())
#: A sentence with more distinct values than this is a list (prices, a schedule), not a
#: statement of one attribute.
MAX_VALUES = 2
#: A sentence with more content words than this is an instruction or a specification.
MAX_WORDS = 25
#: How close (in words) to a value a content word must be to name its slot.
SLOT_WINDOW = 3
_WORD_RE = re.compile(r"\$?\d[\d,]*(?:\.\d+)?(?:\s*-\s*\d[\d,]*)?%?|[a-z][a-z']*")
_PAST_RE = re.compile(r"\b(before|previous(ly)?|used to|originally|at first|formerly|initially|"
                      r"earlier|prior|first time|back then|had been)\b", re.I)
_CURRENT_RE = re.compile(r"\b(now|currently|current|latest|still|most recent|these days|"
                         r"anymore|today|at the moment|so far|up to date|recent)\b", re.I)


def query_tense(query: str) -> Literal["past", "current", "neutral"]:
    """Whether a question asks about the past (older versions first), the present, or
    neither (treated as the present: the newest version first)."""
    if _PAST_RE.search(query):
        return "past"
    return "current" if _CURRENT_RE.search(query) else "neutral"


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


def _root(word: str) -> str:
    """A cruder stem for matching a question's words ("move", "moved", "moving": "mov")."""
    word = word.split("'")[0]
    for end in ("ing", "ed", "es", "s", "e"):
        if word.endswith(end) and len(word) - len(end) >= 3:
            return word[:-len(end)]
    return word


def _value(token: str) -> str | None:
    if token[0] in "$0123456789":
        return re.sub(r"[\s,$]", "", token)
    return _NUMBER_WORDS.get(token)


def _changed(words: Sequence[str]) -> bool:
    """The speaker says they changed something: a change verb right after a first-person
    subject ("I moved", "we've just switched"; not "Rachel moved", "my habits changed",
    "I was moved by", "I sold out")."""
    return any(w in CHANGE_VERBS and _SUBJECTS.intersection(words[max(0, k - 3):k])
               and words[k + 1:k + 2] != ["by"] and words[k + 1:k + 2] != ["out"]
               for k, w in enumerate(words))


def _anchored(words: Sequence[str]) -> bool:
    """The sentence names one moment (see :data:`_MOMENT`)."""
    return bool(_MOMENT.intersection(words)) or any(
        a in _DEICTIC and b in _PERIODS for a, b in zip(words, words[1:]))


def statements(text: str) -> list[Statement]:
    """The statements of a turn's text (see the module docstring), in order: sentences with
    a value, sentences that say something changed, and (as what a change may replace)
    other short first-person sentences."""
    out = []
    for original in sentences(without_any_speaker(text)):
        sentence = original.lower()
        words = _WORD_RE.findall(sentence)
        if sentence.rstrip().endswith("?") and (not words or words[0] in _QUESTION_OPENERS):
            continue
        change = _changed(words)
        if not _FIRST_PERSON.intersection(words) or _ADDRESSEE.intersection(words) \
                or (words and words[0] in _REQUESTS) or (_anchored(words) and not change):
            continue
        names = frozenset(n.lower() for n in _NAME_RE.findall(original.strip()) if n != "I")
        content: list[tuple[int, str]] = []
        raw: dict[str, str] = {}
        values: dict[int, str] = {}
        for pos, w in enumerate(words):
            v = _value(w)
            near = words[max(0, pos - 2):pos + 3]
            if v is not None and not _MONTHS.intersection(near) \
                    and not _CLOCK.intersection(words[pos + 1:pos + 2]):  # a date, a time of day
                values[pos] = v
            elif (w in ATTRIBUTE_WORDS or _stem(w) in ATTRIBUTE_WORDS) and not (
                    w in _MOVES and words[pos + 1:pos + 2] and words[pos + 1] not in _AWAY):
                content.append((pos, ATTRIBUTE_WORDS.get(w) or ATTRIBUTE_WORDS[_stem(w)]))
                raw.setdefault(content[-1][1], w)
            elif w.split("'")[0] not in STOPWORDS and len(w) > 1 and w not in _FIRST_PERSON \
                    and w not in GENERIC_WORDS and w not in CHANGE_VERBS:
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
    """The offline rule (:func:`is_update` on every pair of statements); a value restated
    less than ``min_gap`` seconds of event time after the older turn (both ``ts`` known)
    supersedes nothing, a change said with a change verb still does.

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
            if any(is_update(a, b, min_shared=self.min_shared, min_overlap=self.min_overlap,
                             idf=idf) and not (close and not a.change)
                   for a in mine for b in theirs):
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
            from ..errors import InvalidTypeError

            raise InvalidTypeError("LLMReconsolidator needs a LangChain chat model (with invoke), "
                                   f"got {type(chat_model).__name__}")
        self.chat_model = chat_model
        self.prefilter = prefilter  # only turns with a first-person value statement

    def superseded(self, new: Mapping[str, Any], candidates: Sequence[Mapping[str, Any]],
                   idf: Callable[[str], float] | None = None) -> list[str]:
        if not candidates or (self.prefilter and not statements(new["text"])):
            return []
        from .extraction.llm import parse_reply

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


def rank_versions(view: Any, cand: np.ndarray, score: np.ndarray, *, weight: float,
                  tense: str = "neutral", placed: list[tuple[int, int]] | None = None
                  ) -> np.ndarray:
    """Scores with versions ranked together (see the module docstring). ``view`` is the
    compiled graph (``node_values("superseded_by")``), ``cand`` the candidates' indices.
    ``placed``, when given, receives each pair ranked together as ``(newer, older)``
    positions in ``cand`` (:func:`settle_versions` keeps them so after a later merge).

    >>> from synapse_integrations.core.graph import Compiled
    >>> v = Compiled.from_arrays(["old", "new", "x"], np.eye(3), src=[], dst=[], weight=[],
    ...     is_episode=[True] * 3, attrs={"superseded_by": ["new", None, None]})
    >>> rank_versions(v, np.arange(3), np.array([0.9, 0.4, 0.5]), weight=0.5).round(3)
    array([0.9, 0.9, 0.5])
    >>> rank_versions(v, np.array([0, 2]), np.array([0.9, 0.5]), weight=0.5)
    array([0.45, 0.5 ])
    """
    score = np.asarray(score, dtype=np.float64).copy()
    newer = view.node_values("superseded_by")
    pairs = []
    pos = {int(c): j for j, c in enumerate(cand)}
    for j, c in enumerate(cand.tolist()):
        nid = newer[c]
        if nid is None:
            continue
        k = pos.get(view.index.get(nid, -1))
        if k is None:
            if tense != "past":
                score[j] *= weight
        else:
            pairs.append((j, k))
    if placed is not None:
        placed.extend((k, j) for j, k in pairs)
    for _ in range(len(pairs)):  # chains of versions settle in at most len(pairs) sweeps
        changed = False
        for j, k in pairs:  # j: the older version, k: its replacement
            first, second = k, j  # the newest first, the history right below it
            best = max(score[j], score[k])
            want = (best, best - VERSION_MARGIN)
            if (score[first], score[second]) != want:
                score[first], score[second] = want
                changed = True
        if not changed:
            break
    return score


#: The newest user turn holding this share of a question's IDF mass is lifted by
#: :func:`rank_recent` ...
RECENT_COVERAGE = 0.6
#: ... above the older user turns holding at least this share and no other of its words ...
RECENT_OLDER_SHARE = 0.3
#: ... among this many best candidates.
RECENT_WINDOW = 15
#: A later turn of the same speaker restating this share of an older answer's own words
#: (their IDF mass) is its successor, for a question about the present.
SUCCESSOR_SHARE = 0.2


def rank_recent(view: Any, cand: np.ndarray, score: np.ndarray, idf: Callable[[str], float],
                query: str, *, tense: str = "neutral", names: Sequence[str] = (),
                coverage: float = RECENT_COVERAGE,
                older_share: float = RECENT_OLDER_SHARE,
                window: int = RECENT_WINDOW,
                successor_share: float = SUCCESSOR_SHARE,
                placed: list[tuple[int, int]] | None = None) -> np.ndarray:
    """Versions found at question time (the newest above older ones, whether or not a
    write linked them). Among the ``window`` best candidates, the user turns (not the
    assistant's) with an event time are compared by the question's words they hold (by a
    crude stem, each weighted by ``idf``, the mass being that of the question's words some
    of them hold). The newest turn holding at least ``coverage`` of the mass is placed
    right above the best older turn that holds at least ``older_share`` of it and no
    question word the newest lacks: what the older turn says about the question, the newer
    says too, later. A question about the past (:func:`query_tense`) is left alone. The
    question's words are its attribute terms
    (:func:`~synapse_integrations.core.gate.attribute_terms`), without the ``names`` of the
    memory's speakers (every turn of theirs carries one in its speaker prefix) and frame
    words ("now", "name"): they say nothing of what changed.

    A question about the present ("now", "currently", "these days": ``tense="current"``)
    also lifts successors that do not repeat its words: each older turn holding at least
    ``older_share`` of the mass (an answer by words) gets its newest successor, a later
    turn of the same speaker restating at least ``successor_share`` of the IDF mass of the
    answer's own words (the question's words and the speakers' names left out), placed
    right above it.

    ``placed``, when given, receives each newer turn and the older one it was placed above
    as ``(newer, older)`` positions in ``cand`` (:func:`settle_versions`).

    >>> from synapse_integrations.core.graph import Compiled
    >>> def three_turns(*texts):  # the user's turns at times 1, 2, 3
    ...     return Compiled.from_arrays(["a", "b", "c"], np.eye(3), src=[], dst=[], weight=[],
    ...         is_episode=[True] * 3, attrs={"text": [f"user: {t}" for t in texts],
    ...         "speaker": ["user"] * 3, "ts": [1.0, 2.0, 3.0], "metadata": [{}] * 3})
    >>> v = three_turns("I earned $350 at the farmers market", "the weather was nice",
    ...                 "I earned $420 at the farmers market on my latest visit")
    >>> q = "How much did I earn at the farmers market?"
    >>> rank_recent(v, np.arange(3), np.array([0.9, 0.5, 0.4]), lambda t: 1.0, q).round(3)
    array([0.9, 0.5, 0.9])
    >>> rank_recent(v, np.arange(3), np.array([0.9, 0.5, 0.4]), lambda t: 1.0, q, tense="past")
    array([0.9, 0.5, 0.4])
    >>> rank_recent(v, np.arange(3), np.array([0.9, 0.5, 0.4]), lambda t: 1.0,
    ...             "What does the user do now?", names=["user"])  # only a name: nothing moves
    array([0.9, 0.5, 0.4])
    >>> v = three_turns("My gym is IronWorks, near home", "the weather was nice",
    ...                 "I cancelled IronWorks and joined Pulse Fitness")
    >>> q = "Which gym do I go to now?"
    >>> rank_recent(v, np.arange(3), np.array([0.9, 0.5, 0.4]), lambda t: 1.0, q,
    ...             tense="current", names=["user"]).round(3)  # "IronWorks": its successor
    array([0.9, 0.5, 0.9])
    >>> rank_recent(v, np.arange(3), np.array([0.9, 0.5, 0.4]), lambda t: 1.0, q,
    ...             names=["user"])  # no word of the present: the words alone decide
    array([0.9, 0.5, 0.4])
    """
    score = np.asarray(score, dtype=np.float64).copy()
    if tense == "past" or cand.size < 2:
        return score
    asked: dict[str, str] = {}
    for t in attribute_terms(query, names):
        asked.setdefault(_root(t), t)
    texts, speakers = view.node_values("text"), view.node_values("speaker")
    metas, ts = view.node_values("metadata"), view.node_values("ts")
    top = [int(j) for j in np.argsort(-score, kind="stable")[:window]]
    users = [j for j in top if view.is_episode[cand[j]] and ts[cand[j]] is not None
             and not is_role({"speaker": speakers[cand[j]], "metadata": metas[cand[j]] or {}},
                             "assistant")]
    rooted = view.memo("recent.rooted")  # node -> its words, kept as the view grows
    for j in users:
        if int(cand[j]) not in rooted:
            rooted[int(cand[j])] = _rooted(texts[cand[j]])
    words = {j: rooted[int(cand[j])] for j in users}  # root -> the first word with it
    held = {j: words[j].keys() & asked.keys() for j in users}
    weight = {r: idf(t) for r, t in asked.items() if any(r in h for h in held.values())}
    mass = sum(weight.values())
    if mass <= 0:
        return score
    share = {j: sum(weight[r] for r in held[j]) / mass for j in users}
    full = [j for j in users if share[j] >= coverage]
    if full:
        newest = max(full, key=lambda j: (ts[cand[j]], -j))
        older = [j for j in users if ts[cand[j]] < ts[cand[newest]]
                 and held[j] <= held[newest] and share[j] >= older_share]
        if older:
            best = max(older, key=lambda j: score[j])
            if score[newest] < score[best]:
                score[newest] = score[best] + VERSION_MARGIN
            if placed is not None:
                placed.append((newest, best))
    if tense == "current":  # "now", "currently", "these days": the answers' successors
        skip = set(asked) | {_root(t) for n in names for t in tokenize(n)}
        answers = [j for j in users if share[j] >= older_share]
        score = _lift_successors(view, cand, score, words, answers, skip, idf, successor_share,
                                 placed)
    return score


def settle_versions(score: np.ndarray, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``score`` with each ``(newer, older)`` pair of ``pairs`` (positions in ``score``)
    in order: a newer version at or below its older one is placed right above it
    (``VERSION_MARGIN``). Returns the scores and what each gained. Rankings merged from
    two passes keep the versions each pass placed (:func:`rank_versions`,
    :func:`rank_recent`): the older turn's better score in the other pass must not take
    it back above the turn that replaced it.

    >>> s, lift = settle_versions(np.array([0.5, 0.7, 0.2]), np.array([[0, 1], [2, 0]]))
    >>> (s - np.array([0.7, 0.7, 0.7])).round(7).tolist(), (lift > 0).tolist()
    ([1e-06, 0.0, 2e-06], [True, False, True])
    >>> settle_versions(np.array([0.9, 0.4]), np.array([[0, 1]]))[1].tolist()  # in order
    [0.0, 0.0]
    """
    out = np.asarray(score, dtype=np.float64).copy()
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    for _ in range(len(pairs)):  # a chain settles in at most len(pairs) sweeps
        changed = False
        for new, old in pairs.tolist():
            if out[new] <= out[old]:
                out[new] = out[old] + VERSION_MARGIN
                changed = True
        if not changed:
            break
    return out, out - np.asarray(score, dtype=np.float64)


def _rooted(text: str | None) -> dict[str, str]:
    """A text's crude stems (:func:`_root`), each with the first word that has it."""
    out: dict[str, str] = {}
    for t in tokenize(text or ""):
        out.setdefault(_root(t), t)
    return out


def _lift_successors(view: Any, cand: np.ndarray, score: np.ndarray,
                     words: Mapping[int, Mapping[str, str]], answers: list[int], skip: set[str],
                     idf: Callable[[str], float], share_min: float,
                     placed: list[tuple[int, int]] | None = None) -> np.ndarray:
    """Each of the ``answers`` (best first) with its newest successor among the turns of
    ``words`` (candidate -> its :func:`_rooted` words) placed right above it: a later turn
    of the same speaker that restates at least ``share_min`` of the answer's own words
    (their IDF mass; the roots in ``skip`` left out). "I cancelled IronWorks and joined
    Pulse Fitness" restates "My gym is IronWorks" without the question's word "gym"."""
    speakers, ts = view.node_values("speaker"), view.node_values("ts")
    for a in sorted(answers, key=lambda j: -score[j]):
        own = {r: t for r, t in words[a].items() if r not in skip}
        mass = sum(idf(t) for t in own.values())
        if mass <= 0:
            continue
        later = [j for j in words if ts[cand[j]] > ts[cand[a]]
                 and speakers[cand[j]] == speakers[cand[a]]
                 and sum(idf(t) for r, t in own.items() if r in words[j]) / mass >= share_min]
        if later:
            newest = max(later, key=lambda j: (ts[cand[j]], -j))
            if score[newest] <= score[a]:
                score[newest] = score[a] + VERSION_MARGIN
            if placed is not None:
                placed.append((newest, a))
    return score
