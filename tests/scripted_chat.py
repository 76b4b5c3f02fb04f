"""A scripted Agent Framework chat model for the tests: it answers from a list and keeps every request."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from agent_framework import BaseChatClient, ChatResponse, FunctionInvocationLayer, Message


class ScriptedChat(FunctionInvocationLayer, BaseChatClient):
    """Answers each request with the next reply (then "ok"); ``requests`` holds the messages of each."""

    def __init__(self, *replies: str) -> None:
        super().__init__()
        self.replies = list(replies)
        self.requests: list[list[Message]] = []

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any], **kwargs: Any
    ) -> Awaitable[ChatResponse]:
        self.requests.append(list(messages))
        reply = self.replies.pop(0) if self.replies else "ok"

        async def answer() -> ChatResponse:
            return ChatResponse(messages=[Message("assistant", [reply])], response_id="scripted")

        return answer()

    def seen(self, request: int = -1) -> list[str]:
        """The texts of one request's messages (the last by default)."""
        return [m.text for m in self.requests[request]]
