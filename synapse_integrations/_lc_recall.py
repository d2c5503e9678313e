"""One traced recall for every LangChain-side adapter (retriever, agent middleware, memory
tools, classic memory, LangGraph nodes): needs only ``langchain_core``.

Every recall is a *retriever run* in the run's callbacks (so in LangSmith, in
``astream_events`` and in any ``BaseCallbackHandler``): ``on_retriever_start`` with the
query, ``on_retriever_end`` with the documents (the memories returned, with their
metadata), and, inside that run, the gate's decision as the custom event
:data:`GATE_EVENT` (plus :data:`GATE_REJECTED_EVENT` and an ``on_text`` line when the gate
rejected the query).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForRetrieverRun,
    CallbackManager,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config

from ._adapter_utils import item_metadata
from .types import MemoryEngine, RetrievalResult

if TYPE_CHECKING:
    from .gate_judge import LLMGateJudge

__all__ = ["GATE_EVENT", "GATE_REJECTED_EVENT", "arecall", "documents", "gate_data", "recall",
           "report_gate", "areport_gate"]

#: Custom callback event sent for every recall: the gate's decision.
GATE_EVENT = "synapse_gate"
#: Custom callback event sent when the uncertainty gate rejects a query.
GATE_REJECTED_EVENT = "synapse_gate_rejected"


def documents(result: RetrievalResult, kinds: Sequence[str] = ("episode",),
              include_rejected: bool = False) -> list[Document]:
    """The memories of ``result`` as ``Document``s (none when the gate rejected it)."""
    items = result.items if include_rejected else result.accepted
    return [Document(page_content=it.text, id=it.id, metadata=item_metadata(it))
            for it in items if it.kind in kinds]


def gate_data(result: RetrievalResult) -> dict[str, Any]:
    """The gate's decision as event data."""
    verdict = result.verdict
    return {"query": result.query, "rejected": result.rejected, "confidence": result.confidence,
            "gate_tau": result.gate_tau, "candidates": len(result.items),
            "ids": [it.id for it in result.accepted],
            "check": verdict.check if verdict is not None else None,
            "reason": result.reason, "evidence_id": verdict.evidence_id if verdict is not None else None}


def _rejected_text(result: RetrievalResult) -> str:
    why = result.reason or f"confidence {result.confidence:.3f} < {result.gate_tau}"
    return f"SYNAPSE gate: nothing in memory for {result.query!r} ({why})"


def report_gate(run_manager: CallbackManagerForRetrieverRun, result: RetrievalResult) -> None:
    """Tell the retriever run's callbacks what the gate decided."""
    child = run_manager.get_child()
    child.on_custom_event(GATE_EVENT, gate_data(result), run_id=run_manager.run_id)
    if result.rejected:
        run_manager.on_text(_rejected_text(result))
        child.on_custom_event(GATE_REJECTED_EVENT, gate_data(result), run_id=run_manager.run_id)


async def areport_gate(run_manager: AsyncCallbackManagerForRetrieverRun,
                       result: RetrievalResult) -> None:
    """Async twin of :func:`report_gate`."""
    child = run_manager.get_child()
    await child.on_custom_event(GATE_EVENT, gate_data(result), run_id=run_manager.run_id)
    if result.rejected:
        await run_manager.on_text(_rejected_text(result))
        await child.on_custom_event(GATE_REJECTED_EVENT, gate_data(result), run_id=run_manager.run_id)


def _configure(cls: Any, config: RunnableConfig | None) -> Any:
    config = ensure_config(config)  # inside a runnable: the current run's config
    return cls.configure(config.get("callbacks"), None, inheritable_tags=config.get("tags"),
                         inheritable_metadata={**(config.get("metadata") or {}),
                                               "ls_retriever_name": "synapse"})


def recall(engine: MemoryEngine, query: str, *, k: int, config: RunnableConfig | None = None,
           name: str = "synapse_recall", kinds: Sequence[str] = ("episode",),
           include_rejected: bool = False, judge: LLMGateJudge | None = None,
           time: Mapping[str, Any] | None = None) -> tuple[RetrievalResult, list[Document]]:
    """Retrieve ``query`` from ``engine`` as a traced retriever run (child of the current
    run when called inside one), read at ``time`` (``time_kwargs``: ``as_of``,
    ``current_only``); with a ``judge``, what the offline gate accepted is reviewed by it
    before the gate is reported. Returns the engine's result and the documents."""
    manager = _configure(CallbackManager, config)
    run = manager.on_retriever_start(None, query, name=name)
    try:
        result = engine.retrieve(query, k=k, kinds=tuple(kinds), **(time or {}))
        if judge is not None:
            result = judge.review(result)
        docs = documents(result, kinds, include_rejected)
        report_gate(run, result)
    except Exception as exc:
        run.on_retriever_error(exc)
        raise
    run.on_retriever_end(docs)
    return result, docs


async def arecall(engine: MemoryEngine, query: str, *, k: int,
                  config: RunnableConfig | None = None, name: str = "synapse_recall",
                  kinds: Sequence[str] = ("episode",), include_rejected: bool = False,
                  judge: LLMGateJudge | None = None, time: Mapping[str, Any] | None = None
                  ) -> tuple[RetrievalResult, list[Document]]:
    """Async twin of :func:`recall`."""
    manager = _configure(AsyncCallbackManager, config)
    run = await manager.on_retriever_start(None, query, name=name)
    try:
        result = await engine.aretrieve(query, k=k, kinds=tuple(kinds), **(time or {}))
        if judge is not None:
            result = await judge.areview(result)
        docs = documents(result, kinds, include_rejected)
        await areport_gate(run, result)
    except Exception as exc:
        await run.on_retriever_error(exc)
        raise
    await run.on_retriever_end(docs)
    return result, docs
