"""Every face has one lifecycle (memora_pg.face.Face): entering it makes it ready without DDL on a schema at
head, so an application role that cannot create enters every face; ``auto_migrate=False`` refuses a schema
not at head instead of migrating it; ``setup()`` migrates when asked."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from memora_pg import PgVectorDB, PostgresGraphDB, PostgresMemory, SchemaNotMigratedError, Settings
from memora_pg.embeddings import HashEmbedder
from memora_pg.errors import MemoraPGError
from memora_pg.face import Face
from memora_pg.mem0 import AsyncMemory, MemoryConfig

# How each face is made from settings alone, as an application configures it.
FACES: dict[str, Callable[[Settings], Face]] = {
    "memora graph": lambda settings: PostgresGraphDB(settings=settings, embedder=HashEmbedder(384)),
    "memora vectors": lambda settings: PgVectorDB(settings=settings, embedder=HashEmbedder(384)),
    "mem0-style": lambda settings: AsyncMemory(MemoryConfig(), settings=settings, embedder=HashEmbedder(384)),
    "autogen": lambda settings: PostgresMemory("notes", settings=settings, embedder=HashEmbedder(384)),
}


async def _read(face: Face) -> None:
    """One read through the face's own interface (the role's scope holds nothing)."""
    if isinstance(face, PostgresGraphDB):
        assert await face.get_all_organizations() == []
    elif isinstance(face, PgVectorDB):
        assert await face.check_dimensions() == 384
    elif isinstance(face, AsyncMemory):
        assert (await face.get_all(user_id="u"))["results"] == []
    elif isinstance(face, PostgresMemory):
        assert (await face.list()) == []


@pytest.mark.parametrize("kind", list(FACES))
async def test_a_role_without_create_enters_every_face_on_a_migrated_database(
    rls_database: tuple[str, str], kind: str
) -> None:
    _, app_url = rls_database
    engine = create_async_engine(app_url)
    try:
        async with engine.connect() as conn:
            assert not await conn.scalar(text("SELECT has_database_privilege(current_database(), 'CREATE')"))
    finally:
        await engine.dispose()
    settings = Settings(database_url=app_url, db_schema="memora", row_level_security=True)
    async with FACES[kind](settings) as face:
        await _read(face)
    # setup() is the explicit migration, which this role may not run: a typed error, not a driver's.
    face = FACES[kind](settings)
    with pytest.raises(MemoraPGError):
        await face.setup()
    await face.close()


@pytest.mark.parametrize("kind", list(FACES))
async def test_auto_migrate_off_refuses_a_schema_not_at_head_and_setup_migrates(fresh_database: str, kind: str) -> None:
    settings = Settings(database_url=fresh_database, db_schema="memora", auto_migrate=False)
    face = FACES[kind](settings)
    with pytest.raises(SchemaNotMigratedError, match="at revision none"):
        await face.__aenter__()
    with pytest.raises(SchemaNotMigratedError):
        await _read(face)
    engine = create_async_engine(fresh_database)
    try:
        async with engine.connect() as conn:
            assert await conn.scalar(text("SELECT to_regnamespace('memora')")) is None, "nothing was created"
    finally:
        await engine.dispose()
    await face.setup()
    async with face:
        await _read(face)
