"""``SynapseRetriever``: a LangChain ``BaseRetriever`` over one SYNAPSE memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._adapter_utils import DEFAULT_EMPTY_TEXT, item_metadata, require, speaker_prefix
from ..types import RetrievalResult

require("langchain_core", "langchain")

from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict, Field  # noqa: E402

#: Name of the custom callback event sent when the uncertainty gate rejects a query.
GATE_EVENT = "synapse_gate_rejected"


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


def _documents(result: RetrievalResult, kinds: tuple[str, ...], include_rejected: bool) -> list[Document]:
    items = result.items if include_rejected else result.accepted
    return [Document(page_content=it.text, id=it.id, metadata=item_metadata(it))
            for it in items if it.kind in kinds]


def _gate_data(result: RetrievalResult) -> dict[str, Any]:
    return {"query": result.query, "rejected": result.rejected, "confidence": result.confidence,
            "gate_tau": result.gate_tau, "candidates": len(result.items)}


class SynapseRetriever(BaseRetriever):
    """Retrieve memories from a :class:`~synapse_integrations.Synapse` engine.

    Each ``Document`` carries in its metadata ``id``, ``kind``, ``speaker``, ``timestamp``
    (event time, ISO 8601), ``score``, ``components`` (similarity, activation, PageRank, BM25
    and dense anchor ranks), ``path`` and the turn's own ``metadata``.

    When the uncertainty gate rejects a query, the retriever returns **no documents** and says
    so to the run's callbacks: an ``on_text`` message and a custom event named
    ``"synapse_gate_rejected"`` (visible in ``astream_events`` and ``on_custom_event``) with the
    query, the confidence and the threshold. A chain shows "nothing in memory" by formatting
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
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: Any = Field(description="The Synapse memory to search.")
    k: int = Field(default=10, ge=1, description="Number of memories to return.")
    kinds: tuple[str, ...] = ("episode",)
    include_rejected: bool = False

    def _k(self, k: int | None) -> int:
        return self.k if k is None else k

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None) -> list[Document]:
        result = self.engine.retrieve(query, k=self._k(k), kinds=self.kinds)
        if result.rejected:
            run_manager.on_text(f"SYNAPSE gate: nothing in memory for {query!r} "
                                f"(confidence {result.confidence:.3f} < {result.gate_tau})")
            run_manager.get_child().on_custom_event(GATE_EVENT, _gate_data(result),
                                                    run_id=run_manager.run_id)
        return _documents(result, self.kinds, self.include_rejected)

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None) -> list[Document]:
        result = await self.engine.aretrieve(query, k=self._k(k), kinds=self.kinds)
        if result.rejected:
            await run_manager.on_text(f"SYNAPSE gate: nothing in memory for {query!r} "
                                      f"(confidence {result.confidence:.3f} < {result.gate_tau})")
            await run_manager.get_child().on_custom_event(GATE_EVENT, _gate_data(result),
                                                          run_id=run_manager.run_id)
        return _documents(result, self.kinds, self.include_rejected)
