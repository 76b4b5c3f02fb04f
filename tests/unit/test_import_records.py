"""The conversions of mem0's and LangGraph's rows: what is kept, and what is refused with the source's key."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from memora_pg.ops.importers import langgraph
from memora_pg.ops.importers import mem0_records as records

NOW = datetime(2026, 12, 2, tzinfo=timezone.utc)
ID = uuid.UUID("6a1f3d2e-0000-4000-8000-000000000001")


def test_a_mem0_memory_keeps_its_payload() -> None:
    payload = {
        "data": "Likes tea",
        "hash": "x",
        "text_lemmatized": "like tea",
        "user_id": "u",
        "agent_id": "a",
        "run_id": "r",
        "created_at": "2026-01-01T10:00:00-08:00",
        "updated_at": "2026-01-02T10:00:00-08:00",
        "expiration_date": "2026-02-01",
        "topic": {"k": [1]},
    }
    memory = records.memory(str(ID), payload, "[1,2]", imported_at=NOW)
    assert isinstance(memory, records.Memory)
    assert (memory.memory_id, memory.user_id, memory.agent_id, memory.text) == (ID, "u", "a", "Likes tea")
    assert memory.created_at == datetime(2026, 1, 1, 18, tzinfo=timezone.utc)
    assert memory.metadata == {
        "run_id": "r",
        "updated_at": "2026-01-02T10:00:00-08:00",
        "expiration_date": "2026-02-01",
        "topic": {"k": [1]},
    }
    assert memory.expires_at == datetime(2026, 2, 2, tzinfo=timezone.utc)
    assert memory.version == "2026-01-02T10:00:00-08:00"


@pytest.mark.parametrize(
    ("memory_id", "payload", "reason"),
    [
        ("not-a-uuid", {"data": "x"}, "badly formed"),
        (str(ID), None, "not a JSON object"),
        (str(ID), {"data": ""}, "missing or empty"),
        (str(ID), {"data": "nul \x00"}, "NUL"),
        (str(ID), {"data": "x", "created_at": "yesterday"}, "isoformat"),
        (str(ID), {"data": "x", "user_id": ["u"]}, "not a string"),
    ],
)
def test_a_mem0_memory_refused_names_its_key(memory_id: str, payload: object, reason: str) -> None:
    refused = records.memory(memory_id, payload, None, imported_at=NOW)
    assert isinstance(refused, records.Refused)
    assert (refused.source, refused.key) == ("memory", memory_id)
    assert reason in refused.reason


def test_mem0_history_events() -> None:
    row = {
        "id": str(ID),
        "memory_id": str(ID),
        "event": "update",
        "old_memory": "a",
        "new_memory": "b",
        "created_at": "2026-01-01T00:00:00",
        "updated_at": "2026-01-03T00:00:00+00:00",
        "is_deleted": 0,
    }
    event = records.event(row)
    assert isinstance(event, records.Event)
    assert (event.event, event.at) == ("UPDATE", datetime(2026, 1, 3, tzinfo=timezone.utc))
    # a non-UUID event id gets a stable one
    first, second = records.event({**row, "id": "e1"}), records.event({**row, "id": "e1"})
    assert isinstance(first, records.Event)
    assert isinstance(second, records.Event)
    assert first.event_id == second.event_id
    bad = records.event({**row, "event": "MERGE"})
    assert isinstance(bad, records.Refused)
    assert (bad.key, bad.reason) == (str(ID), "unknown event 'MERGE'")


def test_langgraph_items() -> None:
    row = {
        "prefix": "users.alice",
        "key": "k.1",
        "value": '{"text": "hi", "n": 1}',
        "created_at": NOW - timedelta(days=2),
        "updated_at": NOW - timedelta(days=1),
        "expires_at": NOW + timedelta(hours=1),
    }
    item = langgraph.item(row, now=NOW)
    assert isinstance(item, langgraph.Item)
    assert (item.namespace, item.key, item.text) == ("users.alice", "k.1", '{"n":1,"text":"hi"}')
    assert item.metadata["langgraph_namespace"] == ["users", "alice"]
    assert item.content_id == langgraph.content_id("users.alice", "k.1") != langgraph.content_id("users", "alice.k.1")
    assert langgraph.item({**row, "expires_at": NOW}, now=NOW) is None
    refused = langgraph.item({**row, "value": "[1, 2]"}, now=NOW)
    assert isinstance(refused, records.Refused)
    assert refused.key == "users.alice/k.1"


def test_the_last_day_there_is_never_expires() -> None:
    memory = records.memory(str(ID), {"data": "x", "expiration_date": "9999-12-31"}, None, imported_at=NOW)
    assert isinstance(memory, records.Memory)
    assert memory.expires_at is None
