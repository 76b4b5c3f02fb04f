"""The text-search configuration lives in the database: recorded once, checked, switched resumably."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from memora_pg import ConfigurationError, InvalidInputError, MemorySearchScope, PostgresGraphDB, Settings
from memora_pg.cli import main
from memora_pg.db import Database
from memora_pg.embeddings import HashEmbedder
from memora_pg.ops import text_search
from tests.integration.helpers import chat, payload, world

FACTS = ["she was running marathons", "the cats were sleeping", "he cooked dinners"]


async def _stored_vectors(url: str, config: str) -> tuple[int, int]:
    """(searchable memories, those whose full-text vector is the given configuration's)."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            row = (
                await conn.execute(
                    text(
                        "SELECT count(*),"
                        " count(*) FILTER (WHERE search_text = to_tsvector(CAST(:c AS regconfig), memory))"
                        " FROM memora.memories WHERE embedding IS NOT NULL"
                    ),
                    {"c": config},
                )
            ).one()
        return int(row[0]), int(row[1])
    finally:
        await engine.dispose()


async def _migrate(url: str) -> None:
    async with PostgresGraphDB(url, settings=Settings(database_url=url), embedder=HashEmbedder(384)):
        pass


async def test_a_new_database_writes_english_and_a_switch_rewrites_every_vector(fresh_database: str) -> None:
    """A new database stems with english; switching to simple rewrites each stored vector once, and again nothing."""
    settings = Settings(database_url=fresh_database)
    async with PostgresGraphDB(fresh_database, settings=settings, embedder=HashEmbedder(384)) as graph:
        w = await world(graph)
        await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("x"), [(fact, [0]) for fact in FACTS])
        )
        assert await _stored_vectors(fresh_database, "english") == (3, 3)
        async with Database(settings=settings) as database:
            assert await text_search.current(database) == "english"
            progress: list[tuple[int, int]] = []
            switched = await text_search.switch(
                database, "simple", batch_size=2, progress=lambda *p: progress.append(p)
            )
            assert (switched.previous, switched.config, switched.rewritten) == ("english", "simple", 3)
            assert progress[-1] == (3, 3)
            assert await text_search.current(database) == "simple"
            again = await text_search.switch(database, "simple")
            assert again.rewritten == 0
        assert await _stored_vectors(fresh_database, "simple") == (3, 3)
        # New writes and searches use the switched configuration: "marathons" is no longer stemmed.
        await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, payload(chat("y"), [("runs", [0])]))
        assert await _stored_vectors(fresh_database, "simple") == (4, 4)
        vector = graph.get_associated_vector_db()
        assert vector is not None
        hits = await vector.search_memory("marathons", MemorySearchScope.USER, w.org_id, w.user_id)
        assert hits[0][0].memory == "she was running marathons"


async def test_a_configuration_that_is_not_the_databases_is_refused(fresh_database: str) -> None:
    """MEMORA_PG_TEXT_SEARCH_CONFIG set to another configuration than the database's is a ConfigurationError."""
    async with PostgresGraphDB(
        fresh_database, settings=Settings(database_url=fresh_database), embedder=HashEmbedder(384)
    ):
        pass
    other = Settings(database_url=fresh_database, text_search_config="simple")
    graph = PostgresGraphDB(fresh_database, settings=other, embedder=HashEmbedder(384))
    try:
        w = await world(graph)
        with pytest.raises(ConfigurationError, match="memora-pg text-search simple"):
            await graph.save_interaction_with_memories(
                w.org_id, w.agent_id, w.user_id, payload(chat("x"), [("a", [0])])
            )
    finally:
        await graph.close()


@pytest.mark.parametrize("name", ["klingon", "Bad-Name", "", "1st"])
async def test_an_unknown_or_malformed_configuration_is_invalid_input(fresh_database: str, name: str) -> None:
    """A configuration the server lacks, or a name that is not a plain identifier, changes nothing."""
    async with PostgresGraphDB(
        fresh_database, settings=Settings(database_url=fresh_database), embedder=HashEmbedder(384)
    ):
        pass
    async with Database(settings=Settings(database_url=fresh_database)) as database:
        with pytest.raises(InvalidInputError):
            await text_search.switch(database, name)
        assert await text_search.current(database) == "english"


def test_the_cli_shows_and_switches_the_configuration(fresh_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    """memora-pg text-search prints the configuration; with one, it switches and says how many were rewritten."""
    assert main(["db", "upgrade", "--database-url", fresh_database]) == 0
    capsys.readouterr()
    assert main(["text-search", "--database-url", fresh_database]) == 0
    assert capsys.readouterr().out.strip() == "english"
    assert main(["text-search", "german", "--database-url", fresh_database]) == 0
    assert "english -> german" in capsys.readouterr().out
