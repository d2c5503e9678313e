"""A fake tool-calling chat model shared by the adapter tests (hosted models cannot run here)."""

from __future__ import annotations

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel


class ToolCallingFake(FakeMessagesListChatModel):
    """A fake chat model that accepts tools and records every prompt it was given
    (``seen``: pass ``seen=[]`` per instance)."""

    seen: list = []

    def bind_tools(self, tools, **kwargs):  # noqa: ANN001, ANN003
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
