"""``SynapseRetriever``: a LlamaIndex ``BaseRetriever`` over one SYNAPSE memory."""

from __future__ import annotations

from typing import Any

from .._adapter_utils import item_metadata, require
from ..types import MemoryEngine, RetrievalResult

require("llama_index.core", "llamaindex")

from llama_index.core.callbacks import CallbackManager  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

# what the LLM sees next to a memory's text; the rest of the metadata is for inspection
_LLM_KEYS = ("speaker", "timestamp")


def to_nodes(result: RetrievalResult, *, kinds: tuple[str, ...] = ("episode",),
             include_rejected: bool = False) -> list[NodeWithScore]:
    """``NodeWithScore`` per retrieved item (nothing when the gate rejected the query)."""
    out = []
    for it in (result.items if include_rejected else result.accepted):
        if it.kind not in kinds:
            continue
        meta = item_metadata(it)
        hidden = [key for key in meta if key not in _LLM_KEYS]
        node = TextNode(id_=it.id, text=it.text, metadata=meta,
                        excluded_llm_metadata_keys=hidden, excluded_embed_metadata_keys=list(meta))
        out.append(NodeWithScore(node=node, score=it.score))
    return out


class SynapseRetriever(BaseRetriever):
    """Retrieve memories from a :class:`~synapse_integrations.Synapse` engine as nodes.

    Each ``TextNode`` carries the same metadata as the LangChain documents (``id``, ``kind``,
    ``speaker``, ``timestamp``, ``score``, ``components``, ``path``, ``metadata``); only the
    speaker and the time are shown to the LLM. When the uncertainty gate rejects the query the
    retriever returns no nodes, so a query engine answers from an empty context.

    >>> from llama_index.core.query_engine import RetrieverQueryEngine
    >>> retriever = SynapseRetriever(mem, k=5)                             # doctest: +SKIP
    >>> engine = RetrieverQueryEngine.from_args(retriever, llm=llm)        # doctest: +SKIP
    >>> engine.query("Where did Sam go skiing?")                          # doctest: +SKIP

    Args:
        engine: the memory (a ``Synapse``).
        k: how many items to return.
        kinds: which node kinds to return: the memories (``"episode"``, default), and the
            concept nodes that link them too with ``("episode", "concept")``.
        include_rejected: return the ranked items even when the gate rejected the query.
    """

    def __init__(self, engine: MemoryEngine, k: int = 10, *, kinds: tuple[str, ...] = ("episode",),
                 include_rejected: bool = False, callback_manager: CallbackManager | None = None,
                 verbose: bool = False) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.engine = engine
        self.k = k
        self.kinds = tuple(kinds)
        self.include_rejected = include_rejected

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return to_nodes(self.engine.retrieve(query_bundle.query_str, k=self.k, kinds=self.kinds),
                        kinds=self.kinds, include_rejected=self.include_rejected)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return to_nodes(await self.engine.aretrieve(query_bundle.query_str, k=self.k,
                                                    kinds=self.kinds),
                        kinds=self.kinds, include_rejected=self.include_rejected)
