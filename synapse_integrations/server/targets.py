"""Where an operator command works: a memory folder or a memory server.

:func:`open_target` opens one of two targets with the same methods (add, retrieve, inspect,
history, supersede, verify, repair, forget, export, existing ids, archive): a folder through the service, which
takes its lock (``--path DIR``), or a server through :class:`~.client.RemoteMemory`
(``--url URL``, with the API key of :func:`api_key`). The commands of :mod:`.commands` call
only those methods, so each works the same on both.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import InvalidInputError

ENV_KEY = "SYNAPSE_API_KEY"


class _Local:
    def __init__(self, args: argparse.Namespace) -> None:
        from .service import MemoryService, make_embedder

        self.ns = args.namespace
        self.svc = MemoryService(args.path, embedder=make_embedder(args.embedder))

    def add(self, turns: list[dict[str, Any]]) -> list[str]:
        return self.svc.add_turns(self.ns, turns)

    def retrieve(self, query: str, k: int | None, **kw: Any) -> dict[str, Any]:
        return self.svc.retrieve(self.ns, query, k, **kw)

    def inspect(self, node_id: str | None, query: str | None) -> dict[str, Any]:
        return self.svc.inspect(self.ns, node_id, query=query)

    def history(self, node_id: str) -> list[dict[str, Any]]:
        return self.svc.history(self.ns, node_id)

    def supersede(self, old_id: str, new_id: str) -> None:
        self.svc.supersede(self.ns, old_id, new_id)

    def verify(self) -> dict[str, Any]:
        return self.svc.verify(self.ns)

    def repair(self) -> dict[str, Any]:
        return self.svc.repair(self.ns)

    def forget(self, ids: list[str] | None, **kw: Any) -> list[str]:
        return self.svc.forget(self.ns, ids, **kw)

    def export(self, with_vectors: bool) -> Iterable[dict[str, Any]]:
        return self.svc.export(self.ns, with_vectors=with_vectors)

    def existing_ids(self) -> set[str]:
        if self.ns not in self.svc.namespaces():
            return set()
        return {e["id"] for e in self.svc.engine(self.ns).episodes(include_archived=True)}

    def archive(self, ids: list[str]) -> list[str]:
        return self.svc.archive(self.ns, ids)

    def close(self) -> None:
        self.svc.close()


class _Remote:
    def __init__(self, args: argparse.Namespace) -> None:
        from .client import RemoteMemory

        self.mem = RemoteMemory(args.url, args.namespace, api_key=api_key(args), timeout=args.timeout,
                                create=False)  # an operator's typo must not create a memory

    def add(self, turns: list[dict[str, Any]]) -> list[str]:
        return self.mem.add_turns(turns)

    def retrieve(self, query: str, k: int | None, **kw: Any) -> dict[str, Any]:
        return self.mem.retrieve_explained(query, k, **kw)

    def inspect(self, node_id: str | None, query: str | None) -> dict[str, Any]:
        return self.mem.inspect(node_id, query=query)

    def history(self, node_id: str) -> list[dict[str, Any]]:
        return self.mem.history(node_id)

    def supersede(self, old_id: str, new_id: str) -> None:
        self.mem.supersede(old_id, new_id)

    def verify(self) -> dict[str, Any]:
        from .wire import report_to_wire

        return report_to_wire(self.mem.verify())

    def repair(self) -> dict[str, Any]:
        from .wire import report_to_wire

        return report_to_wire(self.mem.repair())

    def forget(self, ids: list[str] | None, **kw: Any) -> list[str]:
        return self.mem.forget(ids, **kw)

    def export(self, with_vectors: bool) -> Iterable[dict[str, Any]]:
        return self.mem.export(with_vectors=with_vectors)

    def existing_ids(self) -> set[str]:
        from ..errors import UnknownNamespaceError

        try:
            return {e["id"] for e in self.mem.episodes(include_archived=True)}
        except UnknownNamespaceError:
            return set()

    def archive(self, ids: list[str]) -> list[str]:
        return self.mem.archive(ids)

    def close(self) -> None:
        self.mem.close()


def api_key(args: argparse.Namespace) -> str | None:
    return getattr(args, "api_key", None) or os.environ.get(ENV_KEY) or None


@contextlib.contextmanager
def open_target(args: argparse.Namespace) -> Iterator[Any]:
    if bool(args.path) == bool(args.url):
        raise InvalidInputError("say where the memory is: --path DIR (a folder) or --url URL (a server)")
    target = _Remote(args) if args.url else _Local(args)
    try:
        yield target
    finally:
        target.close()
