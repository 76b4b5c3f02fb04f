"""The pydantic models of the Memora contract, field for field as upstream memora-core 0.3.1 has them.

The graph and vector stores return these; upstream's agent only duck-types them, so
memora_pg does not depend on memora-core.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, TypeVar

from pydantic import BaseModel, Field, field_validator

M = TypeVar("M", bound=BaseModel)


class Organization(BaseModel):
    org_id: str
    org_name: str
    created_at: datetime


class Agent(BaseModel):
    org_id: str
    agent_id: str
    user_id: str | None = None
    agent_label: str
    created_at: datetime


class User(BaseModel):
    org_id: str
    user_id: str
    user_name: str
    created_at: datetime


class MessageBlock(BaseModel):
    role: str | None = None
    content: str | None = None
    msg_position: int


class Memory(BaseModel):
    org_id: str
    agent_id: str
    user_id: str
    interaction_id: str | None = None
    memory_id: str
    memory: str
    obtained_at: datetime
    message_sources: list[MessageBlock] | None = None

    def id_memory_and_timestamp_dict(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id, "memory": self.memory, "obtained_at": str(self.obtained_at)}

    def memory_and_timestamp_dict(self) -> dict[str, Any]:
        return {"memory": self.memory, "obtained_at": str(self.obtained_at)}


class Interaction(BaseModel):
    org_id: str
    user_id: str
    agent_id: str
    interaction_id: str
    created_at: datetime
    updated_at: datetime
    messages: list[MessageBlock] | None = None
    memories: list[Memory] | None = None


class MemoryToStore(BaseModel):
    memory: str
    source_msg_block_pos: list[int]


class ContraryMemoryToStore(MemoryToStore):
    existing_contrary_memory_id: str


def _now() -> datetime:
    return datetime.now(timezone.utc)


class MemoriesAndInteraction(BaseModel):
    """What one save or update writes: the complete message list, its date and the new memories.

    Unlike upstream, whose default for ``interaction_date`` is evaluated once at import time,
    an omitted ``interaction_date`` is the current time of the call, in UTC. A naive datetime
    is taken as UTC.
    """

    interaction: list[dict[str, str]] = Field(default_factory=list)
    interaction_date: datetime = Field(default_factory=_now)
    memories: list[MemoryToStore] = Field(default_factory=list)
    contrary_memories: list[ContraryMemoryToStore] = Field(default_factory=list)

    @field_validator("interaction_date")
    @classmethod
    def _aware_utc(cls, value: datetime) -> datetime:
        return as_utc(value)


def as_utc(value: datetime) -> datetime:
    """Naive datetimes are taken as UTC; aware ones are converted to UTC (the instant is kept)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def from_row(model: type[M], row: Any) -> M | None:
    """``model`` validated from a row's columns by name; None for no row."""
    return None if row is None else model.model_validate(dict(row.items()))


def trusted(model: type[M], values: dict[str, Any]) -> M:
    """``model`` holding ``values``: every field, each already of its field's type, not validated.

    This is what ``model_construct`` makes of such values, without its loop over every field's
    aliases and defaults, which was most of the time of a read that returns thousands of models
    (a page of interactions). ``values`` becomes the model's ``__dict__``: pass a dict of its own,
    in the fields' order. Only for the plain models here (no extra fields, no post-init). Pydantic's
    private attributes set here are listed in :mod:`memora_pg.private_api`.
    """
    instance = model.__new__(model)
    object.__setattr__(instance, "__dict__", values)
    object.__setattr__(instance, "__pydantic_fields_set__", set(values))
    object.__setattr__(instance, "__pydantic_extra__", None)
    object.__setattr__(instance, "__pydantic_private__", None)
    return instance
