"""LangChain adapter: SYNAPSE memory as a retriever, a classic memory, a chat history, agent
middleware and agent tools. Needs ``pip install 'synapse-integrations[langchain]'``.

>>> from synapse_integrations import Synapse
>>> from synapse_integrations.langchain import SynapseRetriever
>>> mem = Synapse("./memory", namespace="user-42")            # doctest: +SKIP
>>> retriever = SynapseRetriever(engine=mem, k=5)              # doctest: +SKIP
>>> retriever.invoke("Who came skiing?")                       # doctest: +SKIP
[Document(page_content='I went skiing with Dana.', metadata={'id': 'ep-...', ...})]
"""

from __future__ import annotations

from .._adapter_utils import require
from ..namespace_keys import namespace_key
from ..pool import EnginePool

require("langchain_core", "langchain")

from .agents import SynapseMemoryMiddleware, create_synapse_tools  # noqa: E402
from .history import SynapseChatMessageHistory  # noqa: E402
from .memory import SynapseMemory  # noqa: E402
from .retrievers import SynapseRetriever, format_documents  # noqa: E402

__all__ = [
    "EnginePool",
    "namespace_key",
    "SynapseChatMessageHistory",
    "SynapseMemory",
    "SynapseMemoryMiddleware",
    "SynapseRetriever",
    "create_synapse_tools",
    "format_documents",
]
