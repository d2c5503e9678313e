"""The offline extractor: deterministic, model-free concept extraction.

:class:`OfflineExtractor` and its machinery: the tokenizer, content words, name spans
and the candidate ranking. The word lists it reads live in
:mod:`~synapse_integrations.core.text.lexicon`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ....errors import ConfigError
from ....types import Concept, Extraction, Relation, Turn
from ...text.documents import without_speaker
from ...text.lexicon import (
    ADJECTIVE_ENDINGS,
    DATE_WORDS,
    IE_WORDS,
    KEEP_PLURAL,
    LY_NOUNS,
    NAME_OPENERS,
    NOT_CONCEPT,
    NOT_NAME_START,
    SUFFIX_NOUNS,
)
from ...text.lexicon import GENERIC_CONCEPT_WORDS as GENERIC
from ...text.lexicon import NAME_CONNECTORS as CONNECTORS
from ...text.lexicon import NAME_TITLES as TITLES
from .protocol import BaseExtractor, check_turns, is_int

__all__ = ["OfflineExtractor"]


_TOKEN_RE = re.compile(
    r"(?P<title>\b(?:(?:" + "|".join(TITLES) + r")\.|[A-Z]\.(?=\s*[A-Z])))"
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
            if after and after.group(1).lower() in NOT_NAME_START:  # ... or "an A. Then"
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
    if low in DATE_WORDS or low in ("i", "i'm", "i've", "i'll", "i'd"):
        return False
    if tok.base.isupper() and len(tok.base) > 1:
        # all caps: an acronym ("LGBTQ", "NYC"), unless it is shouting ("JUST DOING IT")
        return len(tok.base) <= 5 and low not in NOT_CONCEPT
    return True


def _singular(word: str) -> str:
    """Light plural stripping: ``stories -> story``, ``classes -> class``, ``kids -> kid``."""
    if len(word) <= 3 or word in KEEP_PLURAL or "-" in word[-3:]:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-1] if word[:-1] in IE_WORDS else word[:-3] + "y"
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
    if len(low) < 3 or low in NOT_CONCEPT or "'" in low:
        return None
    if low.endswith("ly") and low not in LY_NOUNS and len(low) > 4:
        return None  # adverbs (and -ly adjectives) are not topics
    if low.endswith("ed") and len(low) >= 6 and not low.endswith("eed"):
        return None  # past tenses and participles ("excited", "started")
    if len(low) >= 6 and low.endswith(ADJECTIVE_ENDINGS) and low not in SUFFIX_NOUNS:
        return None  # "powerful", "delicious", "priceless", "creative", "biggest"
    word = _singular(low)
    return None if word in NOT_CONCEPT else word


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

    def __init__(self, *, max_concepts: int = 12, max_relations: int = 5,
                 per_turn: int = 0) -> None:
        if not is_int(max_concepts) or max_concepts < 1:
            raise ConfigError(f"max_concepts must be a positive int, got {max_concepts!r}")
        if not is_int(max_relations) or max_relations < 0:
            raise ConfigError(f"max_relations must be an int >= 0, got {max_relations!r}")
        if not is_int(per_turn) or per_turn < 0:
            raise ConfigError(f"per_turn must be an int >= 0, got {per_turn!r}")
        self.max_concepts = max_concepts
        self.max_relations = max_relations
        self.per_turn = per_turn

    def __repr__(self) -> str:
        return (
            f"OfflineExtractor(max_concepts={self.max_concepts}, "
            f"max_relations={self.max_relations}, per_turn={self.per_turn})"
        )

    async def aextract(self, turns: Sequence[Turn], *, names: Iterable[str] = ()) -> Extraction:
        """Async twin of :meth:`extract`; runs inline (pure CPU work well under a millisecond)."""
        return self.extract(turns, names=names)

    def extract(self, turns: Sequence[Turn], *, names: Iterable[str] = ()) -> Extraction:
        """Extract speakers, named entities and key phrases from one window.

        ``names``: names the memory already holds (its entities and people, any case; the
        consolidator passes them). A one-word name said only at the start of a sentence in
        this window is still that name, not a common word: "Agnes showed up with a cake"
        yields the entity ``Agnes`` once an earlier window named her, where alone it would
        yield the plural-stripped topic "agne".

        >>> from synapse_integrations.types import Turn
        >>> w = [Turn("t", "Agnes baked a lemon cake.", speaker="Nate")]
        >>> [c.name for c in OfflineExtractor().extract(w).concepts][:2]
        ['Nate', 'agne']
        >>> [c.name for c in OfflineExtractor().extract(w, names=["Agnes"]).concepts][:2]
        ['Nate', 'Agnes']
        """
        window = check_turns(turns)
        if not window:
            return Extraction()

        # speakers and the names that refer to them
        speaker_keys: dict[str, str] = {}  # lowercased name or first name -> speaker name
        for turn in window:
            if turn.speaker and turn.speaker.strip():
                name = " ".join(turn.speaker.split())
                speaker_keys.setdefault(name.lower(), name)
                speaker_keys.setdefault(name.split()[0].lower(), name)

        # the turn's own words, without the "<speaker>: " the engine's episode text opens with
        tokenized = [(turn, _tokenize(without_speaker(turn.speaker, turn.text)))
                     for turn in window]

        # words the window writes capitalised mid-sentence: evidence that a capitalised
        # sentence-initial word is a name, not a common word
        known = set(speaker_keys) | {n.lower() for n in names}
        for _, tokens in tokenized:
            for tok in tokens:
                if not tok.initial and _is_capitalised(tok) and tok.lower not in NOT_NAME_START:
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
        kept = _fair_share(ranked, [t.id for t in window], self.per_turn, self.max_concepts)

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


def _fair_share(ranked: list[_Candidate], turn_ids: list[str], per_turn: int,
                budget: int) -> list[_Candidate]:
    """The ``budget`` concepts kept when each turn may link to at most ``per_turn`` concepts
    besides the speakers (0: no limit, ``ranked[:budget]`` unchanged).

    The speakers come first; then, round after round, each turn in order takes its best
    concept not yet kept, until every turn has ``per_turn`` or the budget is spent; a
    concept's ``source_ids`` keep only the turns that took it or that it was kept for
    anyway. A long turn with many frequent words can neither use up the window's budget
    and leave a short turn with no concept of its own, nor collect links (and with them
    activation) just by being long.
    """
    if per_turn <= 0:
        return ranked[:budget]
    kept = [c for c in ranked if c.kind == "speaker"][:budget]
    chosen: dict[str, list[_Candidate]] = {t: [] for t in turn_ids}
    for _ in range(per_turn):
        for tid in turn_ids:
            mine = chosen[tid]
            if len(kept) >= budget or len(mine) >= per_turn:
                continue
            # the turn's best concept: one already kept (costs nothing) or the next new one
            for c in ranked:
                if c.kind != "speaker" and tid in c.source_ids and c not in mine:
                    mine.append(c)
                    if c not in kept:
                        kept.append(c)
                    break
    for c in kept:
        if c.kind != "speaker":
            c.source_ids = [t for t in c.source_ids if c in chosen.get(t, ())]
    return kept


_KIND_RANK = {"speaker": 0, "entity": 1, "phrase": 2}
_MIN_PHRASE_MENTIONS = 2


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
            while m < n and len(links) < 2 and tokens[m].text in CONNECTORS:
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
            if tok.lower in GENERIC and tok.lower not in known:
                continue
            acronym = tok.base.isupper() and len(tok.base) > 1
            if tok.initial and not acronym and tok.lower not in known:
                continue  # a capitalised word that may just start the sentence
        yield span


def _not_name_start(tok: _Token, at_start: bool) -> bool:
    low = tok.lower
    if low in NOT_NAME_START or tok.text in CONNECTORS:
        return True
    return at_start and low not in NAME_OPENERS and (low in GENERIC or low.endswith("ing"))


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
