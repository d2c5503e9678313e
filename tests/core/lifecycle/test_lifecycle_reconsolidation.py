"""Reconsolidation (issue 15): a turn restating an attribute with a new value supersedes the
older turn (kept, linked, ranked with it: newest first, oldest first for the past)."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from synapse_integrations import HashingEmbedder, Synapse, SynapseConfig
from synapse_integrations.core.graph.graph import Compiled
from synapse_integrations.core.lifecycle.detectors import Lifecycle
from synapse_integrations.core.lifecycle.reconsolidation import (
    LLMReconsolidator,
    RuleReconsolidator,
    is_update,
    statements,
)
from synapse_integrations.core.retrieval.passes import Pass, merge_feedback
from synapse_integrations.core.retrieval.scope import Scope
from synapse_integrations.core.signals import signal_names
from synapse_integrations.core.signals.versions import (
    query_tense,
    rank_recent,
    rank_versions,
    settle_versions,
)
from synapse_integrations.errors import ConfigError, InvalidTypeError

OLD = "I've spent around 5-6 hours on my abstract ocean sculpture so far."
NEW = "By the way, I've already put in 10-12 hours on my abstract ocean sculpture."
OTHER = "I've spent 2 hours on my vegetable garden so far."
FILLER = ["What is a good glaze for clay?", "Glazes vary a lot.", "Thanks, I will try it.",
          "Any tips for texture?", "Use a stiff brush."]


def _memory(tmp_path, *, on=True, lifecycle=None):
    cfg = SynapseConfig(reconsolidation=on, consolidation_interval=0)
    return Synapse(tmp_path / "m", embedder=HashingEmbedder(), config=cfg, lifecycle=lifecycle)


def _ingest(mem):
    turns = [{"text": OLD, "speaker": "Sam", "timestamp": "2024-01-01T00:00:00Z", "id": "old"},
             {"text": OTHER, "speaker": "Sam", "timestamp": "2024-01-02T00:00:00Z", "id": "other"}]
    turns += [{"text": t, "speaker": "Sam", "timestamp": f"2024-01-0{3 + i}T00:00:00Z"}
              for i, t in enumerate(FILLER)]
    turns.append({"text": NEW, "speaker": "Sam", "timestamp": "2024-02-01T00:00:00Z", "id": "new"})
    return mem.add_turns(turns)


def test_the_rule_on_hand_made_statements() -> None:
    (old,), (new,), (other,) = statements(OLD), statements(NEW), statements(OTHER)
    assert old.values == {"5-6"} and "hour" in old.slot and {"ocean", "sculpture"} <= old.frame
    assert is_update(new, old)
    assert not is_update(other, old)  # same slot (hours), another subject
    assert not is_update(old, old)  # the same value is a restatement, not an update
    (third,), (three,) = statements("I just finished my third issue of National Geographic."), \
        statements("I finished three issues of National Geographic.")
    assert not is_update(three, third)  # "third" and "three" are the same value
    assert statements("How many hours have I spent on it?") == []  # a question states nothing
    assert statements("I did a 30-mile ride last weekend with Dana.") == []  # an event
    assert statements("Give me the title of chapter 2 for my essay.") == []  # a request
    assert statements("I want you to write 60 characters for my title.") == []
    for no_value in ("The store opened on March 12 near my office.",  # a date
                     "I snack around 3 pm most days at my desk."):  # a time of day
        assert [s.values for s in statements(no_value)] == [frozenset()]
    assert len(statements("user: remember when I got pre-approved for $400,000?")) == 1


@pytest.mark.parametrize("old, new", [
    ("I live in Boston.", "I moved to Denver last month."),
    ("My internet provider is Comlink, it is painfully slow.",
     "I switched internet providers to FiberNest and it is so much faster."),
    ("I work at Google as a designer.", "I switched jobs and now work at Figma."),
])
def test_a_change_without_a_number_supersedes(old, new) -> None:
    assert any(is_update(a, b) for a in statements(new) for b in statements(old))


@pytest.mark.parametrize("old, new", [
    ("I love my dog Rex.", "I moved to Denver last month."),  # another subject
    ("I live in Boston.", "I moved the meeting with Dana to Friday."),  # not where one lives
    ("I live in Boston.", "My friend Rachel moved to Chicago."),  # not the speaker
    ("I live in Boston.", "I was moved by the film about Boston."),
])
def test_what_is_not_a_change(old, new) -> None:
    assert not any(is_update(a, b) for a in statements(new) for b in statements(old))


def test_plans_and_wishes_state_no_value() -> None:
    assert statements("I want to watch 1 Crash Course episode daily.") == []
    assert statements("I'm thinking of strength training 2 times a week for my core.") == []
    assert statements("I'll try to dedicate maybe 2-3 hours on the weekends.") == []
    # a plan after the value leaves the value standing
    (s,) = statements("I've got enough points for two free nights at Hilton, so I might go.")
    assert s.values == {"2"}


def test_a_change_replaces_only_a_statement_that_names_something() -> None:
    new = statements("I just replaced my kitchen faucet with a new Moen faucet, it works great.")
    nothing = statements("I'm not really sure how it works.")
    named = statements("My kitchen faucet is an old Delta.")
    assert nothing and named
    assert not any(is_update(a, b) for a in new for b in nothing)
    assert any(is_update(a, b) for a in new for b in named)


def test_an_honorific_does_not_end_the_sentence() -> None:
    (new,) = statements("I changed dentists, I see Dr. Okafor now.")
    assert "okafor" in new.names and new.change
    assert any(is_update(new, b) for b in statements("My dentist is Dr. Alvarez on Main Street."))


def test_a_change_told_again_in_one_conversation_supersedes_nothing() -> None:
    old = {"id": "a", "text": "My laptop runs on an old Crucial RAM kit.", "ts": 0.0}
    new = {"id": "b", "text": "I upgraded my laptop RAM to a Kingston kit.", "ts": 2.0}
    rule = RuleReconsolidator()
    assert rule.superseded(new, [old]) == []
    assert rule.superseded({**new, "ts": 2 * 86400.0}, [old]) == ["a"]


def test_a_new_value_supersedes_the_old_turn_and_ranks_first(tmp_path) -> None:
    with _memory(tmp_path) as mem:
        _ingest(mem)
        assert mem.get("old")["superseded_by"] == "new" and mem.get("new")["supersedes"] == "old"
        assert "superseded_by" not in mem.get("other")
        assert mem.get("old")["superseded_at"] == mem.get("new")["ts"]  # when the world changed
        res = mem.retrieve("How many hours have I spent on my ocean sculpture now?", k=4)
        ids = [it.id for it in res.items]
        assert ids.index("new") == ids.index("old") - 1  # the history right below its version
        item = next(it for it in res.items if it.id == "old")
        assert item.superseded_by == "new" and item.superseded_at is not None
        for it in res.items:  # the shown terms still add up to the score
            assert sum(it.components.terms().values()) == pytest.approx(it.score)
        past = mem.retrieve("How many hours had I spent on the sculpture before?", k=4)
        ids = [it.id for it in past.items]
        assert ids.index("old") == ids.index("new") + 1  # the past too: the history right below
    with Synapse.load(tmp_path / "m", embedder=HashingEmbedder()) as again:  # snapshot reload
        assert again.get("old")["superseded_by"] == "new"
        assert again.retrieve("ocean sculpture hours now", k=3).items[0].id == "new"


def test_switched_off_nothing_is_superseded(tmp_path) -> None:
    with _memory(tmp_path, on=False) as mem:
        _ingest(mem)
        assert all("superseded_by" not in ep for ep in mem.episodes())


def test_assistant_turns_are_never_superseded_by_the_rule(tmp_path) -> None:
    with _memory(tmp_path) as mem:
        mem.add_turns([{"text": OLD, "speaker": "assistant", "id": "a1"},
                       {"text": NEW, "speaker": "assistant", "id": "a2"}])
        assert "superseded_by" not in mem.get("a1")


def test_rank_versions_against_hand_computed_scores() -> None:
    view = Compiled.from_arrays(["a", "b", "c", "x"], np.eye(4), src=[], dst=[], weight=[],
                                is_episode=[True] * 4,
                                attrs={"superseded_by": ["b", "c", None, None]})
    cand = np.arange(4)
    got = rank_versions(view, cand, np.array([0.9, 0.2, 0.4, 0.5]), weight=0.5)
    # the chain a -> b -> c ranks at its best score 0.9, newest first
    assert got[2] == 0.9 and got[1] == pytest.approx(0.9 - 1e-6) and got[0] == pytest.approx(0.9 - 2e-6)
    assert got[3] == 0.5
    past = rank_versions(view, cand, np.array([0.9, 0.2, 0.4, 0.5]), weight=0.5, tense="past")
    assert list(past) == list(got)  # the past too: the newest first, its history right below
    alone = rank_versions(view, np.array([0, 3]), np.array([0.9, 0.5]), weight=0.5)
    assert list(alone) == [0.45, 0.5]  # replacement not reached: weight x its score
    assert list(rank_versions(view, np.array([0, 3]), np.array([0.9, 0.5]), weight=0.5,
                              tense="past")) == [0.9, 0.5]


def test_rank_versions_reports_the_pairs_it_placed() -> None:
    view = Compiled.from_arrays(["old", "new", "x"], np.eye(3), src=[], dst=[], weight=[],
                                is_episode=[True] * 3, attrs={"superseded_by": ["new", None, None]})
    placed: list[tuple[int, int]] = []
    rank_versions(view, np.arange(3), np.array([0.9, 0.4, 0.5]), weight=0.5, placed=placed)
    assert placed == [(1, 0)]  # (newer, older) positions in cand
    placed.clear()  # the replacement not among the candidates: nothing placed
    rank_versions(view, np.array([0, 2]), np.array([0.9, 0.5]), weight=0.5, placed=placed)
    assert placed == []


def test_settle_versions_against_hand_computed_scores() -> None:
    # a chain: 2 replaced 0, which replaced 1; 1 scores best, so both go above it in turn
    got, lift = settle_versions(np.array([0.5, 0.7, 0.2, 0.6]), np.array([[0, 1], [2, 0]]))
    assert got.tolist() == pytest.approx([0.7 + 1e-6, 0.7, 0.7 + 2e-6, 0.6], abs=1e-12)
    assert lift.tolist() == pytest.approx([0.2 + 1e-6, 0.0, 0.5 + 2e-6, 0.0], abs=1e-12)
    # pairs already in order, or none: unchanged
    same, lift = settle_versions(np.array([0.9, 0.4]), np.array([[0, 1]]))
    assert same.tolist() == [0.9, 0.4] and lift.tolist() == [0.0, 0.0]
    assert settle_versions(np.array([0.3]), np.zeros((0, 2), dtype=np.int64))[0].tolist() == [0.3]
    # a tie is not an order: the newer goes right above
    assert settle_versions(np.array([0.4, 0.4]), np.array([[1, 0]]))[0][1] == pytest.approx(0.4 + 1e-6)


def _pass(cand, score, versions=(), superseded=None):
    n = len(cand)
    zero = np.zeros(n)
    adjustments = {name: zero for name in signal_names()}
    if superseded is not None:
        adjustments["superseded"] = np.asarray(superseded, dtype=float)
    return Pass(np.asarray(cand), np.argsort(-np.asarray(score)), np.asarray(score, dtype=float),
                zero, zero, zero, None, None, adjustments, None, {}, {}, None,
                kept={"versions": np.asarray(versions, dtype=np.int64).reshape(-1, 2)})


def test_merging_the_feedback_pass_keeps_each_pass_versions_in_order() -> None:
    # nodes 10 (old) and 11 (its successor), 12 (other). The question's pass placed 11 right
    # above 10; the feedback pass scores 10 far higher (its widened query holds 10's words)
    # and did not place 11: merged, 10 takes its discounted feedback score, and 11 stays
    # right above it, the lift shown as version ranking (superseded)
    first = _pass([10, 11, 12], [0.5, 0.5 + 1e-6, 0.3], versions=[[11, 10]],
                  superseded=[0.0, 0.2, 0.0])
    second = _pass([10, 12], [0.9, 0.2])
    merged = merge_feedback(first, second, Scope(), k=3, discount=0.8)
    assert merged.cand.tolist() == [10, 11, 12]
    assert merged.score[0] == pytest.approx(0.72)  # 0.9 discounted for the hop
    assert merged.score[1] == pytest.approx(0.72 + 1e-6)
    assert merged.superseded[1] == pytest.approx(0.2 + 0.72 + 1e-6 - (0.5 + 1e-6))
    assert merged.cand[merged.order].tolist() == [11, 10, 12]
    assert merged.versions.tolist() == [[11, 10]]
    # without the pair, the merge alone would put the old version first (the case fixed)
    plain = merge_feedback(_pass([10, 11, 12], [0.5, 0.5 + 1e-6, 0.3]), second, Scope(), k=3,
                           discount=0.8)
    assert plain.cand[plain.order].tolist() == [10, 11, 12]


def test_query_tense() -> None:
    assert query_tense("Where do I live now?") == "current"
    assert query_tense("What was my previous goal before I updated it?") == "past"
    assert query_tense("How many bikes do I own?") == "neutral"


def test_the_llm_variant_with_a_fake_chat_model(tmp_path) -> None:
    # asked twice: for OTHER (a statement with a candidate), then for NEW
    model = FakeListChatModel(responses=['{"outdated": []}',
                                         'Sure: {"outdated": ["old", "invented-id"]}'])
    with _memory(tmp_path, lifecycle=Lifecycle(reconsolidator=LLMReconsolidator(model))) as mem:
        _ingest(mem)
        assert mem.get("old")["superseded_by"] == "new"
        assert "superseded_by" not in mem.get("other") and not mem.contains("invented-id")


def test_an_unusable_llm_reply_supersedes_nothing(tmp_path) -> None:
    model = FakeListChatModel(responses=["I cannot tell."] * 20)
    with _memory(tmp_path, lifecycle=Lifecycle.llm(model)) as mem:
        _ingest(mem)
        assert all("superseded_by" not in ep for ep in mem.episodes())


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(InvalidTypeError, match="chat model"):
        LLMReconsolidator(object())
    with pytest.raises(InvalidTypeError, match="reconsolidator"):
        Lifecycle(reconsolidator=object())
    with pytest.raises(ConfigError, match="reconsolidation must be a bool"):
        SynapseConfig(reconsolidation="yes")


def _recent_view(speakers, ts, texts):
    n = len(texts)
    return Compiled.from_arrays([f"t{i}" for i in range(n)], np.eye(n), src=[], dst=[], weight=[],
                                is_episode=[True] * n, attrs={"text": texts, "speaker": speakers,
                                                              "ts": ts, "metadata": [{}] * n})


def test_rank_recent_against_hand_computed_scores() -> None:
    texts = ["I live in Boston near the harbor", "Lunch was good", "I live in Denver now",
             "I live in a flat", "You live in Austin"]
    view = _recent_view(["user", "user", "user", "user", "assistant"], [1.0, 2.0, 3.0, 4.0, 5.0],
                        texts)
    idf = {"live": 1.0, "denver": 3.0, "boston": 3.0, "harbor": 3.0}.get
    score = np.array([0.9, 0.8, 0.3, 0.2, 0.95])
    # "where do I live": mass {live: 1}; t3 (the newest user turn holding it) goes right above
    # the best older user turn holding it (t0 at 0.9); the assistant's t4 is no version
    placed: list[tuple[int, int]] = []
    got = rank_recent(view, np.arange(5), score, lambda t: idf(t, 1.0), "Where do I live?",
                      placed=placed)
    assert got[3] == pytest.approx(0.9 + 1e-6) and list(got[[0, 1, 2, 4]]) == [0.9, 0.8, 0.3, 0.95]
    assert placed == [(3, 0)]  # the newest, and the older turn it went above
    # "live near the harbor": only t0 holds "harbor" (3 of 4 of the mass): the newest turn
    # holding 60% is t0 itself, nothing older: unchanged
    same = rank_recent(view, np.arange(5), score, lambda t: idf(t, 1.0), "Do I live near the harbor?")
    assert list(same) == list(score)
    # a question about the past, or a window too small to hold both versions: unchanged
    assert list(rank_recent(view, np.arange(5), score, lambda t: idf(t, 1.0), "Where do I live?",
                            tense="past")) == list(score)
    assert list(rank_recent(view, np.arange(5), score, lambda t: idf(t, 1.0), "Where do I live?",
                            window=2)) == list(score)


def test_rank_recent_lifts_successors_for_the_present() -> None:
    texts = ["Sam: My gym is IronWorks near home", "Ann: IronWorks is loud",
             "Sam: I cancelled IronWorks for Pulse", "Sam: Pulse and IronWorks both closed early",
             "Sam: home cooking tonight"]
    view = _recent_view(["Sam", "Ann", "Sam", "Sam", "Sam"], [1.0, 2.0, 3.0, 4.0, 5.0], texts)
    idf = {"ironworks": 3.0, "home": 1.0, "near": 1.0, "gym": 2.0}
    score = np.array([0.9, 0.8, 0.3, 0.2, 0.25])
    q, names = "Which gym does Sam go to now?", ["Sam", "Ann"]
    # the answer t0 ("gym"); its own words ironworks 3 + near 1 + home 1 = 5 (the question's
    # "gym" and the name "sam" left out). Ann's t1 is not Sam; t2 and t3 restate 3/5 >= 0.2,
    # t4 restates "home" 1/5 = 0.2 >= 0.2 too and is the newest: it goes right above t0
    placed: list[tuple[int, int]] = []
    got = rank_recent(view, np.arange(5), score, lambda t: idf.get(t, 1.0), q, tense="current",
                      names=names, placed=placed)
    assert got[4] == pytest.approx(0.9 + 1e-6)
    assert placed == [(4, 0)]  # the successor and the answer it restates
    assert list(got[[0, 1, 2, 3]]) == [0.9, 0.8, 0.3, 0.2]
    # a higher bar (0.25): "home" alone is not enough, t3 (3/5) is now the newest successor
    got = rank_recent(view, np.arange(5), score, lambda t: idf.get(t, 1.0), q, tense="current",
                      names=names, successor_share=0.25)
    assert got[3] == pytest.approx(0.9 + 1e-6) and list(got[[0, 1, 2, 4]]) == [0.9, 0.8, 0.3, 0.25]
    # not a question about the present: nothing moves (no turn holds 60% and is newer)
    assert list(rank_recent(view, np.arange(5), score, lambda t: idf.get(t, 1.0), q.replace(" now", ""),
                            names=names)) == list(score)


def _two_versions(tmp_path, cfg: SynapseConfig, speaker: str, old: str, new: str) -> Synapse:
    """A memory of ``speaker``'s ``old`` turn (id "old"), a turn about the weather ("x") and,
    two months later, the ``new`` one ("new")."""
    mem = Synapse(str(tmp_path / "m"), config=cfg, embedder=HashingEmbedder())
    mem.add_turns([{"text": old, "speaker": speaker, "timestamp": "2024-01-01T00:00:00Z",
                    "id": "old"},
                   {"text": "Weather talk, nothing else.", "speaker": speaker,
                    "timestamp": "2024-01-02T00:00:00Z", "id": "x"},
                   {"text": new, "speaker": speaker, "timestamp": "2024-03-01T00:00:00Z",
                    "id": "new"}])
    return mem


def test_a_successor_is_shown_first_but_does_not_decide_the_gate(tmp_path) -> None:
    cfg = SynapseConfig(consolidation_interval=0)
    with _two_versions(tmp_path, cfg, "Jon", "My gym is IronWorks.",
                       "I cancelled IronWorks and joined Pulse Fitness downtown.") as mem:
        now = mem.retrieve("Which gym does Jon go to now?", k=3)
        off = {it.id: it for it in mem.retrieve("Which gym does Jon go to now?", k=3,
                                                config=cfg.replace(version_recency=False)).items}
        assert [it.id for it in now.items][:2] == ["new", "old"]  # the successor right above
        assert off["old"].score > off["new"].score  # by its words alone it ranks below
        # the gate judges the turn the question found, not the version lifted above it, by
        # its plain cosine (the ranking's leaves the name "Jon" out: speaker_free_cosine)
        view = mem._state.compiled()
        plain = float(view.embeddings[view.index["old"]] @ mem._embedder.embed_query(
            "Which gym does Jon go to now?"))
        assert now.confidence == pytest.approx(plain, abs=1e-6)
        assert now.confidence != pytest.approx(off["old"].components.similarity, abs=1e-3)
        assert now.items[0].components.superseded > 0


def test_version_recency_is_a_switch(tmp_path) -> None:
    cfg = SynapseConfig(consolidation_interval=0)
    with _two_versions(tmp_path, cfg, "Sam", "I keep 3 bikes in the garage.",
                       "These days I keep 4 bikes in my garage.") as mem:
        q = "How many bikes do I keep in the garage?"
        on = {it.id: it.score for it in mem.retrieve(q, k=3).items}
        off = {it.id: it.score for it in mem.retrieve(
            q, k=3, config=cfg.replace(version_recency=False)).items}
        assert on["new"] > on["old"] == off["old"]  # the newest version right above the older
        assert on["new"] == pytest.approx(max(off["old"], off["new"]) + 1e-6)
        with pytest.raises(Exception, match="version_recency"):
            SynapseConfig(version_recency="yes")
