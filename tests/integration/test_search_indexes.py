"""The full-text GIN index keeps a small pending list (migration 0015): each of a large scope's word
probes reads the whole list, so a list left to grow to PostgreSQL's 4 MB made every such search slower."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memora_pg import schema
from tests.conftest import TEST_SCHEMA

OPTIONS = """
SELECT c.reloptions FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = :schema AND c.relname = 'ix_memories_search_text'
"""


async def test_the_full_text_index_keeps_a_pending_list_of_64_kb(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        options = await conn.scalar(text(OPTIONS), {"schema": TEST_SCHEMA})
    assert options == ["gin_pending_list_limit=64"]
    # The declared schema says the same, for a reader of schema.py and for create_all.
    (index,) = [i for i in schema.memories.indexes if i.name == "ix_memories_search_text"]
    assert index.dialect_options["postgresql"]["with"] == {"gin_pending_list_limit": 64}
