"""LangGraph adapter: memory nodes for any ``StateGraph`` and a SYNAPSE-backed ``BaseStore``.
Needs ``pip install 'synapse-integrations[langgraph]'``.

>>> from synapse_integrations.langgraph import EnginePool, SynapseMemoryNodes, SynapseStore
>>> memory = SynapseMemoryNodes(EnginePool("./memory"))       # doctest: +SKIP
>>> builder.add_node("recall", memory.recall)                 # doctest: +SKIP
>>> builder.add_node("record", memory.record)                 # doctest: +SKIP
>>> graph = builder.compile(checkpointer=saver, store=SynapseStore("./store"))  # doctest: +SKIP
"""

from __future__ import annotations

from .._adapter_utils import require
from ..namespace_keys import namespace_key
from ..pool import EnginePool

require("langgraph", "langgraph")

from .nodes import MEMORY_MESSAGE_ID, SynapseMemoryNodes, SynapseMemoryState, with_memories  # noqa: E402
from .store import SynapseStore  # noqa: E402

__all__ = ["MEMORY_MESSAGE_ID", "EnginePool", "namespace_key", "SynapseMemoryNodes", "SynapseMemoryState", "SynapseStore",
           "with_memories"]
