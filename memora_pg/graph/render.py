"""How a memory row becomes the contract's rendered ``Memory``, and its name placeholders.

Name placeholders: stored memory texts say ``user_<id>`` and ``agent_<id>``; reads show current names.

The rule is memora-semantics.md §9.4: a token is ``user_`` or ``agent_`` (any case) not
preceded by a letter, digit or underscore, followed by one or more of ``[A-Za-z0-9-]``. It is
replaced by the current name of the memory's own user or agent, in a single pass (a name
put in is never scanned again), literally, keeping a following ``'s``. A token whose
user or agent no longer exists stays as it is.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from memora_pg.driver import Row
from memora_pg.models import Memory, MessageBlock, trusted
from memora_pg.statements import from_json

_TOKEN = re.compile(r"(?<![A-Za-z0-9_])(?P<kind>user_|agent_)[A-Za-z0-9-]+", re.IGNORECASE | re.ASCII)


def render(text: str, *, user_name: str | None, agent_label: str | None) -> str:
    """``text`` with its placeholders replaced by the given names (None leaves the token)."""

    def replace(match: re.Match[str]) -> str:
        name = user_name if match.group("kind").lower() == "user_" else agent_label
        return match.group(0) if name is None else name

    return _TOKEN.sub(replace, text)


# -- the text a memory, or a query of a user's memories, is embedded as --------------------
#
# Who a memory is about is said one way on both sides of the comparison. The Memora agent stores
# ``user_<id> moved to Lisbon`` and searches with ``user_<id> moved to Berlin``; a person asks
# "Did Jake move?"; a chat turn asks "did the user move?". A memory and the query of a user's
# search are both embedded with the user's placeholder, and "the user", written as the user's
# name, and the agent's placeholder as its label: as a read shows the memory. Only the
# embedding sees this; the full-text arm and every read keep the text as written.

# "the user" and "the user's", in any case.
_THE_USER = re.compile(r"\bthe\s+user(?='s\b|\b)", re.IGNORECASE)


def _owned(match: re.Match[str], user_id: str, agent_id: str | None) -> str | None:
    """The owner kind of a token that names the memory's own user (``user``) or agent (``agent``), else None."""
    kind = match.group("kind").lower()
    named = match.group(0)[len(kind) :]
    if kind == "user_" and named == user_id:
        return "user"
    if kind == "agent_" and agent_id is not None and named == agent_id:
        return "agent"
    return None


def names_own_placeholders(texts: list[str], *, user_id: str, agent_id: str | None) -> bool:
    """Whether any of ``texts`` refers to its user or agent in a way :func:`for_embedding` rewrites:
    a placeholder of the user or the agent, or "the user"."""
    return any(
        _THE_USER.search(text) or any(_owned(match, user_id, agent_id) for match in _TOKEN.finditer(text))
        for text in texts
    )


def for_embedding(
    text: str, *, user_id: str, agent_id: str | None, user_name: str | None, agent_label: str | None
) -> str:
    """The text a memory's embedding (or a query of its user's memories) is computed from: ``text``
    with the placeholders of its own user (``user_<its user_id>``) and agent (``agent_<its
    agent_id>``), and the words "the user", replaced by their names. A placeholder is a random id of
    22 characters, and an embedder reads it as noise: the memories of one user all start with the
    same noise, which pulls their similarities to any query together. Only the memory's own ids are
    replaced, so a text that merely contains ``user_...`` (a mem0-style memory's own words) is
    embedded as written; a missing name leaves its words as they are."""

    def replace(match: re.Match[str]) -> str:
        owner = _owned(match, user_id, agent_id)
        name = user_name if owner == "user" else agent_label if owner == "agent" else None
        return match.group(0) if name is None else name

    placed = _TOKEN.sub(replace, text)
    # A function, not a template: a name is put in literally (a backslash in it is no escape).
    return _THE_USER.sub(lambda _: user_name, placed) if user_name else placed


# -- the rendered memory: its columns, the joins that give names and sources, the model ----

# Appended to a query that names its memories `m` and pins them to the organization :org_id: the
# agent's label and the source messages (in position order), in the same statement. Every table is
# pinned to the constant :org_id, not joined on m.org_id: the same on one server, and what lets
# Citus plan the whole statement on the organization's one shard.
WITH_AGENT_AND_SOURCES = """
LEFT JOIN {schema}.agents AS agent ON agent.org_id = :org_id AND agent.agent_id = m.agent_id
LEFT JOIN LATERAL (
    SELECT json_agg(
               json_build_object('role', msg.role, 'content', msg.content, 'msg_position', src.msg_position)
               ORDER BY src.msg_position
           ) AS sources
    FROM {schema}.memory_sources AS src
    JOIN {schema}.messages AS msg
      ON msg.org_id = :org_id AND msg.interaction_id = src.interaction_id AND msg.msg_position = src.msg_position
    WHERE src.org_id = :org_id AND src.memory_id = m.memory_id
) AS sourced ON true
"""

# The same, and the user's name.
WITH_NAMES_AND_SOURCES = (
    """
LEFT JOIN {schema}.users AS owner ON owner.org_id = :org_id AND owner.user_id = m.user_id"""
    + WITH_AGENT_AND_SOURCES
)

MEMORY_COLUMNS = """
m.org_id, m.user_id, m.agent_id, m.interaction_id, m.memory_id, m.memory, m.obtained_at,
owner.user_name, agent.agent_label, sourced.sources
"""


def to_model(row: Row | dict[str, Any]) -> Memory:
    """A row of MEMORY_COLUMNS (or its JSON form) as the contract's rendered ``Memory``.

    The row's values have their columns' types already (text, a timestamptz, the sources as the
    statement's json_build_object made them), so the models are constructed without validating
    them again: validation was most of a read's time in Python.
    """
    data = row._mapping if isinstance(row, Row) else row
    return trusted(
        Memory,
        {
            "org_id": data["org_id"],
            "agent_id": data["agent_id"],
            "user_id": data["user_id"],
            "interaction_id": data["interaction_id"],
            "memory_id": str(data["memory_id"]),
            "memory": render(data["memory"], user_name=data["user_name"], agent_label=data["agent_label"]),
            "obtained_at": _timestamp(data["obtained_at"]),
            "message_sources": blocks(from_json(data["sources"])),
        },
    )


def hit_model(data: Any) -> Memory:
    """A search hit as upstream's vector store gives it: the memory without its sources or names
    (``data``, a row's mapping, holds the fields' types already)."""
    return trusted(
        Memory,
        {
            "org_id": data["org_id"],
            "agent_id": data["agent_id"],
            "user_id": data["user_id"],
            "interaction_id": None,
            "memory_id": str(data["memory_id"]),
            "memory": data["memory"],
            "obtained_at": data["obtained_at"],
            "message_sources": None,
        },
    )


def blocks(objects: list[dict[str, Any]] | None) -> list[MessageBlock]:
    """Message blocks from the JSON objects a statement built with their fields in the model's order
    (role, content, msg_position): each decoded object becomes its block's fields as it is."""
    return [trusted(MessageBlock, fields) for fields in objects or []]


def _timestamp(value: datetime | str) -> datetime:
    """A timestamptz from a row, or from the JSON of a row (PostgreSQL writes it in ISO 8601)."""
    return datetime.fromisoformat(value) if isinstance(value, str) else value
