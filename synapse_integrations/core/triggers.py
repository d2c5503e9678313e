"""The dual trigger's lexical side (section 3.2): the tokenizer and the BM25 index.

The retrieval pipeline (:mod:`.retrieval`) picks the BM25 anchors with
:meth:`BM25Index.query` and the dense anchors from the in-memory cosines. The index
(:mod:`.bm25`) is updated in place as turns arrive; the tokenizer (:mod:`.tokens`) is the
same for documents and queries.
"""

from __future__ import annotations

from .bm25 import BM25Index
from .tokens import STOPWORDS, tokenize

__all__ = ["STOPWORDS", "BM25Index", "tokenize"]
