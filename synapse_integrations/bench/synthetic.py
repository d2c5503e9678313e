"""Synthetic conversations for ``bench perf`` (and tests that need many turns): turns
among a cast of generated speakers, places and pets, questions about them, and questions
naming a speaker. Deterministic for a seed; no model involved.

>>> from synapse_integrations.bench.synthetic import synthetic_turns
>>> len(synthetic_turns(40, seed=1)) == 40
True
"""

from __future__ import annotations

import random
from typing import Any

from ..errors import InvalidInputError

__all__ = ["speaker_queries", "synthetic_queries", "synthetic_turns"]

_SYLLABLES = ("ka", "lo", "mi", "ren", "sa", "do", "vi", "ta", "nor", "el", "ber", "an", "jo",
              "ris", "ma", "lu", "de", "fen", "ga", "ty")
_PLACE_SUFFIX = ("ville", "ton", " Bay", " Park", "burg", " Lake", " Hills", "field")
_TOPICS = (
    "ski trip", "pottery class", "vet school", "marathon", "book club", "garden", "guitar",
    "painting", "camping", "job interview", "promotion", "wedding", "birthday party", "puppy",
    "cat", "new apartment", "road trip", "cooking class", "yoga", "swimming", "chess",
    "photography", "concert", "museum", "hiking", "volunteering", "charity run", "startup",
    "exam", "thesis", "piano", "dance class", "bakery", "podcast", "novel", "surfing",
    "climbing", "soccer game", "art show", "family dinner", "vacation", "flight", "camera",
    "bike", "car repair", "doctor visit", "therapy", "meditation", "recipe", "festival",
)
_ACTIVITIES = ("went", "planned", "talked about", "finished", "started", "cancelled",
               "loved", "worried about", "signed up for", "remembered")
_WHEN = ("yesterday", "last week", "last weekend", "this morning", "two days ago",
         "last month", "on Friday", "over the summer")
_TEMPLATES = (
    "I {act} the {topic} with {person} in {place} {when}.",
    "{person} told me about the {topic} {when}, it was in {place}.",
    "Did you hear that {person} {act} the {topic}?",
    "We {act} the {topic} {when}; {person} and {person2} came along.",
    "My {topic} in {place} was amazing, {person} took photos.",
    "{person} is thinking about a {topic} near {place}.",
    "Honestly the {topic} made me think of {person} and our time in {place}.",
    "How is {person} doing after the {topic}?",
    "I {act} my {topic} and {topic2} {when}.",
    "{person2} recommended a {topic} in {place} to {person}.",
)
_QUESTION_TEMPLATES = (
    "What did {person} do in {place}?",
    "When did {person} go to the {topic}?",
    "Who came to the {topic} with {person}?",
    "What does {person} think about {topic}?",
    "Where was the {topic}?",
    "What happened {when} with {person}?",
)


#: Questions that name one of the conversations' speakers, as most questions of a
#: conversation's memory do; the gate's checks then read whom each turn is about. One asks
#: a detail never said (the gate's presence check reads the evidence found by meaning).
_SPEAKER_TEMPLATES = (
    "What did {speaker} say about the {topic}?",
    "When did {speaker} go to {place}?",
    "Who did {speaker} meet at the {topic}?",
    "What is the name of {speaker}'s {pet}?",
)
_PETS = ("goldfish", "tortoise", "hamster", "parrot")


def _name(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(parts)).capitalize()


def _vocab(seed: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    people = sorted({_name(rng, rng.choice((2, 3))) for _ in range(400)})
    places = sorted({_name(rng, 2) + rng.choice(_PLACE_SUFFIX) for _ in range(150)})
    speakers = people[:40]
    return {"people": people[40:], "places": places, "speakers": speakers}


def synthetic_turns(n: int, *, seed: int = 0, session_len: int = 20,
                    start_ts: float = 1_600_000_000.0) -> list[dict[str, Any]]:
    """``n`` conversation-like turns (``{"text", "speaker", "timestamp", "id"}``).

    Sessions of ``session_len`` turns between two of 40 recurring speakers, one day apart,
    two minutes between turns; texts mention recurring people, places and topics, so the
    offline extractor finds concepts that recur across sessions. Deterministic in ``seed``.

    >>> t = synthetic_turns(3, seed=1)
    >>> len(t), t[0]["id"], t[0]["text"].startswith(t[0]["speaker"] + ": ")
    (3, 'syn-0', True)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InvalidInputError(f"n must be an int >= 0, got {n!r}")
    voc = _vocab(seed)
    rng = random.Random(seed + 1)
    # a Zipf-like preference: a few people, places and topics come up again and again
    people_w = [1.0 / (r + 1) ** 0.8 for r in range(len(voc["people"]))]
    place_w = [1.0 / (r + 1) ** 0.8 for r in range(len(voc["places"]))]
    out = []
    pair: tuple[str, str] = ("", "")
    for i in range(n):
        session, pos = divmod(i, session_len)
        if pos == 0:
            pair = tuple(rng.sample(voc["speakers"], 2))  # type: ignore[assignment]
        speaker = pair[pos % 2]
        person, person2 = rng.choices(voc["people"], weights=people_w, k=2)
        text = rng.choice(_TEMPLATES).format(
            act=rng.choice(_ACTIVITIES), topic=rng.choice(_TOPICS), topic2=rng.choice(_TOPICS),
            person=person, person2=person2,
            place=rng.choices(voc["places"], weights=place_w)[0], when=rng.choice(_WHEN))
        out.append({"text": f"{speaker}: {text}", "speaker": speaker,
                    "timestamp": start_ts + session * 86_400.0 + pos * 120.0, "id": f"syn-{i}"})
    return out


def synthetic_queries(n: int, *, seed: int = 0) -> list[str]:
    """``n`` questions about the people, places and topics of :func:`synthetic_turns`."""
    voc = _vocab(seed)
    rng = random.Random(seed + 7)
    return [rng.choice(_QUESTION_TEMPLATES).format(
        person=rng.choice(voc["people"][:120]), place=rng.choice(voc["places"][:60]),
        topic=rng.choice(_TOPICS), when=rng.choice(_WHEN)) for _ in range(n)]


def speaker_queries(n: int, *, seed: int = 0) -> list[str]:
    """``n`` questions naming one of the recurring speakers of :func:`synthetic_turns`
    (each speaker in turn), a quarter of them about a pet nobody mentions.

    >>> qs = speaker_queries(4, seed=1)
    >>> len(qs), qs[3].startswith("What is the name of "), qs == speaker_queries(4, seed=1)
    (4, True, True)
    """
    voc = _vocab(seed)
    rng = random.Random(seed + 11)
    return [_SPEAKER_TEMPLATES[i % len(_SPEAKER_TEMPLATES)].format(
        speaker=voc["speakers"][i % len(voc["speakers"])], topic=rng.choice(_TOPICS),
        place=rng.choice(voc["places"][:60]), pet=rng.choice(_PETS)) for i in range(n)]
