"""Identifiers: shortuuid strings for organizations, users, agents and interactions; uuid4 for memories."""

from __future__ import annotations

import uuid

import shortuuid


def new_short_id() -> str:
    """22 characters from the 57-character shortuuid alphabet, as upstream Memora generates them."""
    return str(shortuuid.uuid())


def new_memory_id() -> uuid.UUID:
    return uuid.uuid4()


def parse_memory_id(value: object) -> uuid.UUID | None:
    """The UUID a caller's memory id names, or None when it names none (upstream: "no such memory")."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None
