"""Concept extraction: turn one consolidation window of turns into semantic items.

The engine calls an extractor once per consolidation window (every ``N = 5`` turns,
SYNAPSE section 3.1 and Algorithm 1, line 11). The extractor proposes concepts and
typed relations; deduplication against the graph and the abstraction edges are the
engine's job, not the extractor's.

Two extractors are provided:

* :class:`OfflineExtractor` needs no model and no network. It is deterministic and fast
  (well under a millisecond per window) and aims at *bridge* concepts: speakers, named
  entities and content key phrases that recur across sessions, so that turns about the
  same person or topic in different sessions meet at the same concept node.
* :class:`LLMExtractor` asks any LangChain chat model for the paper's schema
  (appendix A.2: nodes with name/type/confidence/attributes, edges with
  src/rel/tgt/weight). It needs ``pip install synapse-integrations[llm]``; this module
  itself never imports ``langchain_core`` at import time.

>>> from synapse_integrations.types import Turn
>>> window = [
...     Turn("t1", "I went skiing with Mark in New York last week.", speaker="Caroline"),
...     Turn("t2", "Mark again? How was the ski trip?", speaker="Melanie"),
... ]
>>> result = OfflineExtractor().extract(window)
>>> [(c.name, c.type) for c in result.concepts][:4]
[('Caroline', 'Person'), ('Melanie', 'Person'), ('Mark', 'Entity'), ('New York', 'Entity')]
>>> next(c for c in result.concepts if c.name == "Mark").source_ids
('t1', 't2')
>>> result.relations
(Relation(src='Mark', rel='co_mentioned', tgt='New York', weight=0.5),)
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import statistics
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ConfigError, ExtractionError, InvalidTypeError, MissingDependencyError
from ..types import Concept, Extraction, Relation, Turn

if TYPE_CHECKING:  # pragma: no cover - typing only
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "BaseExtractor",
    "ExtractedEdge",
    "ExtractedNode",
    "ExtractionSchema",
    "Extractor",
    "ExtractorStats",
    "LLMExtractor",
    "OfflineExtractor",
    "window_stats",
]

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------
# The protocol and the base class
# ---------------------------------------------------------------------------------------


@runtime_checkable
class Extractor(Protocol):
    """Anything that turns one window of turns into an
    :class:`~synapse_integrations.types.Extraction`."""

    def extract(self, turns: Sequence[Turn]) -> Extraction:
        """Extract concepts and relations from ``turns`` (one consolidation window)."""
        ...

    async def aextract(self, turns: Sequence[Turn]) -> Extraction:
        """Async twin of :meth:`extract`."""
        ...


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


def _check_turns(turns: Sequence[Turn]) -> tuple[Turn, ...]:
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


# ---------------------------------------------------------------------------------------
# Word lists of the offline extractor (compact and built in: no downloads)
# ---------------------------------------------------------------------------------------

#: Function words: never concepts, never the start of a name.
_STOPWORDS = frozenset(
    """
    a about above after again against ago all almost along already also although am among
    an and another any anybody anyone anything anyway anywhere are around as at away back
    be became because become been before being below besides between both but by can
    cannot could did do does doing done down during each either else enough etc even ever
    every everybody everyone everything everywhere few for from further had has have
    having he her here hers herself him himself his how however i if in instead into is
    it its itself just last least less lot lots many may me might mine more most much
    must my myself neither never next no nobody none nor not nothing now of off often on
    once one only onto or other others otherwise our ours ourselves out over own per
    perhaps quite rather really always same several shall she should since so some somebody
    someone something sometimes somewhat somewhere soon still such than that the their
    theirs them themselves then there these they thing things this those though through
    thus till to together too toward towards under until up upon us very via was we
    were what whatever when whenever where wherever whether which while who whoever
    whole whom whose why will with within without would yet you your yours yourself
    yourselves
    i'm i've i'll i'd it's it'll it'd that's that'll there's there'll here's what's
    what're what'll who's who'd who'll where's when's why's how's how're how'd how've
    let's he's he'd he'll she's she'd she'll we're we've we'll we'd you're you've you'll
    you'd they're they've they'll they'd isn't aren't wasn't weren't hasn't haven't
    hadn't doesn't don't didn't won't wouldn't shan't shouldn't can't couldn't mustn't
    mightn't needn't ain't must've could've would've should've might've y'all
    gonna gotta wanna kinda sorta lemme dunno
    """.split()
)

#: Chat discourse: greetings, interjections, evaluations, politeness, hedges. Never
#: concepts and never the start of a name ("Wow Caroline" -> "Caroline").
_CHATTER = frozenset(
    """
    hey hi hello hiya yo bye goodbye cya cheers thanks thank thx ty congrats
    congratulations please sorry welcome wow woah whoa woohoo yay yeah yep yup yes yah
    nope nah no ok okay oh ooh ohh ah aah aw aww awww hmm hm huh haha hahaha hehe lol
    lmao omg btw tbh imo idk fyi ugh oops oof yikes phew meh wait well sure indeed
    absolutely definitely totally exactly certainly clearly truly honestly seriously
    actually basically literally obviously probably possibly maybe hopefully luckily
    thankfully unfortunately fortunately apparently especially generally usually
    normally recently lately finally eventually anyways besides plus also though
    great good nice cool awesome amazing wonderful fantastic incredible terrific
    excellent brilliant superb lovely sweet neat fab fabulous epic stunning gorgeous
    beautiful cute adorable perfect fun funny crazy wild insane tough hard rough sad
    happy glad excited exciting thrilled proud lucky blessed grateful thankful
    appreciate appreciated appreciative anytime impressive impressed inspiring inspired
    inspiration super pretty real true agreed agree right wrong bad worse worst best
    better sounds sound seems seem looks look looking feels feel feeling keep stay
    take talk chat catch hope hoping wish wishing guess bet believe remember imagine
    love loving loved adore adores adored like liked enjoy enjoyed tell told let see seeing
    saw
    """.split()
)

#: Generic content words: poor concepts on their own (common verbs in all their forms,
#: vague nouns, quantities, common adjectives). A capitalised one at the start of a
#: sentence is not a name; inside a multiword capitalised run ("Little Women") it is kept.
_GENERIC = frozenset(
    """
    thing stuff lot lots bit kind sort type way part piece side place point idea ideas
    reason question answer fact case matter deal issue problem chance example sense end
    start beginning rest time times while people person guy guys folks man woman men
    women difference world word words worth key note luck step pic pics favorite
    favourite fave fav cause shot ton tons bunch couple dozen half plenty
    new old big small little large huge tiny long short high low full empty easy
    difficult important different similar special whole main major simple certain sure
    own free busy ready able likely other another such close closer far later young
    alone alive alright safe strong forward glad keen
    first second third fourth fifth last next previous final one two three four five six
    seven eight nine ten eleven twelve twenty thirty hundred thousand million billion
    single double
    get gets got getting gotten go goes going gone went come comes came coming make makes
    made making do does did doing done have has had having take takes took taken taking
    give gives gave given giving put puts putting keep keeps kept keeping find finds
    found finding think thinks thought thinking know knows knew known knowing want wants
    wanted wanting need needs needed needing try tries tried trying use uses used using
    say says said saying mean means meant show shows showed shown showing call calls
    called calling ask asks asked asking seem seems seemed feel feels felt feeling start
    starts started starting begin began begun help helps helped helping happen happens
    happened happening change changes changed changing share shares shared sharing spend
    spends spent spending live lives lived hear hears heard hearing leave leaves left
    leaving bring brings brought bringing hold holds held holding turn turns turned
    turning move moves moved moving reach reaches reached reaching become becomes
    becoming lose loses losing lost win wins won let lets letting stay stays stayed
    staying tell tells told telling talk talks talked talking chat chats chatted
    chatting look looks looked looking see sees saw seen seeing watch watches watched
    check checks checked checking create creates creating connect connects connecting
    explore explores exploring remind reminds reminded reminding wonder wondering plan
    plans planned planning decide decides decided care cares cared stop stops stopped
    continue continues continued continuing realize realise realized realizing
    understand understands understood understanding forget forgets forgot forgotten
    remember remembers remembered believe believes believing hope hopes hoped hoping
    push pushes pushed pushing pay pays paid paying meet meets met join joins
    joined joining add adds added adding hang hangs hanging handle handles handled
    hit hits hitting build builds built spread spreads capture captures
    captured teach teaches taught tackle tackles tackled manage manages managed
    managing speak speaks spoke spoken speaking express expresses expressed expressing
    motivate motivates motivated motivating inspire inspires inspired inspiring improve
    improves improved improving supported supporting accept accepts
    accepted accepting recommend recommends recommended quit quits offered
    stand stands stood standing enjoy enjoys enjoying cherish cherishes cherished
    cherishing boost boosts boosted mix mixed drove smile smiles smiled
    relax relaxes relaxed worry worries worried worrying doubt doubts act acts visited
    work works worked working learn learns learned learnt grow grows grew grown growing
    play plays played playing read reads write writes wrote written run runs ran win wins
    winning live living watched watching
    interesting rewarding fulfilling challenging encouraging refreshing satisfying
    uplifting calming relaxing amazing exciting touching heartwarming overwhelming
    fascinating intriguing exhausting frustrating annoying boring charming stunning
    breathtaking thrilling soothing comforting reassuring promising surprising
    disappointing depressing terrifying devastating passionate magical fortunate
    """.split()
)

#: Date and time words: dates are not concepts (nor are numbers).
_DATE_WORDS = frozenset(
    """
    january february march april may june july august september october november
    december jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday
    thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun
    today tonight tomorrow yesterday morning afternoon evening night midnight noon
    day days week weeks weekend weekends month months year years decade decades
    hour hours minute minutes second seconds moment ago lately recently soon
    """.split()
)

#: Words that open many names ("New York", "Little Women") even at the start of a sentence.
_NAME_OPENERS = frozenset(
    """
    new old little great grand big north south east west upper lower central united
    royal golden red blue black white green san santa saint fort mount lake
    """.split()
)

#: Lowercase words that may sit inside a multiword name ("Statue of Liberty", "Lord of the Rings").
_CONNECTORS = frozenset({"of", "the", "de", "da", "del", "der", "van", "von", "du", "la", "le"})

#: Honorifics written with a period that does not end the sentence ("Dr. Seuss").
_TITLES = ("Dr", "Mr", "Mrs", "Ms", "Mx", "Prof", "St", "Mt", "Jr", "Sr", "Capt", "Rev")

#: Plural forms the simple singularisation rule must leave alone.
_KEEP_PLURAL = frozenset(
    """
    news series species clothes jeans pants shorts glasses scissors physics mathematics
    politics economics electronics gymnastics athletics aerobics lens gas bus yes always
    perhaps sometimes christmas thanks congrats whereas analysis basis crisis thesis
    diabetes trans
    """.split()
)

#: Words whose plural is "-ies" but whose singular ends in "-ie", not "-y".
_IE_WORDS = frozenset(
    """
    movie cookie selfie zombie rookie calorie brownie smoothie hoodie veggie goalie pie
    tie lie genie newbie indie aussie foodie techie sweetie bookie collie prairie
    """.split()
)

#: Nouns with an adjective-like ending ("-ive", "-able"), kept as topics.
_SUFFIX_NOUNS = frozenset(
    """
    perspective initiative detective archive narrative incentive executive alternative
    objective relative explosive adjective motive native representative vegetable
    timetable constable cable interest forest contest harvest request protest conquest
    manifest everest
    """.split()
)

#: Words ending in "-ly" that are nouns, not adverbs.
_LY_NOUNS = frozenset(
    """
    family assembly butterfly anomaly italy july supply reply rally belly jelly bully
    holly lily ally fly monopoly melancholy dragonfly firefly
    """.split()
)

_ADJECTIVE_ENDINGS = ("ful", "ous", "less", "ive", "able", "ible", "est")
_NOT_CONCEPT = _STOPWORDS | _CHATTER | _GENERIC | _DATE_WORDS
_NOT_NAME_START = _STOPWORDS | _CHATTER | _DATE_WORDS

_TOKEN_RE = re.compile(
    r"(?P<title>\b(?:(?:" + "|".join(_TITLES) + r")\.|[A-Z]\.(?=\s*[A-Z])))"
    r"|(?P<word>[^\W\d_]+(?:['’][^\W\d_]+)*(?:-[^\W\d_]+(?:['’][^\W\d_]+)*)*['’]?)"
    r"|(?P<num>\d+(?:[.,:/-]\d+)*[^\W\d_]*)"
    r"|(?P<punct>[.!?;:,()\[\]{}\"“”«»…&/–—-]|\n)"
)
_NEXT_WORD_RE = re.compile(r"\s*([^\W\d_]+(?:'[^\W\d_]+)*)")
# quotes break a name but do not start a sentence (titles are often quoted)
_SENTENCE_BREAKS = frozenset({".", "!", "?", ":", ";", "…", "\n"})


@dataclass(frozen=True)
class _Token:
    text: str  # as written, curly apostrophes made straight
    kind: str  # "title" | "word" | "num" | "punct"
    initial: bool  # first word of a sentence
    possessive: bool  # written "X's" or "Xs'" (stripped from ``base``)
    base: str  # the word without possessive, as written

    @property
    def lower(self) -> str:
        return self.base.lower()


def _tokenize(text: str) -> list[_Token]:
    text = text.replace("’", "'")
    tokens: list[_Token] = []
    initial = True
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup or "punct"
        raw = m.group()
        if kind == "title" and len(raw) == 2:  # an initial ("George R. R. Martin") ...
            after = _NEXT_WORD_RE.match(text, m.end())
            if after and after.group(1).lower() in _NOT_NAME_START:  # ... or "an A. Then"
                tokens.append(_Token(raw[0], "word", initial, False, raw[0]))
                tokens.append(_Token(".", "punct", False, False, "."))
                initial = True
                continue
        if kind == "punct":
            tokens.append(_Token(raw, kind, False, False, raw))
            if raw in _SENTENCE_BREAKS:
                initial = True
            continue
        base, possessive = raw, False
        if kind == "word":
            if raw.endswith(("'s", "'S")) and len(raw) > 2:
                base, possessive = raw[:-2], True
            elif raw.endswith("in'") and len(raw) > 5 and raw[0].islower():
                base = raw[:-1] + "g"  # "thinkin'" -> "thinking"
            elif raw.endswith("'"):
                base, possessive = raw[:-1], True
        tokens.append(_Token(raw, kind, initial, possessive, base))
        initial = False
    return tokens


def _is_capitalised(tok: _Token) -> bool:
    """Could this token be part of a name?"""
    if tok.kind == "title":
        return True
    if tok.kind != "word" or not tok.base or not tok.base[0].isupper():
        return False
    low = tok.lower
    if low in _DATE_WORDS or low in ("i", "i'm", "i've", "i'll", "i'd"):
        return False
    if tok.base.isupper() and len(tok.base) > 1:
        # all caps: an acronym ("LGBTQ", "NYC"), unless it is shouting ("JUST DOING IT")
        return len(tok.base) <= 5 and low not in _NOT_CONCEPT
    return True


def _singular(word: str) -> str:
    """Light plural stripping: ``stories -> story``, ``classes -> class``, ``kids -> kid``."""
    if len(word) <= 3 or word in _KEEP_PLURAL or "-" in word[-3:]:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-1] if word[:-1] in _IE_WORDS else word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zzes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is", "'s")):
        return word[:-1]
    return word


def _content_word(tok: _Token) -> str | None:
    """The normalised key-phrase form of a token, or None when it is not content."""
    if tok.kind != "word":
        return None
    low = tok.lower.strip("'-")
    if len(low) < 3 or low in _NOT_CONCEPT or "'" in low:
        return None
    if low.endswith("ly") and low not in _LY_NOUNS and len(low) > 4:
        return None  # adverbs (and -ly adjectives) are not topics
    if low.endswith("ed") and len(low) >= 6 and not low.endswith("eed"):
        return None  # past tenses and participles ("excited", "started")
    if len(low) >= 6 and low.endswith(_ADJECTIVE_ENDINGS) and low not in _SUFFIX_NOUNS:
        return None  # "powerful", "delicious", "priceless", "creative", "biggest"
    word = _singular(low)
    return None if word in _NOT_CONCEPT else word


# ---------------------------------------------------------------------------------------
# The offline extractor
# ---------------------------------------------------------------------------------------


@dataclass
class _Candidate:
    name: str
    kind: str  # "speaker" | "entity" | "phrase"
    type: str
    order: int  # first appearance in the window, for stable ties
    mentions: int = 0
    source_ids: list[str] = field(default_factory=list)
    capitalised: bool = False
    aliases: list[str] = field(default_factory=list)

    def attributes(self) -> dict[str, Any]:
        attributes: dict[str, Any] = {"kind": self.kind, "mentions": self.mentions}
        if self.aliases:
            attributes["aliases"] = list(self.aliases)
        return attributes

    def add_source(self, turn_id: str) -> None:
        if turn_id not in self.source_ids:
            self.source_ids.append(turn_id)

    def score(self) -> float:
        if self.kind == "speaker":
            return 2.0 + self.mentions
        if self.kind == "entity":
            return 1.0 + self.mentions + 0.5 * self.name.count(" ")
        words = self.name.count(" ") + 1
        return (
            self.mentions * (1.0 + 0.5 * (words - 1))
            + 0.25 * (len(self.source_ids) - 1)
            + 0.1 * min(len(self.name), 12) / 12
            + (0.25 if self.capitalised else 0.0)
        )


class OfflineExtractor(BaseExtractor):
    """Deterministic, model-free extractor that favours bridge concepts.

    What becomes a concept, in this priority order (the cap ``max_concepts`` keeps the
    first ones):

    1. speakers, typed ``"Person"``;
    2. named entities: runs of capitalised words that are not a sentence-initial common
       word ("The", "Yesterday", "Wow"), multiword names kept whole ("New York",
       "Dr. Seuss", "Lord of the Rings"), possessive ``'s`` stripped, typed ``"Entity"``.
       A name of one of the window's speakers, or a short form of it ("Mel" for
       "Melanie"), is that speaker's concept (short forms are listed in its
       ``attributes["aliases"]``). A lone capitalised word at the start of a sentence
       counts only when the window also writes it capitalised mid-sentence, or it is an
       acronym; otherwise it is treated as an ordinary word;
    3. key phrases, typed ``"Topic"``: lowercased content words and two-word phrases
       after removing stopwords, chat words, numbers and dates, plurals stripped by a
       simple rule ("ski trips" -> "ski trip"), ranked by frequency in the window, number
       of turns, length and capitalisation. A two-word phrase counts only when the window
       says it at least twice (a single one is mostly a verb and its object: "kid adore");
       its words stay concepts of their own.

    Each concept's ``source_ids`` are the ids of the turns that mention it (for a speaker:
    the turns they spoke or that name them); ``confidence = score / (score + 1)``;
    ``attributes`` holds ``{"kind": "speaker"|"entity"|"phrase", "mentions": n}``
    (``mentions`` counts occurrences in the window; for a speaker, turns spoken plus
    mentions by name).
    Named entities mentioned in the same turn are linked by
    ``Relation(a, "co_mentioned", b, weight=0.5)``, at most ``max_relations`` per window.

    A turn whose text starts with ``"<speaker>: "`` (the engine's episode text) has that
    prefix ignored, so the word after it counts as sentence-initial.

    >>> from synapse_integrations.types import Turn
    >>> ex = OfflineExtractor(max_concepts=3)
    >>> window = [Turn("a", "Yesterday we visited Dr. Seuss's museum.", speaker="Ann")]
    >>> [c.name for c in ex.extract(window).concepts]
    ['Ann', 'Dr. Seuss', 'museum']
    """

    def __init__(self, *, max_concepts: int = 12, max_relations: int = 5) -> None:
        if not _is_int(max_concepts) or max_concepts < 1:
            raise ConfigError(f"max_concepts must be a positive int, got {max_concepts!r}")
        if not _is_int(max_relations) or max_relations < 0:
            raise ConfigError(f"max_relations must be an int >= 0, got {max_relations!r}")
        self.max_concepts = max_concepts
        self.max_relations = max_relations

    def __repr__(self) -> str:
        return (
            f"OfflineExtractor(max_concepts={self.max_concepts}, "
            f"max_relations={self.max_relations})"
        )

    async def aextract(self, turns: Sequence[Turn]) -> Extraction:
        """Async twin of :meth:`extract`; runs inline (pure CPU work well under a millisecond)."""
        return self.extract(turns)

    def extract(self, turns: Sequence[Turn]) -> Extraction:
        """Extract speakers, named entities and key phrases from one window."""
        window = _check_turns(turns)
        if not window:
            return Extraction()

        # speakers and the names that refer to them
        speaker_keys: dict[str, str] = {}  # lowercased name or first name -> speaker name
        for turn in window:
            if turn.speaker and turn.speaker.strip():
                name = " ".join(turn.speaker.split())
                speaker_keys.setdefault(name.lower(), name)
                speaker_keys.setdefault(name.split()[0].lower(), name)

        tokenized = [(turn, _tokenize(_strip_speaker_prefix(turn))) for turn in window]

        # words the window writes capitalised mid-sentence: evidence that a capitalised
        # sentence-initial word is a name, not a common word
        known = set(speaker_keys)
        for _, tokens in tokenized:
            for tok in tokens:
                if not tok.initial and _is_capitalised(tok) and tok.lower not in _NOT_NAME_START:
                    known.add(tok.lower)

        candidates: dict[str, _Candidate] = {}
        order = 0

        def candidate(name: str, kind: str, type_: str) -> _Candidate:
            nonlocal order
            key = name.lower()
            found = candidates.get(key)
            if found is None:
                found = candidates[key] = _Candidate(name, kind, type_, order)
                order += 1
            elif _KIND_RANK[kind] < _KIND_RANK[found.kind]:  # a name beats a phrase
                found.name, found.kind, found.type = name, kind, type_
            return found

        for turn in window:
            if turn.speaker and turn.speaker.strip():
                cand = candidate(" ".join(turn.speaker.split()), "speaker", "Person")
                cand.mentions += 1
                cand.add_source(turn.id)

        co_mentions: list[tuple[str, str]] = []
        for turn, tokens in tokenized:
            taken: set[int] = set()
            turn_entities: list[str] = []
            for span in _name_spans(tokens, known):
                taken.update(span)
                name = _span_name(tokens, span)
                person = _speaker_for(name, speaker_keys)
                if person is not None:  # "Caroline", or "Mel" for the speaker "Melanie"
                    cand = candidate(person, "speaker", "Person")
                    if name.lower() != person.lower() and name not in cand.aliases:
                        cand.aliases.append(name)
                else:
                    cand = candidate(name, "entity", "Entity")
                cand.mentions += 1
                cand.add_source(turn.id)
                if cand.name not in turn_entities:
                    turn_entities.append(cand.name)
            for a in range(len(turn_entities)):
                for b in range(a + 1, len(turn_entities)):
                    co_mentions.append((turn_entities[a], turn_entities[b]))

            previous: str | None = None  # the content word just before, for phrases
            for i, tok in enumerate(tokens):
                word = None if i in taken else _content_word(tok)
                if word is None:
                    previous = None
                    continue
                cand = candidate(word, "phrase", "Topic")
                cand.mentions += 1
                cand.add_source(turn.id)
                cand.capitalised |= tok.base[:1].isupper()
                if previous is not None:
                    pair = candidate(f"{previous} {word}", "phrase", "Topic")
                    pair.mentions += 1
                    pair.add_source(turn.id)
                previous = word

        # a two-word phrase said once is mostly noise ("kid adore"); said twice it is a
        # topic of the window ("dance studio")
        ranked = [
            c
            for c in candidates.values()
            if not (c.kind == "phrase" and " " in c.name and c.mentions < _MIN_PHRASE_MENTIONS)
        ]
        ranked.sort(key=lambda c: (_KIND_RANK[c.kind], -c.score(), c.order))
        kept = ranked[: self.max_concepts]

        concepts = tuple(
            Concept(
                name=c.name,
                type=c.type,
                confidence=round(c.score() / (c.score() + 1.0), 3),
                attributes=c.attributes(),
                source_ids=tuple(c.source_ids),
            )
            for c in kept
        )
        kept_names = {c.name for c in kept if c.kind != "phrase"}
        relations: list[Relation] = []
        seen_pairs: set[frozenset[str]] = set()
        for a, b in co_mentions:
            pair = frozenset((a, b))
            if len(relations) >= self.max_relations:
                break
            if a in kept_names and b in kept_names and pair not in seen_pairs:
                seen_pairs.add(pair)
                relations.append(Relation(a, "co_mentioned", b, weight=0.5))
        return Extraction(concepts=concepts, relations=tuple(relations))


_KIND_RANK = {"speaker": 0, "entity": 1, "phrase": 2}
_MIN_PHRASE_MENTIONS = 2


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strip_speaker_prefix(turn: Turn) -> str:
    """The turn's text without a leading ``"<speaker>: "`` (the engine's episode text)."""
    text = turn.text
    if turn.speaker:
        speaker = turn.speaker.strip()
        head = text.lstrip()
        if speaker and head[: len(speaker)].lower() == speaker.lower():
            rest = head[len(speaker) :].lstrip()
            if rest.startswith(":"):
                return rest[1:]
    return text


def _name_spans(tokens: list[_Token], known: set[str]) -> Iterable[list[int]]:
    """Token index lists of the named entities in one turn."""
    n = len(tokens)
    i = 0
    while i < n:
        if not _is_capitalised(tokens[i]):
            i += 1
            continue
        span = [i]
        k = i
        while not tokens[k].possessive:
            nxt = k + 1
            if nxt < n and _is_capitalised(tokens[nxt]):
                span.append(nxt)
                k = nxt
                continue
            # "of" / "of the" / "van" ... between two capitalised words
            links = []
            m = nxt
            while m < n and len(links) < 2 and tokens[m].text in _CONNECTORS:
                links.append(m)
                m += 1
            if links and tokens[links[0]].text != "the" and m < n and _is_capitalised(tokens[m]):
                span.extend([*links, m])
                k = m
                continue
            break
        i = k + 1
        # drop function and chat words from the front ("The", "Yesterday", "Wow", "Hey");
        # at the start of a sentence also a common verb or "-ing" word ("Go Jon",
        # "Learning German"), unless it often opens names ("New York")
        at_start = tokens[span[0]].initial
        while span and _not_name_start(tokens[span[0]], at_start):
            span.pop(0)
        while span and _not_name_start(tokens[span[-1]], False):
            span.pop()
        if not span:
            continue
        if len(span) == 1:
            tok = tokens[span[0]]
            if tok.kind == "title":
                continue
            if tok.lower in _GENERIC and tok.lower not in known:
                continue
            acronym = tok.base.isupper() and len(tok.base) > 1
            if tok.initial and not acronym and tok.lower not in known:
                continue  # a capitalised word that may just start the sentence
        yield span


def _not_name_start(tok: _Token, at_start: bool) -> bool:
    low = tok.lower
    if low in _NOT_NAME_START or tok.text in _CONNECTORS:
        return True
    return at_start and low not in _NAME_OPENERS and (low in _GENERIC or low.endswith("ing"))


def _span_name(tokens: list[_Token], span: list[int]) -> str:
    words = [tokens[i].base if i == span[-1] else tokens[i].text for i in span]
    return " ".join(words).strip("'-")


def _speaker_for(name: str, speaker_keys: dict[str, str]) -> str | None:
    """The speaker a name refers to: the full name, the first name, or a short form of it."""
    low = name.lower()
    if low in speaker_keys:
        return speaker_keys[low]
    if " " not in low and len(low) >= 2:
        for key, speaker in speaker_keys.items():
            if " " not in key and len(key) > len(low) and key.startswith(low):
                return speaker
    return None


# ---------------------------------------------------------------------------------------
# Measuring an extractor on windows
# ---------------------------------------------------------------------------------------


def window_stats(extractor: Extractor, windows: Iterable[Sequence[Turn]]) -> dict[str, Any]:
    """Run ``extractor`` on each window and summarise what it produced.

    An *entity* here is a concept not typed ``"Topic"`` whose name is not one of the
    window's speakers. Timings are wall-clock per :meth:`~Extractor.extract` call.

    Returns a JSON-ready dict: ``windows``, ``concepts_mean``, ``concepts_median``,
    ``concepts_max``, ``relations_mean``, ``entity_window_share`` (windows with at least
    one entity), ``distinct_concepts`` (distinct lowercased names over all windows),
    ``recurring_concept_share`` (share of those names produced by two windows or more),
    ``types`` (concept count per type), ``ms_mean``, ``ms_median``, ``ms_p95``.

    >>> from synapse_integrations.types import Turn
    >>> w = [
    ...     [Turn("a", "I play chess with Mark.", speaker="Ann")],
    ...     [Turn("b", "Is Mark good at chess?")],
    ... ]
    >>> s = window_stats(OfflineExtractor(), w)
    >>> s["windows"], s["concepts_mean"], s["entity_window_share"], s["recurring_concept_share"]
    (2, 2.5, 1.0, 0.6667)
    """
    per_window: list[int] = []
    n_relations: list[int] = []
    with_entity = 0
    timings: list[float] = []
    seen_in: dict[str, int] = {}
    types: dict[str, int] = {}
    for window in windows:
        turns = tuple(window)
        speakers = {t.speaker.strip().lower() for t in turns if t.speaker}
        start = time.perf_counter()
        result = extractor.extract(turns)
        timings.append((time.perf_counter() - start) * 1000.0)
        per_window.append(len(result.concepts))
        n_relations.append(len(result.relations))
        if any(c.type != "Topic" and c.name.lower() not in speakers for c in result.concepts):
            with_entity += 1
        for name in {c.name.lower() for c in result.concepts}:
            seen_in[name] = seen_in.get(name, 0) + 1
        for c in result.concepts:
            types[c.type] = types.get(c.type, 0) + 1
    n = len(per_window)
    if n == 0:
        return {"windows": 0}
    ordered = sorted(timings)
    return {
        "windows": n,
        "concepts_mean": round(statistics.fmean(per_window), 3),
        "concepts_median": statistics.median(per_window),
        "concepts_max": max(per_window),
        "relations_mean": round(statistics.fmean(n_relations), 3),
        "entity_window_share": round(with_entity / n, 4),
        "distinct_concepts": len(seen_in),
        "recurring_concept_share": round(
            sum(1 for c in seen_in.values() if c >= 2) / len(seen_in), 4
        )
        if seen_in
        else 0.0,
        "types": dict(sorted(types.items())),
        "ms_mean": round(statistics.fmean(timings), 4),
        "ms_median": round(statistics.median(timings), 4),
        "ms_p95": round(ordered[min(n - 1, math.ceil(0.95 * n) - 1)], 4),
    }


# ---------------------------------------------------------------------------------------
# The LLM extractor
# ---------------------------------------------------------------------------------------


def _clamp01(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number between 0 and 1")
    return min(1.0, max(0.0, value))


class ExtractedNode(BaseModel):
    """One node of the extraction schema (appendix A.2, task 1)."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(description="short canonical name, reused when the same thing comes up again")
    type: str = Field(
        default="Concept",
        description="Person, Identity, Preference, Event, Technical, Place, Object or Concept",
    )
    confidence: float = Field(default=1.0, description="how sure the fact is, 0 to 1")
    attributes: dict[str, Any] = Field(
        default_factory=dict, description="optional short details (date, place, detail)"
    )

    @model_validator(mode="before")
    @classmethod
    def _lenient_keys(cls, data: Any) -> Any:
        """Accept ``attr``/``attrs`` and loose extra keys (``time``...) as attributes."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        given = data.get("attributes")
        attributes = dict(given) if isinstance(given, dict) else {}
        if isinstance(given, str) and given.strip():
            attributes["detail"] = given
        for key in ("attr", "attrs"):
            if key in data:
                value = data.pop(key)
                if isinstance(value, dict):
                    attributes.update(value)
                elif value not in (None, ""):
                    attributes["detail"] = value
        for key in list(data):
            if key not in ("name", "type", "confidence", "attributes"):
                attributes[key] = data.pop(key)
        data["attributes"] = attributes
        return data

    @field_validator("name", "type")
    @classmethod
    def _strip(cls, value: str) -> str:
        return " ".join(value.split())

    @field_validator("confidence")
    @classmethod
    def _clamp(cls, value: float) -> float:
        return _clamp01(value)


class ExtractedEdge(BaseModel):
    """One edge of the extraction schema (appendix A.2, task 2)."""

    model_config = ConfigDict(extra="ignore")

    src: str = Field(description="name of a node in the nodes list")
    rel: str = Field(description="short relation label in UPPER_SNAKE_CASE, e.g. HAS_INTEREST")
    tgt: str = Field(description="name of a node in the nodes list")
    weight: float = Field(default=1.0, description="strength of the link, 0 to 1")

    @model_validator(mode="before")
    @classmethod
    def _lenient_keys(cls, data: Any) -> Any:
        """Accept the short key ``w`` for ``weight``."""
        if isinstance(data, dict) and "weight" not in data and "w" in data:
            data = {**data, "weight": data["w"]}
        return data

    @field_validator("src", "rel", "tgt")
    @classmethod
    def _strip(cls, value: str) -> str:
        return " ".join(value.split())

    @field_validator("weight")
    @classmethod
    def _clamp(cls, value: float) -> float:
        return _clamp01(value)


class ExtractionSchema(BaseModel):
    """What the LLM extractor asks the model for: nodes and the edges between them."""

    model_config = ConfigDict(extra="ignore")

    nodes: list[ExtractedNode] = Field(default_factory=list)
    edges: list[ExtractedEdge] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _lenient_shape(cls, data: Any) -> Any:
        """Accept a bare list of nodes, and ``concepts``/``relations`` as key names."""
        if isinstance(data, list):
            return {"nodes": data}
        if isinstance(data, dict):
            data = dict(data)
            if "nodes" not in data and "concepts" in data:
                data["nodes"] = data.pop("concepts")
            if "edges" not in data and "relations" in data:
                data["edges"] = data.pop("relations")
            if "nodes" not in data:
                raise ValueError('the JSON object needs a "nodes" list')
        return data


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


def _message_text(message: Any) -> str:
    """The text of a chat message (string content or a list of content blocks)."""
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


def _parse_json(text: str) -> Any:
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


def _mentions(name: str, turns: Sequence[Turn]) -> tuple[str, ...]:
    """Ids of the turns that mention ``name`` (case-insensitive, whole words) or that
    ``name`` spoke."""
    pattern = re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)", re.IGNORECASE)
    low = name.lower()
    return tuple(
        t.id
        for t in turns
        if pattern.search(t.text) or (t.speaker is not None and t.speaker.strip().lower() == low)
    )


def _to_extraction(
    payload: ExtractionSchema, turns: Sequence[Turn], max_concepts: int | None
) -> Extraction:
    """Validated schema -> Extraction: empty names dropped, duplicates merged, edges checked."""
    concepts: list[Concept] = []
    canonical: dict[str, str] = {}
    for node in payload.nodes:
        key = node.name.lower()
        if not node.name or key in canonical:
            continue
        if max_concepts is not None and len(concepts) >= max_concepts:
            break
        canonical[key] = node.name
        concepts.append(
            Concept(
                name=node.name,
                type=node.type or "Concept",
                confidence=node.confidence,
                attributes=dict(node.attributes),
                source_ids=_mentions(node.name, turns),
            )
        )
    relations: list[Relation] = []
    seen: set[tuple[str, str, str]] = set()
    dropped = 0
    for edge in payload.edges:
        src, tgt = canonical.get(edge.src.lower()), canonical.get(edge.tgt.lower())
        if src is None or tgt is None or not edge.rel or src == tgt:
            dropped += 1
            continue
        if (src, edge.rel, tgt) in seen:
            continue
        seen.add((src, edge.rel, tgt))
        relations.append(Relation(src, edge.rel, tgt, weight=edge.weight))
    if dropped:
        logger.debug("dropped %d edge(s) that do not join two extracted nodes", dropped)
    return Extraction(concepts=tuple(concepts), relations=tuple(relations))


@dataclass(frozen=True)
class _Failed:
    """Marker returned by the dialogue when the fallback extractor must answer."""

    reason: str
    error: BaseException | None = None


class LLMExtractor(BaseExtractor):
    """Schema-guided extraction with any LangChain chat model (SYNAPSE appendix A.2).

    The model is asked for ``{"nodes": [...], "edges": [...]}`` (see
    :class:`ExtractionSchema`). When the model supports ``with_structured_output`` it
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
        if max_concepts is not None and (not _is_int(max_concepts) or max_concepts < 1):
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

    def extract(self, turns: Sequence[Turn]) -> Extraction:
        """Extract nodes and edges from one window with the chat model."""
        window = _check_turns(turns)
        if not window:
            return Extraction()
        dialogue = self._dialogue(window)
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
            return self.fallback.extract(window)
        return outcome

    async def aextract(self, turns: Sequence[Turn]) -> Extraction:
        """Async twin of :meth:`extract` (uses the model's ``ainvoke``)."""
        window = _check_turns(turns)
        if not window:
            return Extraction()
        dialogue = self._dialogue(window)
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
            return await self.fallback.aextract(window)
        return outcome

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
        self, window: tuple[Turn, ...]
    ) -> Generator[tuple[Any, list[Any]], Any, Extraction | _Failed]:
        """The conversation with the model, free of I/O: yields (runnable, messages) and
        receives the model's answer (or the exception it raised)."""
        lc = _require_langchain()
        messages: list[Any] = [
            lc.SystemMessage(content=self.system_prompt),
            lc.HumanMessage(content=_render_window(window)),
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
                return _to_extraction(payload, window, self.max_concepts)
            logger.info("malformed extraction reply (attempt %d): %s", attempt + 1, problem)
            retry = (
                f"Your answer could not be used: {problem}. Answer again with only the JSON "
                'object {"nodes": [...], "edges": [...]} described above.'
            )
            if self._structured is None and raw is not None:  # show the model its answer
                messages = [*messages, lc.AIMessage(content=_message_text(raw))]
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
                return (raw, *_validate(parsed))
            if error is not None:
                return raw, None, _short_error(error)
            text = _message_text(raw) if raw is not None else ""
            if text.strip():  # some models answer in text despite the tool
                try:
                    return (raw, *_validate(_parse_json(text)))
                except ValueError as exc:
                    return raw, None, str(exc)
            return raw, None, "no structured answer was returned"
        try:
            return (response, *_validate(_parse_json(_message_text(response))))
        except ValueError as exc:
            return response, None, str(exc)

    def _count_tokens(self, raw: Any) -> None:
        usage = getattr(raw, "usage_metadata", None)
        if not usage:
            return
        with self._lock:
            self._stats.input_tokens += int(usage.get("input_tokens", 0) or 0)
            self._stats.output_tokens += int(usage.get("output_tokens", 0) or 0)


def _validate(value: Any) -> tuple[ExtractionSchema | None, str]:
    try:
        return ExtractionSchema.model_validate(value), ""
    except ValidationError as exc:
        return None, _short_error(exc)


def _short_error(error: BaseException) -> str:
    if isinstance(error, ValidationError):
        parts = []
        for item in error.errors()[:5]:
            where = ".".join(str(p) for p in item.get("loc", ())) or "reply"
            parts.append(f"{where}: {item.get('msg', 'invalid')}")
        return "; ".join(parts)
    text = str(error).strip().replace("\n", " ")
    return text[:300] or type(error).__name__


def _render_window(window: Sequence[Turn]) -> str:
    """The window as the model sees it: one line per turn, ``[id] speaker: text``."""
    lines = ["Conversation turns:"]
    for turn in window:
        text = " ".join(turn.text.split())
        if turn.speaker and not text.lower().startswith(turn.speaker.strip().lower() + ":"):
            text = f"{turn.speaker.strip()}: {text}"
        when = ""
        if turn.timestamp is not None:
            when = f" ({turn.timestamp.isoformat(sep=' ', timespec='minutes')})"
        lines.append(f"[{turn.id}]{when} {text}")
    return "\n".join(lines)
