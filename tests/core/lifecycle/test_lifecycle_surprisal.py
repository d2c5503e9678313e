"""The surprisal gate (issue 15): the kernel against hand-computed values, low salience in
the engine, the LLM predictor with a fake chat model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from synapse_integrations import HashingEmbedder, Synapse, SynapseConfig
from synapse_integrations.core.lifecycle.detectors import Lifecycle
from synapse_integrations.core.lifecycle.surprisal import (
    LLMPredictor, WindowPredictor, is_filler, surprisal, window_prediction,
)
from synapse_integrations.errors import ConfigError, InvalidTypeError


def test_the_kernel_against_hand_computed_values() -> None:
    assert surprisal(np.array([1.0, 0.0]), np.array([0.6, 0.8])) == pytest.approx(0.4)
    assert surprisal(np.array([0.0, 0.0]), np.array([1.0, 0.0])) == 1.0  # nothing predicted
    assert surprisal(np.array([1.0, 0.0]), np.array([-1.0, 0.0])) == 1.0  # clipped to [0, 1]
    window = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    assert window_prediction(window) == pytest.approx([0.5, 0.5, 0.0])
    on_mean = np.array([1.0, 1.0, 0.0]) / math.sqrt(2)
    assert surprisal(window_prediction(window), on_mean) == pytest.approx(0.0, abs=1e-12)
    # (1, 0, 0) against the mean (0.5, 0.5, 0): cos = 0.5 / (1 * sqrt(0.5)) = 0.7071
    assert surprisal(window_prediction(window), np.array([1.0, 0.0, 0.0])) == \
        pytest.approx(1 - 1 / math.sqrt(2))
    assert surprisal(window_prediction(window), np.array([0.0, 0.0, 1.0])) == 1.0


def test_filler_is_unsurprising_whatever_its_embedding() -> None:
    wp = WindowPredictor()
    window = np.array([[1.0, 0.0]])
    assert wp.surprisal("user: ok thanks!", np.array([0.0, 1.0]), ["x"], window, None) == 0.0
    assert not is_filler("user: She moved to Chicago.")
    assert not is_filler("ok, 42")  # a number is content
    assert wp.surprisal("first words ever said here", np.array([0.0, 1.0]), [],
                        np.zeros((0, 2)), None) == 1.0  # no window: nothing predicted


def _gated(tmp_path, **kw):
    cfg = SynapseConfig(surprisal_gate=True, consolidation_interval=0, low_salience_weight=0.5)
    return Synapse(tmp_path / "g", embedder=HashingEmbedder(), config=cfg, **kw)


def test_low_salience_turns_are_stored_and_score_less(tmp_path) -> None:
    with _gated(tmp_path) as mem:
        ids = mem.add_turns([{"text": "Dana got into vet school in Ohio", "id": "a"},
                             {"text": "ok thanks, sounds good", "id": "b"},
                             {"text": "Dana starts vet school in Ohio in the fall", "id": "c"}])
        assert ids == ["a", "b", "c"] and mem.get("b")["low_salience"] is True
        assert mem.get("b")["salience"] == 0.0 and mem.get("a")["salience"] == 1.0
        assert "low_salience" not in mem.get("c")
        item = next(it for it in mem.retrieve("ok thanks sounds good", k=3).items if it.id == "b")
        assert item.components.salience < 0
        assert sum(item.components.terms().values()) == pytest.approx(item.score)
    with Synapse.load(tmp_path / "g", embedder=HashingEmbedder()) as again:
        assert again.get("b")["low_salience"] is True


def test_the_gate_switched_off_marks_nothing(tmp_path) -> None:
    with Synapse(embedder=HashingEmbedder()) as mem:
        mem.add_turns(["Dana got into vet school", "ok thanks"])
        assert all("salience" not in ep for ep in mem.episodes())


def test_the_llm_predictor_with_a_fake_chat_model(tmp_path) -> None:
    # the model predicts exactly the next turn: surprisal 0, low salience
    model = FakeListChatModel(responses=["Dana starts in the fall"])
    with _gated(tmp_path, lifecycle=Lifecycle(predictor=LLMPredictor(model))) as mem:
        mem.add_turns([{"text": "Dana got into vet school", "id": "a"},
                       {"text": "Dana starts in the fall", "id": "b"}])
        assert mem.get("a")["salience"] == 1.0  # an empty window predicts nothing
        assert mem.get("b")["salience"] == pytest.approx(0.0, abs=1e-6)
        assert mem.get("b")["low_salience"] is True


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(InvalidTypeError, match="chat model"):
        LLMPredictor("not a model")
    with pytest.raises(ConfigError, match="surprisal_tau"):
        SynapseConfig(surprisal_tau=1.5)
    with pytest.raises(ConfigError, match="surprisal_window"):
        SynapseConfig(surprisal_window=0)
