"""LlamaIndex adapter: SYNAPSE memory as a retriever and as a ``Memory`` block.
Needs ``pip install 'synapse-integrations[llamaindex]'``.

>>> from synapse_integrations.llama_index import SynapseRetriever, SynapseMemoryBlock
>>> from llama_index.core.memory import Memory
>>> retriever = SynapseRetriever(mem, k=5)                                   # doctest: +SKIP
>>> memory = Memory.from_defaults(memory_blocks=[SynapseMemoryBlock(engine=mem)])  # doctest: +SKIP
"""

from __future__ import annotations

from .._adapter_utils import require
from ..namespace_keys import namespace_key
from ..pool import EnginePool

require("llama_index.core", "llamaindex")

from .memory import SynapseChatMemory, SynapseMemoryBlock  # noqa: E402
from .retrievers import SynapseGateEvent, SynapseRetriever  # noqa: E402

__all__ = ["EnginePool", "namespace_key", "SynapseChatMemory", "SynapseGateEvent", "SynapseMemoryBlock",
           "SynapseRetriever"]
