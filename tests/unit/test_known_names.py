"""Misspelt configuration keys are refused everywhere a configuration is taken by name, with the closest name."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pydantic import ValidationError

from memora_pg.autogen import ListMemory, PostgresMemory
from memora_pg.autogen.list_memory import ListMemoryConfig
from memora_pg.autogen.memory import PostgresMemoryConfig
from memora_pg.embeddings.config import embedder_from_config
from memora_pg.errors import InvalidInputError
from memora_pg.known_names import closest, unknown
from memora_pg.mem0 import AsyncMemory, DuragValidationError, Memory, MemoryConfig
from memora_pg.mem0.errors import VectorStoreError

URL = "postgresql://app@db.example:5432/memories"


def test_closest_and_the_refusal() -> None:
    assert closest("conection_string", ["connection_string", "dbname"]) == "connection_string"
    assert closest("Colection_Name", ["collection_name"]) == "collection_name"
    assert closest("zzz", ["connection_string"]) is None
    assert unknown(["dbname"], ["dbname"], where="x") is None
    assert unknown(["zzz"], ["a", "b"], where="x") == "x: unknown key 'zzz'; known: a, b"
    assert unknown(["hots", "zzz"], ["host"], where="x", noun="option") == (
        "x: unknown options 'hots' (did you mean 'host'?), 'zzz'"
    )


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"vector_store": {"provider": "pgvector", "config": {"conection_string": URL}}}, "connection_string"),
        ({"vector_store": {"provider": "pgvector", "config": {"colection_name": "notes"}}}, "collection_name"),
        ({"embedder": {"provider": "openai", "config": {"modle": "text-embedding-3-small"}}}, "model"),
        ({"llm": {"provider": "openai", "config": {"temprature": 0.2}}}, "temperature"),
        ({"reranker": {"provider": "llm", "config": {"scoring_promt": "..."}}}, "scoring_prompt"),
        ({"vectorstore": {"provider": "pgvector", "config": {"connection_string": URL}}}, "vector_store"),
    ],
)
def test_a_misspelt_mem0_key_is_refused_at_every_level(config: dict[str, Any], named: str) -> None:
    """mem0 refuses misspelt keys of the vector store's config only; this face refuses them everywhere, before
    anything is connected to (so no write can go to the embedded server instead), in one line."""
    with pytest.raises(DuragValidationError, match=rf"did you mean '{named}'\?") as refused:
        AsyncMemory.from_config(config)
    assert "\n" not in str(refused.value)
    with pytest.raises(DuragValidationError, match=named):
        Memory.from_config(config)
    # mem0's own MemoryConfig raises pydantic's ValidationError, and so does this one when built directly.
    with pytest.raises(ValidationError, match=named):
        MemoryConfig.model_validate(config)


def test_mem0s_own_keys_are_accepted(caplog: pytest.LogCaptureFixture) -> None:
    """A configuration written for mem0 keeps working: its keys that mean nothing here are accepted (a top-level
    one with a warning), and the ones that say where the database is are read."""
    with caplog.at_level(logging.WARNING):
        config = MemoryConfig.model_validate(
            {
                "vector_store": {
                    "provider": "pgvector",
                    "config": {"connection_string": URL, "hnsw": True, "diskann": False, "minconn": 1, "maxconn": 5},
                },
                "llm": {"provider": "openai", "config": {"model": "gpt-4o-mini", "top_k": 1, "enable_vision": False}},
                "embedder": {"provider": "openai", "config": {"model": "m", "embedding_dims": 384, "model_kwargs": {}}},
                "graph_store": {"provider": "neo4j"},
                "version": "v1.1",
            }
        )
    assert config.settings().url() == URL
    assert "'graph_store' has no meaning" in caplog.text


def test_a_connection_that_cannot_be_used_is_an_error_not_the_embedded_server() -> None:
    """A psycopg pool (mem0's connection_pool) or an empty connection string names a database memora_pg cannot
    reach: refused, rather than writing to the embedded server."""
    with pytest.raises(VectorStoreError, match="connection_pool"):
        AsyncMemory.from_config({"vector_store": {"provider": "pgvector", "config": {"connection_pool": object()}}})
    for empty in ("", "  ", 5):
        with pytest.raises(VectorStoreError, match="connection_string must be a postgresql:// URL"):
            AsyncMemory.from_config({"vector_store": {"provider": "pgvector", "config": {"connection_string": empty}}})
    # Nothing that names a database: the embedded server, as documented.
    assert MemoryConfig.model_validate({}).settings().url() is None


def test_a_misspelt_autogen_config_key_is_refused() -> None:
    """AutoGen component configs (load_component's input) refuse a key they do not have, with the closest name,
    where pydantic's default would drop it (a misspelt database_url: the embedded server)."""
    component = PostgresMemory("notes", database_url=URL).dump_component().model_dump()
    component["config"]["databse_url"] = component["config"].pop("database_url")
    with pytest.raises(ValidationError, match=r"did you mean 'database_url'\?"):
        PostgresMemory.load_component(component)
    with pytest.raises(ValidationError, match=r"did you mean 'score_threshold'\?"):
        PostgresMemoryConfig.model_validate({"name": "notes", "scor_threshold": 0.5})
    listed = ListMemory(name="chat").dump_component().model_dump()
    listed["config"]["memory_content"] = []
    with pytest.raises(ValidationError, match=r"did you mean 'memory_contents'\?"):
        ListMemory.load_component(listed)
    assert ListMemoryConfig.model_validate({"name": "chat"}).name == "chat"


def test_a_misspelt_embedder_option_is_refused() -> None:
    """A component configuration's embedder takes its constructor's keywords only, refused by name (not a
    TypeError from deep inside)."""
    with pytest.raises(InvalidInputError, match=r"embedder 'openai': unknown key 'modle' \(did you mean 'model'\?\)"):
        embedder_from_config({"provider": "openai", "modle": "m"})
    with pytest.raises(InvalidInputError, match=r"did you mean 'dimensions'\?"):
        embedder_from_config({"provider": "hash", "dimension": 8})
    embedder = embedder_from_config({"provider": "hash", "dimensions": 8})
    assert embedder is not None
    assert embedder.dimensions == 8
