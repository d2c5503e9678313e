"""Concept extraction: turn one consolidation window of turns into semantic items.

The engine calls an extractor once per consolidation window (every ``N = 5`` turns,
SYNAPSE section 3.1 and Algorithm 1, line 11). The extractor proposes concepts and
typed relations; deduplication against the graph and the abstraction edges are the
engine's job, not the extractor's.

Two extractors are provided:

* :class:`OfflineExtractor` needs no model and no network. It is deterministic and fast
  (well under a millisecond per window) and aims at *bridge* concepts: speakers, named
  entities and content key phrases that recur across sessions, so that turns about the
  same person or topic in different sessions meet at the same concept node.
* :class:`LLMExtractor` asks any LangChain chat model for the paper's schema
  (appendix A.2: nodes with name/type/confidence/attributes, edges with
  src/rel/tgt/weight). It needs ``pip install synapse-integrations[llm]``; this module
  itself never imports ``langchain_core`` at import time.

>>> from synapse_integrations.types import Turn
>>> window = [
...     Turn("t1", "I went skiing with Mark in New York last week.", speaker="Caroline"),
...     Turn("t2", "Mark again? How was the ski trip?", speaker="Melanie"),
... ]
>>> result = OfflineExtractor().extract(window)
>>> [(c.name, c.type) for c in result.concepts][:4]
[('Caroline', 'Person'), ('Melanie', 'Person'), ('Mark', 'Entity'), ('New York', 'Entity')]
>>> next(c for c in result.concepts if c.name == "Mark").source_ids
('t1', 't2')
>>> result.relations
(Relation(src='Mark', rel='co_mentioned', tgt='New York', weight=0.5),)
"""

from __future__ import annotations

from .llm import ExtractorStats, LLMExtractor
from .offline import OfflineExtractor
from .protocol import BaseExtractor, Extractor, takes_names
from .schema import ExtractedEdge, ExtractedNode, ExtractionSchema
from .stats import window_stats

__all__ = [
    "BaseExtractor",
    "ExtractedEdge",
    "ExtractedNode",
    "ExtractionSchema",
    "Extractor",
    "ExtractorStats",
    "LLMExtractor",
    "OfflineExtractor",
    "takes_names",
    "window_stats",
]
