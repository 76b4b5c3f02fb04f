"""Settings: initialiser arguments win over MEMORA_PG_* variables, which win over DATABASE_URL."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memora_pg import Settings
from memora_pg.config import environment_names, problems
from memora_pg.engine import asyncpg_url
from memora_pg.errors import ConfigurationError, SettingsError


def test_database_url_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain DATABASE_URL that platforms set is used when nothing more specific is."""
    monkeypatch.setenv("DATABASE_URL", "postgresql://a@h/db")
    assert Settings().url() == "postgresql://a@h/db"


def test_prefixed_variable_wins_over_database_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """MEMORA_PG_DATABASE_URL is more specific than DATABASE_URL."""
    monkeypatch.setenv("DATABASE_URL", "postgresql://a@h/db")
    monkeypatch.setenv("MEMORA_PG_DATABASE_URL", "postgresql://b@h/db")
    assert Settings().url() == "postgresql://b@h/db"


def test_arguments_win_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values passed to Settings() override the environment."""
    monkeypatch.setenv("MEMORA_PG_SCHEMA", "from_env")
    monkeypatch.setenv("MEMORA_PG_POOL_SIZE", "7")
    settings = Settings(db_schema="from_args")
    assert settings.db_schema == "from_args"
    assert settings.pool_size == 7


def test_no_url_means_embedded_server() -> None:
    """Without any URL the embedded server is used."""
    assert Settings().url() is None


def test_url_secret_is_not_printed() -> None:
    """The URL may hold a password: it is a secret in reprs."""
    assert "hunter2" not in repr(Settings(database_url="postgresql://u:hunter2@h/db"))


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgres://u:p@h:5/d", "postgresql+asyncpg://u:p@h:5/d"),
        ("postgresql://u@h/d", "postgresql+asyncpg://u@h/d"),
        ("postgresql+psycopg://u@h/d", "postgresql+asyncpg://u@h/d"),
        ("postgresql://u@h/d?sslmode=require", "postgresql+asyncpg://u@h/d?ssl=require"),
    ],
)
def test_urls_are_normalised_to_asyncpg(given: str, expected: str) -> None:
    """Common URL spellings all end up on the asyncpg driver."""
    assert asyncpg_url(given) == expected


def test_non_postgres_urls_are_refused() -> None:
    """memora_pg runs only on PostgreSQL."""
    with pytest.raises(ConfigurationError):
        asyncpg_url("sqlite:///x.db")


def test_a_mem0_vector_store_config_may_choose_the_search_mode() -> None:
    """memora_pg's own "search_mode" key picks the ranking; mem0's hybrid_search asks for the default, hybrid."""
    from memora_pg.mem0 import MemoryConfig

    def mode(options: dict[str, object]) -> str:
        config = MemoryConfig.model_validate({"vector_store": {"provider": "pgvector", "config": options}})
        return config.settings().search_mode

    assert mode({"search_mode": "dense"}) == "dense"
    assert mode({"hybrid_search": True}) == "hybrid"
    assert mode({}) == "hybrid"


def test_a_misspelt_setting_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A keyword argument that names no setting is an error that names it."""
    with pytest.raises(ValueError, match="serch_mode"):
        Settings(serch_mode="dense")  # type: ignore[call-arg]


def test_a_misspelt_variable_is_refused_with_the_closest_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A MEMORA_PG_ variable that names no setting is refused, naming the setting it was probably meant to be
    (a misspelt database URL would otherwise send every write to the embedded server); the test suite's and the
    benchmarks' own variables are left alone, and so are a setting's aliases."""
    monkeypatch.setenv("MEMORA_PG_SERCH_MODE", "dense")
    with pytest.raises(SettingsError, match=r"'MEMORA_PG_SERCH_MODE' \(did you mean 'MEMORA_PG_SEARCH_MODE'\?\)"):
        Settings()
    monkeypatch.delenv("MEMORA_PG_SERCH_MODE")
    monkeypatch.setenv("MEMORA_PG_DATABSE_URL", "postgresql://a@h/db")
    with pytest.raises(SettingsError, match="MEMORA_PG_DATABASE_URL"):
        Settings(database_url="postgresql://b@h/db")
    monkeypatch.delenv("MEMORA_PG_DATABSE_URL")
    monkeypatch.setenv("MEMORA_PG_ZZZ", "1")
    with pytest.raises(SettingsError, match="'MEMORA_PG_ZZZ'"):
        Settings()
    monkeypatch.delenv("MEMORA_PG_ZZZ")
    monkeypatch.setenv("MEMORA_PG_TEST_ANYTHING", "1")
    monkeypatch.setenv("MEMORA_PG_BENCH_ANYTHING", "1")
    monkeypatch.setenv("MEMORA_PG_SCHEMA", "from_env")
    assert Settings().db_schema == "from_env"
    assert "MEMORA_PG_SCHEMA" in environment_names()
    assert "MEMORA_PG_DB_SCHEMA" not in environment_names()  # not read: the setting's variable is its alias


def test_a_bad_value_is_one_line_naming_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """problems() says each bad value of a refused Settings in one line, with its variable and what was given."""
    monkeypatch.setenv("MEMORA_PG_SEARCH_MODE", "hybird")
    monkeypatch.setenv("MEMORA_PG_POOL_SIZE", "five")
    with pytest.raises(ValidationError) as refused:
        Settings()
    lines = problems(refused.value)
    assert len(lines) == 2
    assert any(line.startswith("MEMORA_PG_SEARCH_MODE (search_mode): ") and "'hybird'" in line for line in lines)
    assert any(line.startswith("MEMORA_PG_POOL_SIZE (pool_size): ") and "'five'" in line for line in lines)


def test_upstream_mode_is_refused_outside_the_memora_vector_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """search_mode 'upstream' is upstream Memora's fusion, PgVectorDB's alone: the mem0-style and AutoGen faces
    refuse it when they are made, rather than searching in another mode without a word."""
    from memora_pg import PgVectorDB, PostgresMemory
    from memora_pg.mem0 import AsyncMemory, MemoryConfig

    monkeypatch.setenv("MEMORA_PG_SEARCH_MODE", "upstream")
    with pytest.raises(ConfigurationError, match="PgVectorDB's alone"):
        AsyncMemory(MemoryConfig())
    with pytest.raises(ConfigurationError, match="PgVectorDB's alone"):
        PostgresMemory("notes")
    assert PgVectorDB().search_mode == "upstream"
    monkeypatch.delenv("MEMORA_PG_SEARCH_MODE")
    config = MemoryConfig.model_validate(
        {"vector_store": {"provider": "pgvector", "config": {"search_mode": "upstream"}}}
    )
    with pytest.raises(ConfigurationError, match="PgVectorDB's alone"):
        AsyncMemory(config)


def test_the_readmes_settings_table_is_the_class() -> None:
    """The README's table of settings is made from the class (every setting, its variables, its default), so a
    default is written once: regenerate it with memora_pg.config.settings_table() after changing a setting."""
    from pathlib import Path

    from memora_pg.config import settings_table

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = readme.split("<!-- settings:start (generated: memora_pg.config.settings_table) -->\n")[1]
    assert block.split("<!-- settings:end -->")[0] == settings_table()


def test_every_setting_is_in_exactly_one_section_of_the_table() -> None:
    from collections import Counter

    from memora_pg.config import GROUPS

    listed = Counter(name for names in GROUPS.values() for name in names)
    assert [name for name, times in listed.items() if times > 1] == []
    assert set(listed) == set(Settings.model_fields)
