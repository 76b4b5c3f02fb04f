"""``models.trusted`` builds the same models as validation does, for values already of their types."""

from __future__ import annotations

import copy
from datetime import datetime, timezone

from memora_pg.models import Interaction, Memory, MessageBlock, trusted

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def _values() -> dict[str, object]:
    return {
        "org_id": "o",
        "agent_id": "a",
        "user_id": "u",
        "interaction_id": "i",
        "memory_id": "00000000-0000-0000-0000-000000000001",
        "memory": "Jake lives in Rome",
        "obtained_at": AT,
        "message_sources": [trusted(MessageBlock, {"role": "user", "content": "I moved", "msg_position": 0})],
    }


def test_a_trusted_memory_is_the_validated_one() -> None:
    built = trusted(Memory, _values())
    validated = Memory.model_validate(
        {**_values(), "message_sources": [{"role": "user", "content": "I moved", "msg_position": 0}]}
    )
    assert built == validated
    assert built.model_dump() == validated.model_dump()
    assert built.model_dump_json() == validated.model_dump_json()
    assert repr(built) == repr(validated)
    assert built.model_fields_set == validated.model_fields_set
    assert copy.deepcopy(built) == validated
    assert built.model_copy(update={"memory": "x"}).memory == "x"
    assert built.memory == "Jake lives in Rome"  # unchanged by the copy


def test_a_trusted_model_can_be_changed_like_any_other() -> None:
    block = trusted(MessageBlock, {"role": "user", "content": "hi", "msg_position": 1})
    block.content = "hello"
    assert block == MessageBlock(role="user", content="hello", msg_position=1)
    interaction = trusted(
        Interaction,
        {
            "org_id": "o",
            "user_id": "u",
            "agent_id": "a",
            "interaction_id": "i",
            "created_at": AT,
            "updated_at": AT,
            "messages": [block],
            "memories": [trusted(Memory, _values())],
        },
    )
    assert Interaction.model_validate(interaction.model_dump()) == interaction
