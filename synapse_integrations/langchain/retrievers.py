"""``SynapseRetriever``: a LangChain ``BaseRetriever`` over one SYNAPSE memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._adapter_utils import DEFAULT_EMPTY_TEXT, require, speaker_prefix

require("langchain_core", "langchain")

from .._lc_recall import GATE_EVENT, GATE_REJECTED_EVENT, areport_gate, documents, report_gate  # noqa: E402

from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict, Field  # noqa: E402

__all__ = ["GATE_EVENT", "GATE_REJECTED_EVENT", "SynapseRetriever", "format_documents"]


def format_documents(docs: Sequence[Document], *, empty: str = DEFAULT_EMPTY_TEXT) -> str:
    """Prompt text for retrieved memories, or ``empty`` when there are none. This is how a
    chain shows "nothing in memory": the retriever returns no documents when the gate rejects.

    >>> format_documents([])
    'Nothing relevant in memory.'
    """
    lines = []
    for d in docs:
        when = (d.metadata.get("timestamp") or "")[:10]
        lines.append(f"- {'[' + when + '] ' if when else ''}"
                     f"{speaker_prefix(d.metadata.get('speaker'), d.page_content)}{d.page_content}")
    return "\n".join(lines) if lines else empty


class SynapseRetriever(BaseRetriever):
    """Retrieve memories from a :class:`~synapse_integrations.Synapse` engine.

    Each ``Document`` carries in its metadata ``id``, ``kind``, ``speaker``, ``timestamp``
    (event time, ISO 8601), ``score``, ``components`` (similarity, activation, PageRank, BM25
    and dense anchor ranks), ``path`` and the turn's own ``metadata``.

    Every call is a retriever run in the callbacks (LangSmith, ``astream_events``) with the
    query and the documents, and reports the gate's decision inside that run as the custom
    event ``"synapse_gate"`` (query, rejected, confidence, threshold, ids returned). When the
    uncertainty gate rejects a query, the retriever returns **no documents** and says so:
    an ``on_text`` message and the custom event ``"synapse_gate_rejected"``. A chain shows "nothing in memory" by formatting
    the empty list, e.g. with :func:`format_documents`:

    >>> from langchain_core.prompts import ChatPromptTemplate
    >>> retriever = SynapseRetriever(engine=mem, k=5)              # doctest: +SKIP
    >>> prompt = ChatPromptTemplate.from_template("Memories:\\n{memories}\\n\\nQ: {question}")
    >>> chain = ({"memories": retriever | format_documents,
    ...           "question": lambda q: q} | prompt | model)          # doctest: +SKIP
    >>> retriever.invoke("Where did Sam ski?", k=3)                   # doctest: +SKIP

    Args:
        engine: the memory (a ``Synapse``).
        k: how many items to return by default (override per call: ``invoke(q, k=3)``).
        kinds: which node kinds to return: the memories (``"episode"``, default), and the
            concept nodes that link them too with ``("episode", "concept")``.
        include_rejected: return the ranked items even when the gate rejected the query.
        judge: an optional :class:`~synapse_integrations.gate_judge.LLMGateJudge` (any chat
            model) that reviews what the offline gate accepted.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: Any = Field(description="The Synapse memory to search.")
    k: int = Field(default=10, ge=1, description="Number of memories to return.")
    kinds: tuple[str, ...] = ("episode",)
    include_rejected: bool = False
    judge: Any = Field(default=None, description="Optional LLMGateJudge reviewing accepted results.")

    def _k(self, k: int | None) -> int:
        return self.k if k is None else k

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None) -> list[Document]:
        result = self.engine.retrieve(query, k=self._k(k), kinds=self.kinds)
        if self.judge is not None:
            result = self.judge.review(result)
        report_gate(run_manager, result)
        return documents(result, self.kinds, self.include_rejected)

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None) -> list[Document]:
        result = await self.engine.aretrieve(query, k=self._k(k), kinds=self.kinds)
        if self.judge is not None:
            result = await self.judge.areview(result)
        await areport_gate(run_manager, result)
        return documents(result, self.kinds, self.include_rejected)
