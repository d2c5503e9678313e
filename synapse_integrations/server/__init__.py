"""Serve the memory: many agents and workers share one memory folder.

A memory folder is open in one process at a time (its directory lock); a server is that
process, and any number of clients talk to it:

- :mod:`.rest`: a REST API (FastAPI on uvicorn), ``synapse serve http --path DIR``;
- :mod:`.mcp`: an MCP server (the official ``mcp`` SDK) over stdio or streamable HTTP,
  ``synapse serve mcp --path DIR``;
- :mod:`.client`: :class:`RemoteMemory`, the REST API behind the same
  :class:`~synapse_integrations.types.MemoryEngine` protocol as a local ``Synapse`` (every
  adapter works with it unchanged), and :class:`RemotePool`, an ``EnginePool`` of remote
  memories;
- :mod:`.service`: the operations both servers serve; :mod:`.wire`: their JSON forms;
  :mod:`.transfer`: export and import as JSONL;
- :mod:`.access`: API keys bound to namespace patterns; :mod:`.middleware`: the request
  plumbing (keys, body size) before any handler; :mod:`.serving`: a stop on SIGTERM.

Needs the ``server`` extra (``pip install 'synapse-integrations[server]'``). See
docs/deployment.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MemoryService", "RemoteMemory", "RemotePool", "create_app", "create_mcp_server"]

_WHERE = {"MemoryService": ".service", "RemoteMemory": ".client", "RemotePool": ".client",
          "create_app": ".rest", "create_mcp_server": ".mcp"}


def __getattr__(name: str) -> Any:  # imported on use: each needs its own optional packages
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
