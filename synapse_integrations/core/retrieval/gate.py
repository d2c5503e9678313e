"""The evidence gate (issue 11): does the retrieved evidence support *this* question?

SYNAPSE's uncertainty gate (section 3.4) rejects a query when the best memory is too far
from it (``topic``: the top item's similarity below ``gate_tau``). That catches questions
on topics memory never saw, but not the questions an agent meets most: a topic memory holds,
asked about the wrong person ("What did Caroline realize after her charity race?" when
Melanie ran it), or a detail never said ("What is Sam's dog called?" in a memory that talks
about Sam but never about a dog). Two offline checks read the evidence for that:

* ``attribution``: the question names exactly one of the memory's speakers. Over the
  question's **attribute terms** (its content words, minus the speakers' names and a few
  question-frame words, see :func:`attribute_terms`), each turn's *coverage* is the share
  of their IDF mass it contains (:meth:`~synapse_integrations.core.index.bm25.BM25Index.coverage`).
  Each turn is *about* its speaker, or about the person it addresses (:func:`turn_about`).
  If a turn not about the named person covers the terms by more than
  ``gate_attribution_margin`` beyond the best turn about them, the evidence is about
  someone else: rejected.
* ``presence``: the named speaker's (or, with no one named, any) turn must cover at least
  ``gate_presence_min`` of the attribute terms' IDF weight (words memory never saw weigh
  as much as the rarest word). A turn covers a term when it holds it in some inflection,
  or, for the few memories the retrieval placed first, when a concept linked to it or
  one of its own words is within cosine ``gate_presence_similarity`` of the term's own
  embedding ("dog" is held by a turn that mentions a "puppy", :func:`semantic_cover`): a
  question whose specific words no turn about the person holds, in words or in meaning,
  is about something never said.

Each check is a pure function of arrays here; :func:`decide` combines them in the order
topic -> attribution -> presence and says which check failed, on which evidence. The
decisions and their measured curves are in docs/gate.md.

>>> attribute_terms("What did Caroline realize after her charity race?", ["Caroline", "Melanie"])
['realize', 'charity', 'race']
>>> named_subjects("What is Melanie's dog called?", ["Caroline", "Melanie"])
['Melanie']
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from ...types import GateVerdict
from ..graph.roles import distinct_speakers, speaker_names
from ..kernels import scoring
from ..text.lexicon import FIRST_PERSON, SECOND_PERSON
from ..text.subjects import attribute_terms, named_subjects
from ..text.tokens import tokenize

if TYPE_CHECKING:
    from ...config import SynapseConfig
    from ..graph.graph import Compiled
    from ..index.bm25 import BM25Index

__all__ = ["EVIDENCE_TURNS", "attribution_gap", "concept_links",
           "decide", "evaluate", "inflections", "presence", "resolve_terms",
           "semantic_cover", "term_presence", "turn_about"]

#: embeds words (one unit row each), e.g. the engine's cached concept-name embedder
WordVectors = Callable[[Sequence[str]], np.ndarray]

#: How many of the memories the retrieval placed first presence reads by meaning (their
#: linked concepts and their own words).
EVIDENCE_TURNS = 5


def inflections(term: str) -> list[str]:
    """``term`` and its regular English inflections (plural, past, gerund), ``term`` first:
    the forms a memory may hold a question's word in ("camped" -> "camping", "dogs" ->
    "dog").

    >>> inflections("dogs")[:2], "camping" in inflections("camped"), "studies" in inflections("study")
    (['dogs', 'dog'], True, True)
    """
    stems = [term]
    for suffix, add in (("ies", "y"), ("es", ""), ("s", ""), ("ed", ""), ("ed", "e"), ("ing", ""),
                        ("ing", "e"), ("d", "")):
        if term.endswith(suffix) and len(term) - len(suffix) >= 3:
            stems.append(term[: -len(suffix)] + add)
    out = list(stems)
    for stem in stems:
        base = stem[:-1] if stem.endswith("e") else stem
        out += [stem + "s", stem + "es", base + "ed", base + "ing", stem + "d",
                stem[:-1] + "ies" if stem.endswith("y") else stem + "s"]
    return list(dict.fromkeys(t for t in out if len(t) >= 2))


def resolve_terms(terms: Sequence[str], has: Callable[[str], bool]) -> list[str]:
    """Each term as the first of its :func:`inflections` that ``has`` finds (the term itself
    when none is), once each.

    >>> resolve_terms(["dogs", "hamster"], {"dog"}.__contains__)
    ['dog', 'hamster']
    """
    return list(dict.fromkeys(next((f for f in inflections(t) if has(f)), t) for t in terms))


def attribution_gap(coverage: np.ndarray, subject: np.ndarray,
                    other: np.ndarray) -> tuple[float, int, int]:
    """``(gap, best_other, best_subject)``: how much better the best ``other`` turn covers
    the attribute terms than the best ``subject`` turn (positions, -1 when there is none).

    >>> attribution_gap(np.array([0.2, 0.9, 0.5]), np.array([True, False, True]),
    ...                 np.array([False, True, False]))
    (0.4, 1, 2)
    """
    cov = np.asarray(coverage, dtype=np.float64)
    best_s = int(np.argmax(np.where(subject, cov, -1.0))) if np.any(subject) else -1
    best_o = int(np.argmax(np.where(other, cov, -1.0))) if np.any(other) else -1
    s = float(cov[best_s]) if best_s >= 0 else 0.0
    o = float(cov[best_o]) if best_o >= 0 else 0.0
    return round(o - s, 12), best_o, best_s


def presence(coverage: np.ndarray, allowed: np.ndarray, seen_share: float) -> tuple[float, int]:
    """``(share, position)``: the best coverage among ``allowed`` turns, scaled by the share
    of the attribute terms' weight that memory holds at all (``seen_share``: words no turn
    contains count as uncovered).

    >>> presence(np.array([0.5, 1.0]), np.array([True, True]), 0.5)
    (0.5, 1)
    """
    cov = np.asarray(coverage, dtype=np.float64)
    if not np.any(allowed):
        return 0.0, -1
    best = int(np.argmax(np.where(allowed, cov, -1.0)))
    return float(cov[best]) * float(seen_share), best


def semantic_cover(term_vecs: np.ndarray, concept_vecs: np.ndarray, links: sp.csr_array,
                   threshold: float) -> np.ndarray:
    """``(n, m)`` booleans: turn ``t`` covers term ``j`` by meaning when some concept
    linked to it (``links``: turns x concepts) has cosine >= ``threshold`` with the term
    (rows of ``term_vecs`` and ``concept_vecs`` are unit vectors).

    >>> links = sp.csr_array(np.array([[1, 0], [0, 1]]))   # turn 0 -> concept 0, 1 -> 1
    >>> semantic_cover(np.array([[1.0, 0.0]]), np.array([[0.8, 0.6], [0.0, 1.0]]), links, 0.7)
    array([[ True],
           [False]])
    """
    terms = np.asarray(term_vecs, dtype=np.float32)
    if links.shape[1] == 0:
        return np.zeros((links.shape[0], terms.shape[0]), dtype=bool)
    close = (terms @ np.asarray(concept_vecs, dtype=np.float32).T) >= threshold  # (m, C)
    if not close.any():
        return np.zeros((links.shape[0], terms.shape[0]), dtype=bool)
    return np.asarray((links @ close.T.astype(np.float64)) > 0)


def term_presence(covered: np.ndarray, weights: np.ndarray, allowed: np.ndarray) -> tuple[float, int]:
    """``(share, position)``: the best share of the terms' ``weights`` one ``allowed`` turn
    covers (``covered``: turns x terms booleans), and that turn (-1 when none is allowed).

    >>> term_presence(np.array([[True, False], [True, True]]), np.array([1.0, 3.0]),
    ...               np.array([True, False]))
    (0.25, 0)
    """
    w = np.asarray(weights, dtype=np.float64)
    if not np.any(allowed) or w.sum() <= 0:
        return 0.0, -1
    share = np.asarray(covered, dtype=np.float64) @ w / w.sum()
    best = int(np.argmax(np.where(allowed, share, -1.0)))
    return float(share[best]), best


def concept_links(view: Compiled, rows: np.ndarray) -> tuple[np.ndarray, sp.csr_array]:
    """The concepts the episodes ``rows`` link to (their out-edges to concept nodes, read
    from the view's edge slices): the concepts' vectors, and the rows x concepts matrix.

    >>> import numpy as np
    >>> from synapse_integrations.core.graph.graph import Compiled
    >>> v = Compiled.from_arrays(["t", "c", "d"], np.eye(3, dtype=np.float32), src=[0, 0],
    ...                          dst=[1, 2], weight=[1.0, 1.0], is_episode=[True, False, False],
    ...                          attrs={"kind": ["episode", "concept", "concept"]})
    >>> vecs, links = concept_links(v, np.array([0]))
    >>> vecs.tolist(), links.toarray().tolist()
    ([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], [[1.0, 1.0]])
    """
    kinds = view.node_values("kind")
    pairs = [(r, int(c)) for r, i in enumerate(rows.tolist()) if view.is_episode[i]
             for c in view.out_neighbors(i) if kinds[c] == "concept"]
    linked = sorted({c for _, c in pairs})
    col = {c: k for k, c in enumerate(linked)}
    links = sp.csr_array((np.ones(len(pairs)), ([r for r, _ in pairs], [col[c] for _, c in pairs])),
                         shape=(rows.size, len(linked)))
    return view.embeddings[np.array(linked, dtype=np.int64)], links


def decide(*, topic_ok: bool, confidence: float, tau: float, signal: str,
           attribution: tuple[float, str, str | None, str | None] | None, margin: float,
           present: tuple[float, str | None, list[str]] | None, presence_min: float) -> GateVerdict:
    """The gate's verdict: the first check that fails, in the order topic -> attribution
    -> presence (a check given as None was not applicable or is switched off).

    ``attribution`` is ``(gap, subject, other_speaker, evidence_id)``; ``present`` is
    ``(share, evidence_id, terms)``.

    >>> decide(topic_ok=True, confidence=0.6, tau=0.25, signal="similarity",
    ...        attribution=(0.7, "Caroline", "Melanie", "D2:3"), margin=0.3,
    ...        present=None, presence_min=0.2).check
    'attribution'
    >>> decide(topic_ok=True, confidence=0.6, tau=0.25, signal="similarity",
    ...        attribution=None, margin=0.3, present=(0.9, "D1:1", ["dog"]),
    ...        presence_min=0.2).rejected
    False
    """
    if not topic_ok:
        return GateVerdict(True, "topic", f"the top memory's {signal} {confidence:.3f} is below "
                           f"gate_tau {tau:.3f}: nothing in memory is about this",
                           None, {"confidence": confidence})
    signals = {"confidence": confidence}
    if attribution is not None:
        gap, subject, other, evidence = attribution
        signals["attribution_gap"] = gap
        if gap > margin:
            return GateVerdict(True, "attribution", f"the question asks about {subject}, but the "
                               f"turn that best holds its words ({evidence}, said by {other}) is "
                               f"not about {subject}: it beats {subject}'s best by {gap:.2f} > "
                               f"{margin:g}", evidence, signals)
    if present is not None:
        share, evidence, terms = present
        signals["presence"] = share
        if presence_min > 0 and share < presence_min:
            what = ", ".join(repr(t) for t in terms[:6]) or "its words"
            return GateVerdict(True, "presence", f"no memory holds what the question asks about "
                               f"({what}): the best turn covers {share:.2f} < {presence_min:g} "
                               f"of it", evidence, signals)
    return GateVerdict(False, "accepted", f"accepted: the top memory's {signal} {confidence:.3f} "
                       f">= gate_tau {tau:.3f} and the evidence checks passed", None, signals)


def evaluate(view: Compiled, bm25: BM25Index, query: str, cfg: SynapseConfig,
             confidence: float, eligible: np.ndarray, words: WordVectors | None = None,
             found: Sequence[int] = ()) -> GateVerdict:
    """The gate on one retrieval: the topic check on ``confidence``, then (with
    ``cfg.use_evidence_gate``) the attribution and presence checks over the ``eligible``
    episodes of ``view`` (those the query's filters allow). ``words`` embeds question
    words for presence's matches by meaning (None: words only); ``found``: the positions
    of the memories the retrieval placed first, the ones presence reads by meaning."""
    topic_ok = not scoring.gate(confidence, tau=cfg.gate_tau)
    attribution = present = None
    if topic_ok and cfg.use_evidence_gate:
        # per view, not per query: the speakers (and their names, without filters)
        spk = view.speakers()
        speakers = speaker_names(view) if np.array_equal(eligible, view.is_episode) \
            else distinct_speakers(spk[eligible])
        named = named_subjects(query, speakers)
        if not named and cfg.gate_first_person in speakers and FIRST_PERSON.search(query):
            named = [cfg.gate_first_person]  # "my", "I": the user asking about themself
        terms = resolve_terms(attribute_terms(query, speakers), bm25.has)
        if terms:
            cov, used, _ = bm25.coverage(terms, view.index, view.n, eligible)
            if len(named) == 1 and len(speakers) >= 2:
                # only turns holding some attribute term can decide: whom is each about?
                about = _AboutName(view, spk, speakers, named[0], eligible)
                owned = about.mask(eligible & (cov > 0))
                gap, o, _ = attribution_gap(cov, owned, eligible & ~owned)
                if o >= 0 and used:
                    attribution = (gap, named[0], str(spk[o]), view.ids[o])
                # presence, too, reads the turns about the named person (any of them when
                # it matches by meaning: a turn may hold none of the words)
                subject, widen = _Mask(owned), about
            else:
                subject = widen = _Mask(eligible & (spk == named[0]) if len(named) == 1
                                        else eligible)
            # measured always (benchmarks sweep it); it decides when gate_presence_min > 0
            share, at = _presence(view, bm25, terms, eligible, subject, widen, cfg, words,
                                  found)
            present = (share, view.ids[at] if at >= 0 else None, terms)
    return decide(topic_ok=topic_ok, confidence=confidence, tau=cfg.gate_tau,
                  signal=cfg.gate_signal, attribution=attribution,
                  margin=cfg.gate_attribution_margin, present=present,
                  presence_min=cfg.gate_presence_min)


class _Mask:
    """Turns that may count, given as a mask over the view."""

    def __init__(self, mask: np.ndarray) -> None:
        self.mask = mask

    def at(self, positions: np.ndarray) -> np.ndarray:
        """Whether each of ``positions`` may count."""
        return self.mask[positions]

    def first(self) -> int:
        """The first turn that may count (-1: none)."""
        return int(np.argmax(self.mask)) if self.mask.any() else -1


class _AboutName:
    """The ``eligible`` turns about one person (:func:`turn_about`), worked out only for
    the turns a check asks about: those holding the question's words, the few the
    retrieval placed first, and the first one about the person (which a rejection names).
    Each turn's answer is kept per view (a per-node array that grows and shrinks with it;
    whom a turn is about, per set of speakers, in a memo), so a check pays for the turns
    it reads, not for every turn of a memory of 100,000."""

    def __init__(self, view: Compiled, spk: np.ndarray, speakers: list[str], name: str,
                 eligible: np.ndarray) -> None:
        self.view, self.spk, self.speakers, self.name = view, spk, speakers, name
        self.eligible = eligible
        self.known = view.per_node("gate.about\x1f" + name + "\x1f" + "\x1f".join(speakers),
                                   lambda v, start: np.full(v.n - start, -1, dtype=np.int8))

    def at(self, positions: np.ndarray) -> np.ndarray:
        """Whether each of ``positions`` is an eligible turn about the person."""
        positions = np.asarray(positions, dtype=np.int64)
        todo = positions[self.known[positions] < 0]
        if todo.size:
            whom = self.view.memo("gate.about")  # position, speakers -> turn_about
            texts = self.view.node_values("text", "")
            key = tuple(self.speakers)
            for i in todo.tolist():
                if (i, key) not in whom:
                    whom[(i, key)] = turn_about(texts[i], self.spk[i], key)
                self.known[i] = self.name in whom[(i, key)]
        return (self.known[positions] == 1) & self.eligible[positions]

    def mask(self, which: np.ndarray) -> np.ndarray:
        """The turns among ``which`` (a mask) about the person, as a mask."""
        out = np.zeros(self.view.n, dtype=bool)
        at = np.flatnonzero(which)
        out[at] = self.at(at)
        return out

    def first(self, block: int = 256) -> int:
        """The first eligible turn about the person (-1: none), read a block at a time."""
        turns = np.flatnonzero(self.eligible)
        for start in range(0, turns.size, block):
            part = turns[start:start + block]
            hit = np.flatnonzero(self.at(part))
            if hit.size:
                return int(part[hit[0]])
        return -1


def _presence(view: Compiled, bm25: BM25Index, terms: list[str], eligible: np.ndarray,
              allowed: _Mask | _AboutName, widen: _Mask | _AboutName, cfg: SynapseConfig,
              words: WordVectors | None, found: Sequence[int] = ()) -> tuple[float, int]:
    """Presence's share and turn: each term weighs its IDF over the ``eligible`` turns (a
    term none holds: the IDF of a word held by none); a turn covers it by an inflection
    it holds, else (with ``words``, when the words alone leave the share below
    ``gate_presence_min``) by meaning: one of the first :data:`EVIDENCE_TURNS` of
    ``found`` (the evidence the retrieval placed first) covers it by a linked concept or
    one of its own words close in meaning (concepts are names and phrases: "trip" in
    "I'm saving up for a trip to Iceland" is none, and "Where does Ben want to travel?"
    was refused for it). Only those few turns: the more words a term is compared with,
    the closer the best of them by chance (docs/gate.md), and every concept or word of
    every turn about a person of a long conversation let never-said details pass (probes
    19 -> 16 of 25 rejected with every turn's concepts, 17 -> 13 with every turn's
    words). ``allowed`` are the turns that may count, ``widen`` those that may count by
    meaning."""
    weights = np.full(len(terms), math.log(1.0 + (float(eligible.sum()) + 0.5) / 0.5))
    held: dict[int, np.ndarray] = {}  # term -> the eligible turns holding it
    for j, term in enumerate(terms):
        got = bm25.holders(term, view.index, view.n, eligible)
        if got is not None:
            held[j], weights[j] = got
    share, at = _best_share(held, weights, allowed)
    # by meaning only where the words alone would refuse (it can only raise the share):
    # most questions never pay for embedding their words
    if share < cfg.gate_presence_min and words is not None and cfg.gate_presence_similarity < 1.0:
        allowed = widen  # the turns that may match by meaning (not only those with words)
        # the evidence the retrieval placed first, read through its concepts and its own
        # words (a turn not consolidated yet links no concept)
        first = np.asarray(found, dtype=np.int64)[:EVIDENCE_TURNS]
        rows = np.unique(first[allowed.at(first) & eligible[first]])
        meant = None
        if rows.size:
            tokens = view.memo("gate.tokens")
            texts = view.node_values("text", "")
            for i in rows.tolist():
                if i not in tokens:
                    tokens[i] = list(dict.fromkeys(tokenize(texts[i])))
            vocab = list(dict.fromkeys(t for i in rows.tolist() for t in tokens[i]))
            vecs = np.asarray(words(terms + vocab), dtype=np.float32)
            vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
            thr = cfg.gate_presence_similarity
            concepts, links = concept_links(view, rows)  # a few dozen
            meant = semantic_cover(vecs[:len(terms)], concepts, links, thr)
            if vocab:
                col = {t: k for k, t in enumerate(vocab)}
                pairs = [(r, col[t]) for r, i in enumerate(rows.tolist()) for t in tokens[i]]
                own = sp.csr_array((np.ones(len(pairs)), tuple(np.array(pairs).T)),
                                   shape=(rows.size, len(vocab)))
                meant |= semantic_cover(vecs[:len(terms)], vecs[len(terms):], own, thr)
        share, at = _best_share(held, weights, allowed, rows, meant)
    return share, at


def _best_share(held: Mapping[int, np.ndarray], weights: np.ndarray,
                allowed: _Mask | _AboutName, rows: np.ndarray | None = None,
                meant: np.ndarray | None = None) -> tuple[float, int]:
    """:func:`term_presence` over every turn, read off the turns that hold some term
    (``held``: term -> its turns) and the ``rows`` that cover the terms ``meant``
    (rows x terms) by meaning: every other turn covers nothing. The best share and its
    turn; with none above 0, the first ``allowed`` turn (as over every turn)."""
    parts = [*held.values(), *(() if rows is None else (rows,))]
    at = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
    covered = np.zeros((at.size, weights.size), dtype=bool)
    for j, where in held.items():
        covered[np.searchsorted(at, where), j] = True
    if rows is not None and meant is not None:
        covered[np.searchsorted(at, rows)] |= meant
    share, best = term_presence(covered, weights, allowed.at(at))
    if share > 0:
        return share, int(at[best])
    return 0.0, allowed.first()


_WORD3 = re.compile(r"[a-z]{3,}")


@functools.lru_cache(maxsize=64)
def _addressed_by(names: tuple[str, ...]) -> Mapping[str, frozenset[str]]:
    """Each lowercase prefix of 3+ letters of each name (the whole name included) -> the
    names it starts: a turn addresses a name when one of its words is such a prefix.
    One lookup per word of a turn instead of a comparison per word and name (a memory of
    40 speakers read 61 -> 13 microseconds a turn)."""
    table: dict[str, set[str]] = {}
    for name in names:
        low = name.lower()
        for end in range(3, len(low) + 1):
            table.setdefault(low[:end], set()).add(name)
    return {prefix: frozenset(held) for prefix, held in table.items()}


def turn_about(text: str, speaker: str | None, names: Sequence[str]) -> frozenset[str]:
    """Whom one turn is about, among ``names``: its speaker when it speaks in the first
    person or addresses no one; another person when it addresses them (``you``/``your``
    or a question: every other name; their name, or a prefix of it of 3+ letters such as
    "Mel" for Melanie: that one). "That charity race sounds great, Mel!" is about Mel;
    "How's work?" asks about the listener, it says nothing of its speaker.

    >>> sorted(turn_about("Caroline: That race sounds great, Mel!", "Caroline",
    ...                   ["Caroline", "Melanie"]))
    ['Melanie']
    >>> sorted(turn_about("Melanie: I ran a race. How are you?", "Melanie", ["Caroline", "Melanie"]))
    ['Caroline', 'Melanie']
    """
    body = text[len(speaker) + 1:] if speaker and text.startswith(f"{speaker}:") else text
    starts = _addressed_by(tuple(names))
    hit: set[str] = set()
    for word in set(_WORD3.findall(body.lower())):
        hit.update(starts.get(word, ()))
    addressed = [nm for nm in names if nm != speaker and nm in hit]
    second = bool(SECOND_PERSON.search(body)) or "?" in body
    out = set(addressed or ([nm for nm in names if nm != speaker] if second else []))
    if speaker in names and (FIRST_PERSON.search(body) or not (second or addressed)):
        out.add(speaker)  # type: ignore[arg-type]
    return frozenset(out)
