"""The packaged MiniLM: batches of 16 by default (faster on long texts, measured in its
docstring), the same vectors whatever the batch size, bad batch sizes refused."""

from __future__ import annotations

import numpy as np
import pytest

from synapse_integrations import InvalidInputError
from synapse_integrations.embeddings import MiniLMEmbedder


def test_batch_size_changes_no_vector():
    texts = ["hi", "Dana went skiing in Whistler last winter with her brother Omar.",
             "assistant: " + "Here is a long answer about sourdough starters and flour. " * 30,
             "user: what about rye?"] * 5
    small = MiniLMEmbedder().embed_documents(texts)
    large = MiniLMEmbedder(batch_size=64).embed_documents(texts)
    assert MiniLMEmbedder().batch_size == 16
    assert small.shape == (20, 384) and small.dtype == np.float32
    assert np.abs(small - large).max() < 1e-5
    assert np.allclose(np.linalg.norm(small, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "16"])
def test_bad_batch_sizes_are_refused(bad):
    with pytest.raises(InvalidInputError, match="batch_size"):
        MiniLMEmbedder(batch_size=bad)
