"""Argument checks with upstream Memora's exact messages (memora-semantics.md §5.1).

Each raises :class:`InvalidInputError`, a ``ValueError`` and a ``TypeError`` at once, before
any database work.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from memora_pg.errors import InvalidInputError
from memora_pg.graph.interactions import Message
from memora_pg.graph.memories import NewMemory
from memora_pg.graph.versions import Requested
from memora_pg.ids import new_memory_id, parse_memory_id
from memora_pg.models import MemoriesAndInteraction

logger = logging.getLogger(__name__)

ORG_NAME = "`org_name` must be a string and have a value."
ORG_ID = "`org_id` must be a string and have a value."
ORG_AND_NEW_NAME = "Both `org_id` and `new_org_name` must be a string and have a value."
ORG_AND_AGENT_LABEL = "Both `org_id` and `agent_label` must be a string and have a value."
AGENT_USER_ID = "`user_id` must be a string."
UPDATE_AGENT = "`org_id`, `agent_id` and `new_agent_name` must be strings and have a value."
ORG_AND_AGENT = "`org_id` and `agent_id` must be strings and have a value."
ORG_AND_USER = "`org_id` and `user_id` must be strings and have a value."
ORG_AND_USER_NAME = "Both `org_id` and `user_name` must be a string and have a value."
UPDATE_USER = "`org_id`, `user_id` and `new_user_name` must be strings and have a value."
ORG_USER_AGENT = "`org_id`, `user_id` and `agent_id` must be strings and have a value."
ORG_USER_INTERACTION = "`org_id`, `user_id` and `interaction_id` must be strings and have a value."
SKIP_LIMIT = "`skip` and `limit` must be integers."
SKIP_LIMIT_NEGATIVE = "`skip` and `limit` must not be negative."
ORG_USER_MEMORY = "`org_id`, `user_id` and `memory_id` must be strings and have a value."
AGENT_ID = "`agent_id` must be a string."

# NotFoundError messages, as upstream words them.
ORG_MISSING = "Organization (`org_id`) does not exist."
USER_MISSING = "User (`org_id`, `user_id`) does not exist."
AGENT_MISSING = "Agent (`org_id`, `agent_id`) does not exist."
INTERACTION_MISSING = "Interaction (`org_id`, `user_id`, `interaction_id`) does not exist."
MEMORY_MISSING = "Memory (`org_id`, `user_id`, `memory_id`) does not exist."

# Names and ids are stored as PostgreSQL text, which cannot hold a NUL character.
MAX_NAME_LENGTH = 10_000


def has_value(value: object) -> bool:
    return isinstance(value, str) and value != ""


def require(message: str, *values: object) -> None:
    """Every value must be a non-empty string without NUL characters."""
    if not all(has_value(value) for value in values):
        raise InvalidInputError(message)
    for value in values:
        no_nul(value, "ids and names")  # type: ignore[arg-type]


def no_nul(value: str, what: str) -> None:
    if "\x00" in value:
        raise InvalidInputError(f"{what} must not contain NUL characters (PostgreSQL text cannot store them).")


def require_name(message: str, name: object) -> None:
    require(message, name)
    assert isinstance(name, str)
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidInputError(f"Names are limited to {MAX_NAME_LENGTH} characters.")


def optional_id(message: str, value: object) -> str | None:
    """Upstream's rule for optional ids: falsy means absent, anything else must be a string."""
    if not value:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(message)
    no_nul(value, "ids")
    return value


def paging(skip: object, limit: object) -> tuple[int, int]:
    # bool is an int in Python; a flag passed as skip or limit is a caller's mistake
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (skip, limit)):
        raise InvalidInputError(SKIP_LIMIT)
    assert isinstance(skip, int)
    assert isinstance(limit, int)
    if skip < 0 or limit < 0:
        raise InvalidInputError(SKIP_LIMIT_NEGATIVE)
    return skip, limit


# Limits, so that one call can neither exhaust the server nor hold locks for long.
MAX_MEMORY_CHARS = 100_000
MAX_MESSAGE_CHARS = 1_000_000
MAX_MESSAGES = 10_000
MAX_MEMORIES_PER_CALL = 1_000
MAX_FETCH_ENTRIES = 10_000


def memory_text(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidInputError("A memory must be a string.")
    no_nul(value, "memory texts")
    if len(value) > MAX_MEMORY_CHARS:
        raise InvalidInputError(f"A memory is limited to {MAX_MEMORY_CHARS} characters.")
    return value


# -- the shapes of a save, an update and a resolved fetch (memora-semantics.md §2, §6) -------


def optional_paging(skip: int, limit: int | None) -> tuple[int, int | None]:
    if limit is None:
        return paging(skip, 0)[0], None
    return paging(skip, limit)


def payload(value: object) -> MemoriesAndInteraction:
    """Accept memora_pg's model, upstream memora-core's (by its attributes), or a plain dict."""
    if isinstance(value, MemoriesAndInteraction):
        return value
    try:
        if isinstance(value, dict):
            return MemoriesAndInteraction.model_validate(value)
        return MemoriesAndInteraction.model_validate(value, from_attributes=True)
    except ValidationError as error:
        raise InvalidInputError(f"Invalid memories_and_interaction: {error}") from error


def messages(payload: MemoriesAndInteraction) -> list[Message]:
    if len(payload.interaction) > MAX_MESSAGES:
        raise InvalidInputError(f"An interaction is limited to {MAX_MESSAGES} messages.")
    found = []
    for block in payload.interaction:
        role, content = block.get("role"), block.get("content")
        for value in (role, content):
            if value is not None:
                no_nul(value, "message roles and contents")
                if len(value) > MAX_MESSAGE_CHARS:
                    raise InvalidInputError(f"A message is limited to {MAX_MESSAGE_CHARS} characters.")
        found.append(Message(role, content))
    return found


def new_memories(payload: MemoriesAndInteraction, message_count: int) -> list[NewMemory]:
    """The memories to write, ids generated: first ``memories``, then ``contrary_memories`` (§2)."""
    given = [*payload.memories, *payload.contrary_memories]
    if len(given) > MAX_MEMORIES_PER_CALL:
        raise InvalidInputError(f"At most {MAX_MEMORIES_PER_CALL} memories are stored in one call.")
    items = []
    for item in given:
        text = memory_text(item.memory)
        for position in item.source_msg_block_pos:
            if not 0 <= position < message_count:
                raise InvalidInputError(
                    f"source_msg_block_pos {position} is outside the interaction's {message_count} messages."
                )
        target = getattr(item, "existing_contrary_memory_id", None)
        supersedes = parse_memory_id(target) if target is not None else None
        if target is not None and supersedes is None:
            logger.warning("contrary memory names %r, which is not a memory id; stored without a link", target)
        items.append(
            NewMemory(memory_id=new_memory_id(), text=text, positions=item.source_msg_block_pos, supersedes=supersedes)
        )
    return items


def requested(batch: int, position: int, entry: object) -> Requested | None:
    """An entry of a resolved fetch, or None for one that names no memory (skipped, as upstream)."""
    if not isinstance(entry, dict):
        return None
    org_id, user_id, memory_id = entry.get("org_id"), entry.get("user_id"), entry.get("memory_id")
    if not (has_value(org_id) and has_value(user_id)):
        return None
    parsed = parse_memory_id(memory_id)
    if parsed is None or "\x00" in str(org_id) + str(user_id):
        return None
    assert isinstance(org_id, str)
    assert isinstance(user_id, str)
    return Requested(batch=batch, position=position, org_id=org_id, user_id=user_id, memory_id=parsed)
