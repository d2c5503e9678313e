"""``SynapseRetriever``: a LlamaIndex ``BaseRetriever`` over one SYNAPSE memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from .._adapter_utils import When, feedback_engine, item_metadata, memory_ids, require, time_kwargs
from ..gate_judge import LLMGateJudge
from ..types import FeedbackReport, MemoryEngine, RetrievalResult

require("llama_index.core", "llamaindex")

from llama_index.core.callbacks import CallbackManager  # noqa: E402
from llama_index.core.instrumentation import get_dispatcher  # noqa: E402
from llama_index.core.instrumentation.events import BaseEvent  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

__all__ = ["SynapseGateEvent", "SynapseRetriever", "gate_event", "to_nodes"]

dispatcher = get_dispatcher(__name__)


class SynapseGateEvent(BaseEvent):
    """LlamaIndex instrumentation event: the uncertainty gate's decision for one recall
    (sent inside the retrieval span, between ``RetrievalStartEvent`` and
    ``RetrievalEndEvent``)."""

    query: str
    rejected: bool
    confidence: float
    gate_tau: float
    candidates: int
    ids: list[str]
    check: Optional[str] = None  # the gate check that decided ("topic", "attribution", ...)
    reason: str = ""

    @classmethod
    def class_name(cls) -> str:
        return "SynapseGateEvent"


def gate_event(result: RetrievalResult) -> SynapseGateEvent:
    """The gate's decision on ``result`` as an instrumentation event."""
    return SynapseGateEvent(query=result.query, rejected=result.rejected,
                            confidence=float(result.confidence), gate_tau=float(result.gate_tau),
                            candidates=len(result.items), ids=[it.id for it in result.accepted],
                            check=result.verdict.check if result.verdict is not None else None,
                            reason=result.reason)

# what the LLM sees next to a memory's text (and ``valid_until`` once a newer version
# replaced it); the rest of the metadata is for inspection
_LLM_KEYS = ("speaker", "timestamp")


def to_nodes(result: RetrievalResult, *, kinds: tuple[str, ...] = ("episode",),
             include_rejected: bool = False) -> list[NodeWithScore]:
    """``NodeWithScore`` per retrieved item (nothing when the gate rejected the query)."""
    out = []
    for it in (result.items if include_rejected else result.accepted):
        if it.kind not in kinds:
            continue
        meta = item_metadata(it)
        shown = (*_LLM_KEYS, "valid_until") if meta.get("valid_until") else _LLM_KEYS
        hidden = [key for key in meta if key not in shown]
        node = TextNode(id_=it.id, text=it.text, metadata=meta,
                        excluded_llm_metadata_keys=hidden, excluded_embed_metadata_keys=list(meta))
        out.append(NodeWithScore(node=node, score=it.score))
    return out


class SynapseRetriever(BaseRetriever):
    """Retrieve memories from a :class:`~synapse_integrations.Synapse` engine as nodes.

    Each ``TextNode`` carries the same metadata as the LangChain documents (``id``, ``kind``,
    ``speaker``, ``timestamp``, ``score``, ``components``, ``path``, ``supersedes`` /
    ``superseded_by``, ``valid_from`` / ``valid_until``, ``metadata``); the LLM is shown
    the speaker and the time, and ``valid_until`` for a version a newer one replaced. When the uncertainty gate rejects the query the
    retriever returns no nodes, so a query engine answers from an empty context. Every call is
    a retrieval span in LlamaIndex instrumentation (``RetrievalStartEvent``,
    ``RetrievalEndEvent`` with the nodes) with the gate's decision as a
    :class:`SynapseGateEvent` inside it.

    >>> from llama_index.core.query_engine import RetrieverQueryEngine
    >>> retriever = SynapseRetriever(mem, k=5)                             # doctest: +SKIP
    >>> engine = RetrieverQueryEngine.from_args(retriever, llm=llm)        # doctest: +SKIP
    >>> engine.query("Where did Sam go skiing?")                          # doctest: +SKIP

    Time: ``as_of`` reads the memory as it stood then (nothing said later, replacements made
    later undone), ``current_only=True`` hides versions replaced by a newer one (by
    ``Synapse.update`` or ``supersede``); by default an old version comes right below its
    replacement. Both are attributes, so one retriever can be moved in time:

    >>> SynapseRetriever(mem, as_of="2024-02-15").retrieve("Where does Sam live?")  # doctest: +SKIP
    >>> retriever.current_only = True                                      # doctest: +SKIP

    Args:
        engine: the memory (a ``Synapse``).
        k: how many items to return.
        kinds: which node kinds to return: the memories (``"episode"``, default), and the
            concept nodes that link them too with ``("episode", "concept")``.
        include_rejected: return the ranked items even when the gate rejected the query.
        judge: an optional :class:`~synapse_integrations.gate_judge.LLMGateJudge` (any
            LangChain chat model) that reviews what the offline gate accepted (sync and async).
        as_of: read the memory as it stood at this time (a datetime, epoch seconds or an ISO
            8601 string such as ``"2024-02-15"``); ``None`` (default): now.
        current_only: hide versions known to be replaced.

    After an answer, :meth:`feedback` tells the memory which nodes it used (a query
    engine's ``response.source_nodes``, say) and which it did not (``Synapse.feedback``).
    """

    def __init__(self, engine: MemoryEngine, k: int = 10, *, kinds: tuple[str, ...] = ("episode",),
                 include_rejected: bool = False, callback_manager: CallbackManager | None = None,
                 verbose: bool = False, judge: LLMGateJudge | None = None,
                 as_of: When | None = None, current_only: bool = False) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        time_kwargs(as_of, current_only)  # a bad current_only fails here, not at the first query
        self.engine = engine
        self.judge = judge
        self.k = k
        self.kinds = tuple(kinds)
        self.include_rejected = include_rejected
        self.as_of = as_of
        self.current_only = current_only

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = self.engine.retrieve(query_bundle.query_str, k=self.k, kinds=self.kinds,
                                      **time_kwargs(self.as_of, self.current_only))
        if self.judge is not None:
            result = self.judge.review(result)
        dispatcher.event(gate_event(result))
        return to_nodes(result, kinds=self.kinds, include_rejected=self.include_rejected)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = await self.engine.aretrieve(query_bundle.query_str, k=self.k, kinds=self.kinds,
                                             **time_kwargs(self.as_of, self.current_only))
        if self.judge is not None:
            result = await self.judge.areview(result)
        dispatcher.event(gate_event(result))
        return to_nodes(result, kinds=self.kinds, include_rejected=self.include_rejected)

    def feedback(self, query: str, used: Sequence[NodeWithScore | str],
                 unused: Sequence[NodeWithScore | str] = ()) -> FeedbackReport:
        """Usage feedback for ``query``: the nodes (or memory ids) an answer used, and those
        it was shown and did not use."""
        return feedback_engine(self.engine).feedback(
            query, memory_ids(used, "used"), memory_ids(unused, "unused"))

    async def afeedback(self, query: str, used: Sequence[NodeWithScore | str],
                        unused: Sequence[NodeWithScore | str] = ()) -> FeedbackReport:
        """Async twin of :meth:`feedback`."""
        return await feedback_engine(self.engine).afeedback(
            query, memory_ids(used, "used"), memory_ids(unused, "unused"))
