"""core/echoes.py: which assistant turns are echoes, and how retrieval ranks them."""

from __future__ import annotations

import pytest

from synapse_integrations import Synapse
from synapse_integrations.core.graph import roles
from synapse_integrations.core.signals import echoes

pytestmark = pytest.mark.model

USER = "My sister Ana moved to Lisbon last year."
ECHO = "Noted: Ana lives in Lisbon now."


def test_marking_rule(tmp_path, embedder):
    with Synapse(tmp_path, embedder=embedder) as mem:
        ids = mem.add_turns([
            {"text": USER, "speaker": "user"},
            {"text": ECHO, "speaker": "assistant"},                        # restates it: echo
            {"text": "Lisbon is lovely.", "speaker": "assistant"},         # reacts: not an echo
            {"text": "Where does Ana live?", "speaker": "user"},
            {"text": "Ana lives in Lisbon.", "speaker": "assistant"},      # restates USER, not the question
            {"text": "Ana moved to Lisbon last year.", "speaker": "Sam"},  # no role: never an echo
            {"text": "Got it: Ana moved to Lisbon last year.", "speaker": "bot",
             "metadata": {"role": "assistant"}},                           # USER is 6 episodes back
        ])
        meta = [e["metadata"] for e in mem.episodes()]
        assert meta[1] == {"echo_of": ids[0]} and meta[4] == {"echo_of": ids[0]}
        assert meta[2] == {} and meta[5] == {} and meta[6] == {"role": "assistant"}
        # roles from metadata, and a source already stored by an earlier call
        mem.add_turn("I adopted a beagle called Biscuit.", speaker="Sam", metadata={"role": "user"})
        later = mem.add_turn("Got it: you adopted a beagle named Biscuit.", speaker="bot",
                             metadata={"role": "assistant"})
        assert mem.get(later)["metadata"]["echo_of"] == mem.episodes()[-2]["id"]
        assert roles.is_role({"speaker": "Human"}, "user") and roles.is_role({"speaker": "AI"}, "assistant")


def test_demotion_only_when_the_source_is_a_candidate(tmp_path, embedder):
    with Synapse(tmp_path, embedder=embedder) as mem:
        user_id, echo_id = mem.add_turns([{"text": USER, "speaker": "user"},
                                          {"text": ECHO, "speaker": "assistant"}])
        items = {it.id: it for it in mem.retrieve("Where does Ana live?", k=5).items}
        assert items[echo_id].components.similarity > items[user_id].components.similarity
        assert items[echo_id].score == pytest.approx(items[user_id].score - echoes.ECHO_MARGIN)
        assert items[echo_id].components.echo < 0
        mem.forget(ids=[user_id])  # the source is gone: the echo keeps its own score
        [item] = mem.retrieve("Where does Ana live?", k=5).items
        assert item.id == echo_id and item.components.echo == 0.0
