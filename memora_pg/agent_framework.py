"""Microsoft Agent Framework providers on memora_pg (``memora_pg[agent-framework]``).

* :class:`MemoraContextProvider` gives an agent long-term memory: before each run it searches the
  user's memories with the run's input and adds what it found as one message; after the run it
  stores the turn, extracting facts through the memory's language model when one is configured.
* :class:`MemoraHistoryProvider` keeps a session's messages as a Memora interaction (the session id
  is the interaction id): each turn's new messages are appended in one call of the schema's
  ``open_interaction``, in order, with an audit row, and a later process reads them back. The
  interaction is Memora's own: ``update_interaction_and_memories`` of the Memora face can extend it.

Both take the mem0-style :class:`~memora_pg.mem0.AsyncMemory` (its database, embedder and model).
``tenant_id`` (else ``application_id``) names the organization, so with ``row_level_security`` on
and a role that does not own the tables, PostgreSQL itself keeps tenants apart; given both,
``application_id`` is the agent the rows are written by.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agent_framework import AgentSession, ContextProvider, HistoryProvider, Message, SessionContext, SupportsAgentRun

from memora_pg.errors import InvalidInputError
from memora_pg.graph import audit, interactions
from memora_pg.mem0.memory import AsyncMemory

DEFAULT_PROMPT = "## Memories\nWhat you know about the user from earlier conversations:"
# The roles a memory or a history row keeps: tool calls and results are the run's business, not the user's.
KEPT_ROLES = ("user", "assistant", "system")


def _organization(memory: AsyncMemory, tenant_id: str | None, application_id: str | None) -> AsyncMemory:
    org_id = tenant_id or application_id
    return memory.for_organization(org_id) if org_id else memory


def _texts(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.text} for m in messages if m.role in KEPT_ROLES and m.text.strip()]


class MemoraContextProvider(ContextProvider):
    """Long-term memory for an Agent Framework agent: recall before a run, remember after it."""

    def __init__(
        self,
        memory: AsyncMemory,
        *,
        user_id: str,
        agent_id: str | None = None,
        tenant_id: str | None = None,
        application_id: str | None = None,
        top_k: int = 5,
        threshold: float | None = None,
        as_of: datetime | None = None,
        infer: bool | None = None,
        context_prompt: str = DEFAULT_PROMPT,
        source_id: str = "memora",
    ) -> None:
        """``user_id``: whose memories are searched and written. ``as_of`` searches the memories as
        they were then; ``threshold`` is the lowest score recalled (as in ``AsyncMemory.search``: by default, the
        memories related to the query at all).
        ``infer`` (default: when the memory has a language model) extracts facts from each turn, the
        assistant's replies giving the model their context. False stores the user's own messages as they
        are, and only those: without a model to tell a fact from a reply, an assistant's "Noted!" is not
        something the user said about themselves."""
        super().__init__(source_id)
        if not isinstance(user_id, str) or not user_id.strip():
            raise InvalidInputError("MemoraContextProvider needs a user_id")
        self.memory = _organization(memory, tenant_id, application_id)
        self.user_id = user_id
        self.agent_id = agent_id or (application_id if tenant_id else None)
        self.top_k = top_k
        self.threshold = threshold
        self.as_of = as_of
        self.infer = memory.can_infer if infer is None else infer
        self.context_prompt = context_prompt

    async def before_run(
        self, *, agent: SupportsAgentRun, session: AgentSession, context: SessionContext, state: dict[str, Any]
    ) -> None:
        query = "\n".join(m.text for m in context.input_messages if m.text.strip())
        if not query:
            return
        found = await self.memory.search(
            query, filters={"user_id": self.user_id}, top_k=self.top_k, threshold=self.threshold, as_of=self.as_of
        )
        lines = [f"- {hit['memory']}" for hit in found["results"]]
        if lines:
            context.extend_messages(self, [Message("user", ["\n".join([self.context_prompt, *lines])])])

    async def after_run(
        self, *, agent: SupportsAgentRun, session: AgentSession, context: SessionContext, state: dict[str, Any]
    ) -> None:
        if self.infer:
            response = context.response.messages if context.response is not None else []
            turn = _texts([*context.input_messages, *response])
        else:
            turn = [message for message in _texts(context.input_messages) if message["role"] == "user"]
        if turn:
            await self.memory.add(
                turn, user_id=self.user_id, agent_id=self.agent_id, run_id=context.session_id, infer=self.infer
            )


class MemoraHistoryProvider(HistoryProvider):
    """A session's messages as a Memora interaction: the session id is the interaction id.

    What survives is each message's role and text (user, assistant and system messages with text);
    tool calls and their results are not kept. Every row is the user's, under the organization, so
    the Memora face, reports and erasure see the conversation like any other.
    """

    def __init__(
        self,
        memory: AsyncMemory,
        *,
        user_id: str,
        agent_id: str = "agent-framework",
        tenant_id: str | None = None,
        application_id: str | None = None,
        source_id: str = "memora_history",
        load_messages: bool = True,
        store_inputs: bool = True,
        store_outputs: bool = True,
    ) -> None:
        super().__init__(source_id, load_messages=load_messages, store_inputs=store_inputs, store_outputs=store_outputs)
        if not isinstance(user_id, str) or not user_id.strip():
            raise InvalidInputError("MemoraHistoryProvider needs a user_id")
        self.memory = _organization(memory, tenant_id, application_id)
        self.user_id = user_id
        self.agent_id = application_id if tenant_id and application_id else agent_id

    def _key(self, session_id: str | None) -> dict[str, Any]:
        if not session_id:
            raise InvalidInputError("MemoraHistoryProvider needs a session with an id")
        return {"org_id": self.memory.org_id, "interaction_id": session_id, "user_id": self.user_id}

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Message]:
        await self.memory.ensure_ready()
        key = self._key(session_id)
        # On the primary: a session reads what it has just written.
        stored = await self.memory.database.retrying(
            lambda conn: interactions.conversation(conn, **key), org_id=key["org_id"]
        )
        return [Message(message.role or "user", [message.content or ""]) for message in stored]

    async def save_messages(
        self, session_id: str | None, messages: Sequence[Message], *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        turn = _texts(messages)
        if not turn:
            return
        for message in turn:
            if "\x00" in message["content"]:
                raise InvalidInputError("a message cannot contain NUL characters")
        await self.memory.ensure_ready()
        key = self._key(session_id)
        audited = audit.entry(
            self.memory.database.settings.audit,
            "agent_framework.save_messages",
            user_id=self.user_id,
            agent_id=self.agent_id,
            ids={"interaction_id": session_id, "messages": len(turn)},
        )
        new = [interactions.Message(m["role"], m["content"]) for m in turn]
        appended = await self.memory.database.retrying(
            lambda conn: interactions.append_turn(
                conn, **key, org_name=key["org_id"], agent_id=self.agent_id, new=new, audited=audited
            ),
            org_id=key["org_id"],
        )
        if not appended:
            raise InvalidInputError(f"session {session_id!r} is another user's conversation")
