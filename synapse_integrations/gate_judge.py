"""An optional second opinion for the gate: any LangChain chat model judges whether the
retrieved evidence supports the question (issue 11).

The offline gate (:mod:`synapse_integrations.core.retrieval.gate`) decides first; a query it
accepted goes to the judge with its top ``k`` memories. The judge answers with JSON
``{"supported": true|false, "quote": "..."}`` (the quote: the memory text that answers).
Each verdict is cached per question and evidence set; a judge that fails, answers
something unreadable or takes longer than ``timeout_s`` leaves the offline decision in
place, and the verdict's reason says so.

>>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
>>> from synapse_integrations.types import RetrievalResult
>>> judge = LLMGateJudge(FakeListChatModel(responses=['{"supported": false, "quote": ""}']))
>>> judge.review(RetrievalResult("q", (), False, 0.9, 0.25)).rejected  # nothing to judge
False
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import re
import threading
from collections import OrderedDict
from typing import Any

from ._adapter_utils import quote_text
from .errors import InvalidInputError
from .types import GateVerdict, RetrievalResult

__all__ = ["JUDGE_PROMPT", "LLMGateJudge"]

JUDGE_PROMPT = (
    "You check a memory system's answer. Question: {question}\n\nRetrieved memories:\n"
    "{evidence}\n\nDo these memories state what the question asks, about the person or thing "
    "it asks about? Reply with JSON only: {{\"supported\": true or false, \"quote\": \"the "
    "memory text that answers, or empty\"}}"
)

_JSON_RE = re.compile(r"\{.*\}", re.S)


class LLMGateJudge:
    """Second-opinion gate with any LangChain chat model (``BaseChatModel``).

    Args:
        model: the chat model (``invoke`` / ``ainvoke`` with a string prompt).
        k: how many of the top memories the judge reads.
        timeout_s: seconds to wait for the model before the offline decision stands.
        cache_size: verdicts kept (least recently used dropped first).
    """

    def __init__(self, model: Any, *, k: int = 5, timeout_s: float = 20.0,
                 cache_size: int = 1024) -> None:
        if not hasattr(model, "invoke"):
            raise InvalidInputError(f"model must be a LangChain chat model, got {type(model).__name__}")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise InvalidInputError(f"k must be an int >= 1, got {k!r}")
        if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or timeout_s <= 0:
            raise InvalidInputError(f"timeout_s must be a number > 0, got {timeout_s!r}")
        self.model, self.k, self.timeout_s = model, k, float(timeout_s)
        self._cache: OrderedDict[tuple[str, tuple[str, ...]], GateVerdict] = OrderedDict()
        self._cache_size = max(0, int(cache_size))
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2,
                                                           thread_name_prefix="synapse-judge")

    # -- the pieces ----------------------------------------------------------------------
    def prompt(self, result: RetrievalResult) -> str:
        """The text the model is asked: each memory on one line, quoted
        (:func:`~synapse_integrations._adapter_utils.quote_text`), so a memory's text can
        neither add evidence lines nor write the verdict's JSON on a line of its own."""
        lines = [f"[{quote_text(it.id)}] {quote_text(it.text)}" for it in result.episodes()[: self.k]]
        return JUDGE_PROMPT.format(question=result.query, evidence="\n".join(lines))

    @staticmethod
    def parse(text: str) -> tuple[bool, str] | None:
        """``(supported, quote)`` from the model's reply, or None when it is unreadable.

        >>> LLMGateJudge.parse('Sure: {"supported": true, "quote": "Sam: I play the cello"}')
        (True, 'Sam: I play the cello')
        >>> LLMGateJudge.parse("no idea") is None
        True
        """
        m = _JSON_RE.search(text or "")
        if m is None:
            return None
        try:
            data = json.loads(m.group())
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("supported"), bool):
            return None
        return data["supported"], str(data.get("quote") or "")

    def _key(self, result: RetrievalResult) -> tuple[str, tuple[str, ...]]:
        return result.query, tuple(it.id for it in result.episodes()[: self.k])

    def _verdict(self, result: RetrievalResult, reply: Any) -> tuple[GateVerdict, bool]:
        """The verdict on ``reply``, and whether the judge decided it (else the offline
        decision stands: an unreadable reply)."""
        text = reply.content if hasattr(reply, "content") else str(reply)
        parsed = self.parse(text if isinstance(text, str) else json.dumps(text))
        if parsed is None:
            return self._fallback(result, "the judge's reply was not the JSON asked for"), False
        supported, quote = parsed
        signals = dict(result.verdict.signals) if result.verdict is not None else {}
        if supported:
            return GateVerdict(False, "accepted", f"accepted: the judge found the answer in "
                               f"memory ({quote[:120]!r})", None, signals), True
        return GateVerdict(True, "judge", "the judge found no memory that states what the "
                           "question asks", None, signals), True

    def _judged(self, result: RetrievalResult, key: tuple[str, tuple[str, ...]],
                reply: Any) -> RetrievalResult:
        """``result`` with the verdict on the model's ``reply`` (cached when the judge
        decided)."""
        verdict, decided = self._verdict(result, reply)
        if decided:
            self._store(key, verdict)
        return self._apply(result, verdict)

    def _failed(self, result: RetrievalResult, exc: BaseException) -> RetrievalResult:
        """``result`` as the offline gate decided it, saying why the judge could not."""
        if isinstance(exc, (concurrent.futures.TimeoutError, asyncio.TimeoutError)):
            why = f"the judge took longer than {self.timeout_s:g}s"
        else:
            why = f"the judge failed: {type(exc).__name__}"
        return self._apply(result, self._fallback(result, why))

    def _fallback(self, result: RetrievalResult, why: str) -> GateVerdict:
        base = result.verdict or GateVerdict(result.rejected, "accepted", "accepted")
        return dataclasses.replace(base, reason=f"{base.reason} ({why}; the offline gate decided)")

    def _apply(self, result: RetrievalResult, verdict: GateVerdict) -> RetrievalResult:
        return dataclasses.replace(result, rejected=verdict.rejected, verdict=verdict)

    def _cached(self, key: tuple[str, tuple[str, ...]]) -> GateVerdict | None:
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        return None

    def _store(self, key: tuple[str, tuple[str, ...]], verdict: GateVerdict) -> None:
        if not self._cache_size:
            return
        with self._lock:
            self._cache[key] = verdict
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    # -- public ----------------------------------------------------------------------------
    def review(self, result: RetrievalResult) -> RetrievalResult:
        """``result`` with the judge's decision (offline rejections and empty results are
        returned as they are)."""
        if result.rejected or not result.episodes():
            return result
        key = self._key(result)
        verdict = self._cached(key)
        if verdict is not None:
            return self._apply(result, verdict)
        future = self._pool.submit(self.model.invoke, self.prompt(result))
        try:
            reply = future.result(timeout=self.timeout_s)
        except Exception as exc:  # a timeout or a provider error must not lose the answer
            return self._failed(result, exc)
        return self._judged(result, key, reply)

    async def areview(self, result: RetrievalResult) -> RetrievalResult:
        """Async twin of :meth:`review` (``ainvoke`` with the same timeout and fallback)."""
        if result.rejected or not result.episodes():
            return result
        key = self._key(result)
        verdict = self._cached(key)
        if verdict is not None:
            return self._apply(result, verdict)
        try:
            reply = await asyncio.wait_for(self.model.ainvoke(self.prompt(result)),
                                           timeout=self.timeout_s)
        except Exception as exc:  # a timeout or a provider error must not lose the answer
            return self._failed(result, exc)
        return self._judged(result, key, reply)
