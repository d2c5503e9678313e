"""``SynapseRetriever``: a LangChain ``BaseRetriever`` over one SYNAPSE memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._adapter_utils import DEFAULT_EMPTY_TEXT, When, feedback_engine, format_memories, \
    memory_ids, require, time_kwargs
from ..types import FeedbackReport

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
    The documents are quoted as data in one ``<memories>`` block, as every adapter renders
    memories (:func:`~synapse_integrations._adapter_utils.format_memories`): a document's
    text cannot start a line of the prompt or close the block.

    >>> format_documents([])
    'Nothing relevant in memory.'
    """
    return format_memories([{**d.metadata, "text": d.page_content} for d in docs], empty=empty)


class SynapseRetriever(BaseRetriever):
    """Retrieve memories from a :class:`~synapse_integrations.Synapse` engine.

    Each ``Document`` carries in its metadata ``id``, ``kind``, ``speaker``, ``timestamp``
    (event time, ISO 8601), ``score``, ``components`` (similarity, activation, PageRank, BM25
    and dense anchor ranks), ``path``, its versions (``supersedes``, ``superseded_by``) and
    when it held (``valid_from``, ``valid_until``: ISO 8601, ``valid_until`` None while it
    holds), and the turn's own ``metadata``.

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

    Time: ``as_of`` reads the memory as it stood then (nothing said later, replacements made
    later undone), ``current_only=True`` hides versions that were replaced (by
    ``Synapse.update`` or ``supersede``); by default an old version is returned right
    below the one that replaced it. Both can be set on the retriever or per call. ``at``
    (per call) is when the question is asked: "last month" in it is read against that time
    (default ``as_of``, else now), for a conversation replayed after the fact:

    >>> SynapseRetriever(engine=mem, current_only=True).invoke("Where does Sam live?")  # doctest: +SKIP
    >>> retriever.invoke("Where did Sam live?", as_of="2024-02-15")   # doctest: +SKIP
    >>> retriever.invoke("What did Sam cook last week?", at="2024-03-09")  # doctest: +SKIP

    Args:
        engine: the memory (a ``Synapse``).
        k: how many items to return by default (override per call: ``invoke(q, k=3)``).
        kinds: which node kinds to return: the memories (``"episode"``, default), and the
            concept nodes that link them too with ``("episode", "concept")``.
        include_rejected: return the ranked items even when the gate rejected the query.
        judge: an optional :class:`~synapse_integrations.gate_judge.LLMGateJudge` (any chat
            model) that reviews what the offline gate accepted.
        as_of: read the memory as it stood at this time (a datetime, epoch seconds or an ISO
            8601 string such as ``"2024-02-15"``); ``None`` (default): now. Override per
            call: ``invoke(q, as_of=...)``.
        current_only: hide versions known to be replaced (override per call:
            ``invoke(q, current_only=True)``).

    After the answer, tell the memory which documents it used (:meth:`feedback`): the
    retrieval model's links between used memories get stronger, the spreading links into
    unused ones weaker (``Synapse.feedback``; docs/models.md).

    >>> docs = retriever.invoke("Where did Sam ski?")                    # doctest: +SKIP
    >>> retriever.feedback("Where did Sam ski?", used=docs[:1], unused=docs[1:])  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: Any = Field(description="The Synapse memory to search.")
    k: int = Field(default=10, ge=1, description="Number of memories to return.")
    kinds: tuple[str, ...] = ("episode",)
    include_rejected: bool = False
    judge: Any = Field(default=None, description="Optional LLMGateJudge reviewing accepted results.")
    as_of: When | None = Field(
        default=None, description="Read the memory as it stood at this time (datetime, epoch "
                                  "seconds or ISO 8601); None: now.")
    current_only: bool = Field(default=False,
                               description="Hide versions known to be replaced by a newer one.")

    def _k(self, k: int | None) -> int:
        return self.k if k is None else k

    def _time(self, as_of: When | None, current_only: bool | None, at: When | None = None
              ) -> dict[str, Any]:
        """The time keywords of this call: the per-call values over the retriever's."""
        return time_kwargs(self.as_of if as_of is None else as_of,
                           self.current_only if current_only is None else current_only, at)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None, as_of: When | None = None,
                                current_only: bool | None = None,
                                at: When | None = None) -> list[Document]:
        result = self.engine.retrieve(query, k=self._k(k), kinds=self.kinds,
                                      **self._time(as_of, current_only, at))
        if self.judge is not None:
            result = self.judge.review(result)
        report_gate(run_manager, result)
        return documents(result, self.kinds, self.include_rejected)

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None, as_of: When | None = None,
                                       current_only: bool | None = None,
                                       at: When | None = None) -> list[Document]:
        result = await self.engine.aretrieve(query, k=self._k(k), kinds=self.kinds,
                                             **self._time(as_of, current_only, at))
        if self.judge is not None:
            result = await self.judge.areview(result)
        await areport_gate(run_manager, result)
        return documents(result, self.kinds, self.include_rejected)

    def feedback(self, query: str, used: Sequence[Document | str],
                 unused: Sequence[Document | str] = ()) -> FeedbackReport:
        """Usage feedback for ``query``: the documents (or memory ids) an answer used, and
        those it was shown and did not use."""
        return feedback_engine(self.engine).feedback(
            query, memory_ids(used, "used"), memory_ids(unused, "unused"))

    async def afeedback(self, query: str, used: Sequence[Document | str],
                        unused: Sequence[Document | str] = ()) -> FeedbackReport:
        """Async twin of :meth:`feedback`."""
        return await feedback_engine(self.engine).afeedback(
            query, memory_ids(used, "used"), memory_ids(unused, "unused"))
