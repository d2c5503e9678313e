"""The architecture stays easy to see: small modules with one job, no module reaching into
another object's private fields, retrieval models pluggable, adapters typed by Protocol."""

from __future__ import annotations

import ast
from pathlib import Path

from _toy_models import Recency

import synapse_integrations
from synapse_integrations import HashingEmbedder, MemoryEngine, Synapse, SynapseConfig
from synapse_integrations.core import models

PACKAGE = Path(synapse_integrations.__file__).parent
SOURCES = sorted(PACKAGE.rglob("*.py"))
MAX_LINES = 500  # issue 46: no file over 500 lines


def test_no_module_is_over_500_lines() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in SOURCES
            if (n := len(p.read_text("utf-8").splitlines())) > MAX_LINES}
    assert not long, f"split these modules: {long}"


def test_no_module_reaches_into_another_objects_private_fields() -> None:
    found = []
    for p in SOURCES:
        for node in ast.walk(ast.parse(p.read_text("utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    continue
                if isinstance(owner, ast.Name) and owner.id == "os" and node.attr == "_exit":
                    continue
                found.append(f"{p.relative_to(PACKAGE)}:{node.lineno} .{node.attr}")
    assert not found, "private attributes used from outside their object:\n" + "\n".join(found)


def test_the_engine_implements_the_protocol_the_adapters_use() -> None:
    with Synapse(embedder=HashingEmbedder()) as mem:
        assert isinstance(mem, MemoryEngine)


def test_a_retrieval_model_is_one_class_and_one_registration_line() -> None:
    models.register("recency", Recency)
    try:
        with Synapse(embedder=HashingEmbedder(), config=SynapseConfig(consolidation_interval=0)) as mem:
            ids = mem.add_turns([{"text": f"note {i} about the garden", "timestamp": 1000.0 * i}
                                 for i in range(6)])
            cfg = mem.config.replace(model="recency", weight_similarity=0.0, weight_lexical=0.0,
                                     weight_pagerank=0.0, weight_activation=1.0)
            res = mem.retrieve("garden", k=6, config=cfg)
            assert [it.id for it in res.items] == ids[::-1]  # newest first
            assert res.items[0].components.activation == 1.0
    finally:
        models.unregister("recency")


def test_an_unknown_model_is_a_clear_error() -> None:
    import pytest

    from synapse_integrations.errors import ConfigError

    with Synapse(embedder=HashingEmbedder()) as mem:
        mem.add_turn("hello there")
        with pytest.raises(ConfigError, match="unknown retrieval model 'nope'.*synapse"):
            mem.retrieve("hello", config=mem.config.replace(model="nope"))
