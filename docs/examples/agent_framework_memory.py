"""A Microsoft Agent Framework agent with memora_pg's memory and history.

    python docs/examples/agent_framework_memory.py

The first session tells the agent something; a second session, with a new history, is given it
back by MemoraContextProvider. The chat model here is a stand-in that repeats what it was given,
so the example runs offline; use any Agent Framework chat client instead (OpenAIChatClient, ...).
Without a language model configured the provider stores the user's messages as they are; with
one (MemoryConfig's llm) it stores the facts the model extracts. The example's user is new on each
run, and what it wrote is deleted at the end: memories of anyone else are left alone.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from agent_framework import Agent, BaseChatClient, ChatResponse, FunctionInvocationLayer, Message

from memora_pg.agent_framework import MemoraContextProvider, MemoraHistoryProvider
from memora_pg.mem0 import AsyncMemory


class Parrot(FunctionInvocationLayer, BaseChatClient):
    """Answers with the best memory it was given, or with a nod."""

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any], **kwargs: Any
    ) -> Awaitable[ChatResponse]:
        recalled = [
            line.removeprefix("- ")
            for m in messages
            if m.text.startswith("## Memories")
            for line in m.text.splitlines()
            if line.startswith("- ")
        ]
        reply = recalled[0] if recalled else "Noted."  # the best memory, if any

        async def answer() -> ChatResponse:
            return ChatResponse(messages=[Message("assistant", [reply])])

        return answer()


async def main() -> None:
    memory = AsyncMemory()  # the embedded server and the local embedder; MemoryConfig(...) for others
    user_id = f"example-concierge-{uuid.uuid4().hex[:8]}"  # this run's own user
    try:
        agent = Agent(
            Parrot(),
            context_providers=[
                MemoraHistoryProvider(memory, user_id=user_id),
                MemoraContextProvider(memory, user_id=user_id, agent_id="concierge"),
            ],
        )
        first = await agent.run("I'm vegetarian, please remember it.", session=agent.create_session())
        print("session 1:", first.text)
        second = await agent.run("What should I eat tonight?", session=agent.create_session())
        print("session 2:", second.text)
        await memory.delete_all(user_id=user_id)
    finally:
        await memory.close()


if __name__ == "__main__":
    asyncio.run(main())
