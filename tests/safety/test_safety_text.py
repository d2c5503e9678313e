"""User text is stored, not refused, over invisible characters (issue 45, item 8).

Pasted chats hold C1 controls (cp1252 quotes decoded as latin-1: ``"He said \\x93hi\\x94"``)
and stray C0 ones (``\\x02``). They are normalised on the way in
(:data:`~synapse_integrations.core.state.validation.TEXT_NORMALISATION`), the change is recorded
in the turn's metadata, and only truly invalid turns refuse a batch, the error naming the
turn. Ids, speakers and namespaces keep refusing control characters.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_integrations import Synapse
from synapse_integrations.core.state.validation import (
    NORMALISED_KEY, REPLACEMENT, TEXT_NORMALISATION, normalise_text,
)
from synapse_integrations.errors import InvalidInputError, InvalidTypeError, NamespaceError
from synapse_integrations.langgraph import SynapseStore

from _safety_helpers import HashEmbedder

QUOTED = "He said \x93hi\x94 about the lighthouse keeper"
STRAY = "\x02stray cats live behind the bakery"
NORMAL = "We planted tomatoes in the garden"


@pytest.fixture
def mem(tmp_path):
    m = Synapse(tmp_path / "m", embedder=HashEmbedder())  # the default firewall (on)
    yield m
    m.close()


def _episodes(mem: Synapse) -> int:
    return sum(d["kind"] == "episode" for _, d in mem.graph.nodes(data=True))


def test_a_batch_with_control_characters_is_stored_whole_and_read_back(tmp_path):
    path = tmp_path / "m"
    with Synapse(path, embedder=HashEmbedder()) as mem:
        ids = mem.add_turns([{"text": QUOTED, "speaker": "user", "id": "q"},
                             {"text": STRAY, "speaker": "user", "id": "s"},
                             {"text": NORMAL, "speaker": "user", "id": "n"}])
        assert ids == ["q", "s", "n"]
        assert mem.get("q")["text"] == "He said \u201chi\u201d about the lighthouse keeper"
        assert mem.get("s")["text"] == "\ufffdstray cats live behind the bakery"
        assert mem.get("n")["text"] == NORMAL
        # what was changed is recorded with the turn; an untouched turn carries nothing
        assert mem.get("q")["metadata"][NORMALISED_KEY] == {"cp1252": 2}
        assert mem.get("s")["metadata"][NORMALISED_KEY] == {"replaced": 1}
        assert NORMALISED_KEY not in mem.get("n")["metadata"]
        # retrieval finds each turn by its words
        assert mem.retrieve("stray cats behind the bakery", k=1).items[0].id == "s"
        top = mem.retrieve("what did he say about the lighthouse keeper", k=1).items[0]
        assert top.id == "q" and top.metadata[NORMALISED_KEY] == {"cp1252": 2}
        assert mem.verify().ok
    with Synapse(path, embedder=HashEmbedder()) as mem:  # durable as normalised
        assert mem.get("q")["text"] == "He said \u201chi\u201d about the lighthouse keeper"
        assert mem.get("s")["metadata"][NORMALISED_KEY] == {"replaced": 1}


def test_every_entry_point_for_turn_text_normalises(mem):
    one = mem.add_turn("\x93quoted\x94 and\x0bsoft break", speaker="user")
    assert mem.get(one)["text"] == "\u201cquoted\u201d and\nsoft break"
    assert mem.get(one)["metadata"][NORMALISED_KEY] == {"cp1252": 2, "replaced": 1}
    new = mem.update(one, "now with a bell\x07 in it")
    assert mem.get(new)["text"] == "now with a bell\ufffd in it"
    assert mem.get(new)["metadata"][NORMALISED_KEY] == {"replaced": 1}
    clean = mem.update(new, "now without one")  # the old text's record does not carry over
    assert NORMALISED_KEY not in mem.get(clean)["metadata"]
    two = mem.add_turn("\x93quoted\x94 and\x0bsoft break", speaker="user")
    kept = mem.update(two, speaker="Sam")  # the same text: its record stays
    assert mem.get(kept)["metadata"][NORMALISED_KEY] == {"cp1252": 2, "replaced": 1}


def test_only_control_characters_is_stored_as_replacement_characters(mem):
    node = mem.add_turn("\x00\x01")
    assert mem.get(node)["text"] == REPLACEMENT * 2


def test_normalised_text_is_stored_unchanged_and_not_flagged_again(mem):
    first = mem.add_turn(QUOTED)
    again = mem.add_turn(mem.get(first)["text"])
    assert mem.get(again)["text"] == mem.get(first)["text"]
    assert NORMALISED_KEY not in mem.get(again)["metadata"]


def test_the_table_reads_c1_as_cp1252_and_replaces_the_rest():
    assert normalise_text("\x80\x85\x91\x92\x96\x97\x9c") == (
        "\u20ac\u2026\u2018\u2019\u2013\u2014\u0153", {"cp1252": 7})
    for undefined in "\x81\x8d\x8f\x90\x9d":  # no cp1252 character: replaced
        assert normalise_text(undefined) == (REPLACEMENT, {"replaced": 1})
    for kept in "\t\n\r":
        assert normalise_text(kept) == (kept, {})
    # the table covers every C0 control but tab/LF/CR, DEL and every C1 control
    expected = {chr(c) for c in (*range(0x20), *range(0x7f, 0xa0))} - set("\t\n\r")
    assert set(TEXT_NORMALISATION) == expected
    assert not set(TEXT_NORMALISATION.values()) & set(TEXT_NORMALISATION)


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x2100), max_size=60))
def test_normalising_is_idempotent_and_leaves_no_control_character(text):
    once, counts = normalise_text(text)
    assert normalise_text(once) == (once, {})
    assert len(once) == len(text)
    assert not any(ch in TEXT_NORMALISATION for ch in once)
    assert sum(counts.values()) == sum(a != b for a, b in zip(text, once))


def test_a_batch_with_a_truly_invalid_turn_names_it_and_stores_nothing(mem):
    mem.add_turn("already here")
    before = _episodes(mem)
    with pytest.raises(InvalidTypeError, match=r"^turn 2 \(id 'bad-one'\): turn text must be a str"):
        mem.add_turns([QUOTED, {"text": STRAY, "id": "ok"}, {"text": 5, "id": "bad-one"}])
    with pytest.raises(InvalidInputError, match=r"^turn 1: turn text is 100001 characters"):
        mem.add_turns([NORMAL, "x" * 100_001])
    with pytest.raises(InvalidInputError, match=r"^turn 0: turn text must not be empty"):
        mem.add_turns(["\x0b\x0c  ", NORMAL])  # whitespace once normalised: still empty
    assert _episodes(mem) == before
    assert mem.verify().ok


@pytest.mark.parametrize("turn, match", [
    ({"text": "fine", "id": "a\x93b"}, "id must be printable"),
    ({"text": "fine", "id": "a\x02b"}, "id must be printable"),
    ({"text": "fine", "speaker": "Sam\x02"}, "speaker must be printable"),
    ({"text": "fine", "speaker": "Sam\x85Admin"}, "speaker must be printable"),
])
def test_ids_and_speakers_with_control_characters_are_still_refused(mem, turn, match):
    with pytest.raises(InvalidInputError, match=match):
        mem.add_turns([NORMAL, turn])
    assert _episodes(mem) == 0


def test_namespaces_with_control_characters_are_still_refused(tmp_path):
    for ns in ("a\x93b", "a\x02b"):
        with pytest.raises(NamespaceError, match="control"):
            Synapse(tmp_path / "n", namespace=ns, embedder=HashEmbedder())


def test_a_langgraph_store_put_with_control_characters_is_stored(tmp_path):
    store = SynapseStore(tmp_path / "store", embedder=HashEmbedder())
    try:
        store.put(("user", "1"), "note", {"text": QUOTED})  # through the engine's add_turns
        assert store.get(("user", "1"), "note").value == {"text": QUOTED}  # the value as given
        hits = store.search(("user", "1"), query="what did he say about the lighthouse keeper")
        assert [h.key for h in hits][:1] == ["note"]
    finally:
        store.close()
