"""The MCP tools: mem0-style memory (``AsyncMemory``) for any agent that speaks the Model Context Protocol.

Every tool acts for a *caller*: an organization, and a user the caller is bound to or defaults to.
Over stdio the caller is the one the command line names. Over HTTP it is the bearer token's
(:mod:`memora_pg.mcp.tokens`): a tool argument can narrow what a call sees, never widen it past the
token. A failure the caller can act on (a bad filter, an unknown id, a token's user mismatch) comes
back as a tool error with memora_pg's error class and message; anything else as the SDK's generic
"Error executing tool", with the traceback only in the server's log.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from memora_pg.errors import AlreadyExistsError, InvalidInputError, NotFoundError
from memora_pg.mem0.memory import AsyncMemory

ENTITY_KEYS = ("user_id", "agent_id", "run_id")

Clock = Literal["valid", "system"]
CLOCK = (
    "The clock of as_of: 'valid' (what was true at that time, by when each fact was learned and "
    "superseded) or 'system' (what the store held at that time, as a backup of then would show it)."
)

INSTRUCTIONS = (
    "Long-term memory, kept in PostgreSQL. Search it before answering a question that may depend on "
    "what the user said before; add what the user tells you about themselves, their preferences and "
    "their plans. Memories belong to a user (user_id), an agent (agent_id) or a run (run_id)."
)


@dataclass(frozen=True)
class Caller:
    """Whom a call acts for: its organization, and a user it is bound to (enforced) or defaults to."""

    org_id: str
    bound_user: str | None = None
    default_user: str | None = None


def token_caller() -> Caller:
    """The caller of an HTTP request, from its verified bearer token (``TokenVerifier`` put it there)."""
    token = get_access_token()
    claims = token.claims if token is not None else None
    if not claims or not claims.get("org_id"):
        # The SDK's bearer middleware answers 401 before any tool runs; this is the backstop.
        raise ToolError("This request carries no valid access token.")
    return Caller(org_id=str(claims["org_id"]), bound_user=claims.get("user_id"))


class Turn(BaseModel):
    """One message of a conversation."""

    role: Literal["user", "assistant", "system"] = Field(description="Who said it.")
    content: str = Field(description="What was said.")


@contextlib.contextmanager
def _as_tool_errors() -> Iterator[None]:
    """The caller's mistakes reach the model as tool errors it can read and act on; the database's,
    the embedder's and the model's failures stay in the server's log (the SDK's generic tool error)."""
    try:
        yield
    except (InvalidInputError, NotFoundError, AlreadyExistsError) as error:
        raise ToolError(f"{type(error).__name__}: {error}") from error


def _entity_filters(caller: Caller, filters: dict[str, Any] | None, **ids: str | None) -> dict[str, Any]:
    """``filters`` with the named entity ids added, and the caller's user imposed or defaulted."""
    if filters is not None and not isinstance(filters, dict):
        raise ToolError("filters must be an object.")
    combined = dict(filters or {})
    for key, value in ids.items():
        if value is None:
            continue
        if key in combined and combined[key] != value:
            raise ToolError(f"{key} is given twice, as {value!r} and in filters as {combined[key]!r}.")
        combined[key] = value
    if caller.bound_user is not None:
        if combined.get("user_id", caller.bound_user) != caller.bound_user:
            raise ToolError(f"This access token is bound to user {caller.bound_user!r}.")
        combined["user_id"] = caller.bound_user
    elif caller.default_user is not None and not any(key in combined for key in ENTITY_KEYS):
        combined["user_id"] = caller.default_user
    return combined


def build_server(
    memory: AsyncMemory,
    *,
    caller: Callable[[], Caller],
    can_infer: bool,
    name: str = "memora-pg",
    **server_options: Any,
) -> MCPServer:
    """An ``MCPServer`` whose tools act on ``memory``, each call for the organization ``caller()`` names.

    ``can_infer``: a language model is configured, so ``add_memory`` extracts facts by default.
    ``server_options`` go to ``MCPServer`` (the HTTP transport's ``token_verifier`` and ``auth``).
    """
    server = MCPServer(name, instructions=INSTRUCTIONS, **server_options)

    def memory_of(who: Caller) -> AsyncMemory:
        return memory.for_organization(who.org_id)

    async def owned(who: Caller, memory_id: str) -> dict[str, Any]:
        """The memory, if it exists and the caller may see it (a bound caller: only its user's)."""
        found = await memory_of(who).get(memory_id)
        if found is None or (who.bound_user is not None and found.get("user_id") != who.bound_user):
            raise ToolError(f"No memory with id {memory_id!r}.")
        return found

    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    destroys = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

    @server.tool(title="Add memory", annotations=writes)
    async def add_memory(
        text: Annotated[str | None, Field(description="A fact to remember, in plain words.")] = None,
        messages: Annotated[
            list[Turn] | None, Field(description="A conversation to remember (instead of text).")
        ] = None,
        user_id: Annotated[str | None, Field(description="The user the memory is about.")] = None,
        agent_id: Annotated[str | None, Field(description="The agent the memory belongs to.")] = None,
        run_id: Annotated[str | None, Field(description="The run or session the memory belongs to.")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Any JSON object kept with it.")] = None,
        infer: Annotated[
            bool | None,
            Field(
                description="Extract short facts with the server's language model (default: when it has one); "
                "false stores the text or messages as given."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Remember something: a fact, or a conversation from which facts are extracted. Returns the
        memories added, updated or deleted, each with its id and event (ADD, UPDATE, DELETE)."""
        if (text is None) == (messages is None):
            raise ToolError("Give exactly one of text or messages.")
        if infer and not can_infer:
            raise ToolError("This server has no language model configured: call add_memory with infer=false.")
        who = caller()
        ids = _entity_filters(who, None, user_id=user_id, agent_id=agent_id, run_id=run_id)
        given: str | list[dict[str, Any]] = text if text is not None else [turn.model_dump() for turn in messages or []]
        with _as_tool_errors():
            return await memory_of(who).add(
                given, **ids, metadata=metadata, infer=can_infer if infer is None else infer
            )

    @server.tool(title="Search memories", annotations=reads)
    async def search_memories(
        query: Annotated[str, Field(description="What to look for, in natural language.")],
        filters: Annotated[
            dict[str, Any] | None,
            Field(
                description="mem0's filter language: user_id, agent_id, run_id and metadata keys, with "
                "operators (eq, ne, gt, gte, lt, lte, in, nin, contains, icontains) and AND, OR, NOT."
            ),
        ] = None,
        user_id: Annotated[str | None, Field(description="Only this user's memories.")] = None,
        agent_id: Annotated[str | None, Field(description="Only this agent's memories.")] = None,
        run_id: Annotated[str | None, Field(description="Only this run's memories.")] = None,
        top_k: Annotated[int, Field(ge=1, le=100, description="How many memories to return.")] = 10,
        as_of: Annotated[
            datetime | None,
            Field(description="Search the memories as they were at this time (ISO 8601), not as they are now."),
        ] = None,
        as_of_clock: Annotated[Clock, Field(description=CLOCK)] = "valid",
    ) -> dict[str, Any]:
        """Find the memories most relevant to a query (meaning and words), best first, each with its score."""
        who = caller()
        scoped = _entity_filters(who, filters, user_id=user_id, agent_id=agent_id, run_id=run_id)
        with _as_tool_errors():
            return await memory_of(who).search(query, filters=scoped, top_k=top_k, as_of=as_of, as_of_clock=as_of_clock)

    @server.tool(title="List memories", annotations=reads)
    async def get_memories(
        filters: Annotated[dict[str, Any] | None, Field(description="As in search_memories.")] = None,
        user_id: Annotated[str | None, Field(description="Only this user's memories.")] = None,
        agent_id: Annotated[str | None, Field(description="Only this agent's memories.")] = None,
        run_id: Annotated[str | None, Field(description="Only this run's memories.")] = None,
        top_k: Annotated[int, Field(ge=1, le=1000, description="How many memories to return.")] = 100,
        as_of: Annotated[datetime | None, Field(description="List the memories as they were at this time.")] = None,
        as_of_clock: Annotated[Clock, Field(description=CLOCK)] = "valid",
    ) -> dict[str, Any]:
        """List the memories that match the filters, newest first."""
        who = caller()
        scoped = _entity_filters(who, filters, user_id=user_id, agent_id=agent_id, run_id=run_id)
        with _as_tool_errors():
            return await memory_of(who).get_all(filters=scoped, top_k=top_k, as_of=as_of, as_of_clock=as_of_clock)

    @server.tool(title="Get memory", annotations=reads)
    async def get_memory(memory_id: Annotated[str, Field(description="The memory's id.")]) -> dict[str, Any]:
        """One memory by its id."""
        with _as_tool_errors():
            return await owned(caller(), memory_id)

    @server.tool(title="Update memory", annotations=writes)
    async def update_memory(
        memory_id: Annotated[str, Field(description="The memory's id.")],
        text: Annotated[
            str | None, Field(description="Its new text (a new version; the old one stays in history).")
        ] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Keys to set in its metadata.")] = None,
    ) -> dict[str, Any]:
        """Change a memory's text or metadata. The previous text stays in its history."""
        if text is None and metadata is None:
            raise ToolError("Give text, metadata or both.")
        who = caller()
        with _as_tool_errors():
            await owned(who, memory_id)
            return await memory_of(who).update(memory_id, text, metadata=metadata)

    @server.tool(title="Delete memory", annotations=destroys)
    async def delete_memory(memory_id: Annotated[str, Field(description="The memory's id.")]) -> dict[str, Any]:
        """Forget one memory. Its history keeps the DELETE event."""
        who = caller()
        with _as_tool_errors():
            await owned(who, memory_id)
            return await memory_of(who).delete(memory_id)

    @server.tool(title="Delete all memories", annotations=destroys)
    async def delete_all_memories(
        user_id: Annotated[str | None, Field(description="Forget this user's memories.")] = None,
        agent_id: Annotated[str | None, Field(description="Forget this agent's memories.")] = None,
        run_id: Annotated[str | None, Field(description="Forget this run's memories.")] = None,
    ) -> dict[str, Any]:
        """Forget every memory of a user, an agent or a run (at least one must be given or implied)."""
        who = caller()
        ids = _entity_filters(who, None, user_id=user_id, agent_id=agent_id, run_id=run_id)
        with _as_tool_errors():
            return await memory_of(who).delete_all(**ids)

    @server.tool(title="Memory history", annotations=reads)
    async def memory_history(memory_id: Annotated[str, Field(description="The memory's id.")]) -> dict[str, Any]:
        """A memory's versions, oldest first: each ADD, UPDATE and DELETE event with the text before and
        after, when the memory was created (created_at) and when the event happened (updated_at)."""
        who = caller()
        with _as_tool_errors():
            events = await memory_of(who).history(memory_id, user_id=who.bound_user)
        if not events:
            raise ToolError(f"No memory with id {memory_id!r}.")
        return {"memory_id": memory_id, "history": events}

    return server
