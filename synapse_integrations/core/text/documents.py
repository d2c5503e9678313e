"""What the embedder and the BM25 index read for a turn: its text, with its speaker's name.

Questions name people ("What does Sam do for work?", "Where did Caroline go?"), and the
name is how they reach that person's turns: in the dense space a turn that says "Sam: ..."
sits closer to a question about Sam, and the BM25 index matches the name. LoCoMo's
protocol (and our benchmarks) store turns as ``"Sam: I went skiing"``; the framework
adapters store the bare text and the speaker as a field. Without the name, the same
memory ranks worse (LoCoMo dev recall@10 pooled 78.1 -> 76.5) and the gate's similarity
falls below its threshold for questions about a named person (``synapse demo``: "Where
does Sam live now?" refused as "nothing in memory"; docs/benchmarks.md, "The speaker in
the document"). So a turn with a named speaker is read as ``"<speaker>: <text>"``, once:
a text that already starts with the name is read as it is. The text the caller stored is
what the memory keeps and returns; only the embedding and the index see the name.

Role words name no one a question would ask about, so such turns are read as they are
(:data:`ROLE_WORDS`: the user's and the assistant's, :data:`~.lexicon.USER_SPEAKERS` and
:data:`~.lexicon.ASSISTANT_SPEAKERS`, and the other message roles of LangChain and
LlamaIndex: "system", "tool", ...). LongMemEval's turns and the adapters' default
speakers stay as before. Nor is a speaker longer than :data:`MAX_NAME_CHARS` (a label
such as an email thread's subject, not a name): in the embedder's 256-token window it
would crowd out the turn's own words.
``SynapseConfig.speaker_in_document=False`` reads every text as it is (set when the memory
is opened, like ``embedding_dim``).

>>> document("I went skiing", "Sam"), document("Sam: I went skiing", "Sam")
('Sam: I went skiing', 'Sam: I went skiing')
>>> document("Hi there", "user"), document("Hi there", None), document("Hi", "Sam", enabled=False)
('Hi there', 'Hi there', 'Hi')
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .lexicon import ASSISTANT_SPEAKERS, USER_SPEAKERS

__all__ = ["MAX_NAME_CHARS", "ROLE_WORDS", "document", "is_name", "name_line", "node_document",
           "row_document", "speaker_prefix", "without_any_speaker", "without_speaker"]

#: The longest speaker read as a name (characters).
MAX_NAME_CHARS = 64

#: Speakers that are message roles, not names (lower case): LangChain's message types and
#: LlamaIndex's ``MessageRole`` values besides the user's and the assistant's.
ROLE_WORDS = USER_SPEAKERS | ASSISTANT_SPEAKERS | frozenset(
    {"system", "developer", "tool", "function", "chat", "chatbot", "model", "bot"})


def speaker_prefix(speaker: str | None, text: str) -> str:
    """``"<speaker>: "`` for a memory's line, or ``""`` when there is no speaker or the
    text already starts with it (turns are often stored as ``"Sam: ..."``).

    >>> speaker_prefix("Sam", "I went skiing"), speaker_prefix("Sam", "Sam: I went skiing")
    ('Sam: ', '')
    """
    if not speaker or text.lstrip().lower().startswith(f"{speaker.strip().lower()}:"):
        return ""
    return f"{speaker}: "


def without_speaker(speaker: str | None, text: str) -> str:
    """``text`` without a leading ``"<speaker>:"`` (the inverse of :func:`speaker_prefix`;
    case and the spaces around the name aside); ``text`` as it is when it has none.

    >>> without_speaker("Sam", "Sam: I went skiing"), without_speaker("Sam", "I went skiing")
    (' I went skiing', 'I went skiing')
    """
    name = speaker.strip() if speaker else ""
    head = text.lstrip()
    if name and head[:len(name)].lower() == name.lower():
        rest = head[len(name):].lstrip()
        if rest.startswith(":"):
            return rest[1:]
    return text


#: A leading ``"<name>: "`` whoever the speaker is (at most 40 characters of a name).
_ANY_SPEAKER = re.compile(r"^\s*[\w .'-]{1,40}:\s")


def without_any_speaker(text: str) -> str:
    """``text`` without a leading ``"<name>: "`` when the speaker is not known (the
    mechanisms that read a turn's own words: sleep's facts, reconsolidation's statements,
    surprisal's filler test); ``text`` as it is when it has none.

    >>> without_any_speaker("Sam: I went skiing"), without_any_speaker("Dr. Ames: rest a week")
    ('I went skiing', 'rest a week')

    A head of words is read as a name, so the rule is for turns that carry a speaker;
    one with a comma (or over 40 characters) is kept:

    >>> without_any_speaker("I went skiing: twice"), without_any_speaker("Well, ski: twice")
    ('twice', 'Well, ski: twice')
    """
    return _ANY_SPEAKER.sub("", text, count=1)


def is_name(speaker: str | None) -> bool:
    """Whether a document reads ``speaker`` as a name (module docstring): not empty, not a
    role word, at most :data:`MAX_NAME_CHARS` characters.

    >>> is_name("Sam"), is_name("user"), is_name(""), is_name(None)
    (True, False, False, False)
    """
    name = speaker.strip() if isinstance(speaker, str) else ""
    return bool(name) and len(name) <= MAX_NAME_CHARS and name.lower() not in ROLE_WORDS


def name_line(speaker: str) -> str:
    """What a document adds for ``speaker``, as the embedder reads it alone.

    >>> name_line(" Sam ")
    'Sam:'
    """
    return speaker_prefix(speaker.strip(), "").strip()


def document(text: str, speaker: str | None, *, enabled: bool = True) -> str:
    """The text the embedder and BM25 read for a turn by ``speaker`` (module docstring)."""
    if not enabled or not is_name(speaker):
        return text
    assert isinstance(speaker, str)
    return speaker_prefix(speaker.strip(), text) + text


def node_document(attrs: Mapping[str, Any], *, enabled: bool = True) -> str:
    """:func:`document` for a node's attributes: an episode's text with its speaker, a
    concept's (or a fact's) text as it is."""
    text = attrs.get("text") or ""
    if attrs.get("kind") != "episode":
        return text
    return document(text, attrs.get("speaker"), enabled=enabled)


def row_document(enabled: bool = True) -> Callable[[str, Mapping[str, Any]], str]:
    """:func:`node_document` for a stored row (its text and its Chroma metadata, which
    hold ``kind`` and ``speaker``), for re-embedding rows read back from Chroma.

    >>> row_document()("Hi", {"kind": "episode", "speaker": "Sam"})
    'Sam: Hi'
    """
    return lambda text, meta: node_document({**meta, "text": text}, enabled=enabled)
