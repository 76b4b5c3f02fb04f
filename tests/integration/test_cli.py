"""The memora-pg command line, through its entry point: argv in, output and exit code out."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from memora_pg import Settings, commands, embedded, migrations
from memora_pg.cli import EXAMPLES, build_parser, main
from tests.integration.helpers import scalar_at

COMMANDS = sorted(EXAMPLES)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`memora-pg COMMAND --help` describes the command and shows an example."""
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert f"Example: {EXAMPLES[command]}" in out
    assert "--database-url" in out


def test_every_subcommand_is_documented() -> None:
    """Every subcommand of the parser has an example in EXAMPLES (and so a help test)."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    assert isinstance(subparsers.choices, dict)
    assert sorted(subparsers.choices) == COMMANDS


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse's exit code 2 for a command that does not exist."""
    with pytest.raises(SystemExit) as exited:
        main(["frobnicate"])
    assert exited.value.code == 2


def test_db_commands(fresh_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    """db upgrade / current / downgrade / history on a real database, with --json output."""
    assert main(["db", "current", "--database-url", fresh_database, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["revision"] is None
    assert main(["db", "upgrade", "--database-url", fresh_database, "--schema", "cli_db"]) == 0
    head = migrations.head_revision()
    assert f"revision {head} (head {head})" in capsys.readouterr().out
    assert main(["db", "downgrade", "base", "--database-url", fresh_database, "--schema", "cli_db", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["revision"] is None
    assert main(["db", "history"]) == 0
    assert "0001" in capsys.readouterr().out


def test_db_sql_prints_the_script_without_a_database(capsys: pytest.CaptureFixture[str]) -> None:
    """db sql writes the reviewable upgrade script for the configured schema."""
    assert main(["db", "sql", "--schema", "dba"]) == 0
    script = capsys.readouterr().out
    assert "CREATE TABLE dba.memories" in script
    assert "CREATE EXTENSION IF NOT EXISTS vector" in script


def test_server_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """server start/status/url/stop manage an embedded PostgreSQL in the given data directory."""
    base = ["--data-dir", str(tmp_path)]
    try:
        assert main(["server", "status", *base]) == 3
        assert main(["server", "start", *base]) == 0
        url = capsys.readouterr().out.strip().splitlines()[-1]
        assert url.startswith("postgresql+asyncpg://")
        assert main(["server", "url", *base]) == 0
        assert capsys.readouterr().out.strip() == url
        assert main(["server", "status", *base, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["running"] is True
        assert main(["server", "stop", *base]) == 0
        assert "stopped" in capsys.readouterr().out
        assert main(["server", "status", *base]) == 3
    finally:
        embedded.stop(tmp_path)


def test_doctor_passes_on_a_migrated_database(database_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """doctor reports every check ok on a database at head and exits 0."""
    assert main(["doctor", "--database-url", database_url, "--embedding-dimensions", "384", "--json"]) == 0
    checks = {c["name"]: c["status"] for c in json.loads(capsys.readouterr().out)}
    assert checks["schema"] == "ok"
    assert checks["pgvector"] == "ok"
    assert checks["indexes"] == "ok"
    assert checks["dimensions"] == "ok"
    assert checks["plans"] == "ok"


def test_doctor_fails_and_says_what_to_fix(fresh_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    """On an empty database, and with a wrong dimension or a dropped index, doctor fails with a fix."""
    assert main(["doctor", "--database-url", fresh_database]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] schema" in out
    assert "fix: Run memora-pg db upgrade" in out

    async def break_an_index() -> None:
        engine = create_async_engine(fresh_database)
        try:
            await migrations.upgrade(engine, migrations.MigrationOptions(schema="memora"))
            async with engine.begin() as conn:
                await conn.execute(text("DROP INDEX memora.ix_memories_user_recent"))
        finally:
            await engine.dispose()

    asyncio.run(break_an_index())
    assert main(["doctor", "--database-url", fresh_database, "--embedding-dimensions", "768"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] dimensions" in out
    assert "[FAIL] indexes: missing: ix_memories_user_recent" in out


def test_errors_exit_1_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    """A memora_pg error (here a URL that is not PostgreSQL) is printed and exits 1, without a traceback."""
    assert main(["db", "current", "--database-url", "sqlite:///x.db"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: memora_pg needs PostgreSQL")


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("MEMORA_PG_SEARCH_MODE", "hybird", "error: MEMORA_PG_SEARCH_MODE (search_mode): Input should be 'hybrid'"),
        ("MEMORA_PG_POOL_SIZE", "five", "error: MEMORA_PG_POOL_SIZE (pool_size): Input should be a valid integer"),
        ("MEMORA_PG_SERCH_MODE", "dense", "error: environment: unknown variable 'MEMORA_PG_SERCH_MODE' (did you mean"),
    ],
)
def test_a_bad_setting_is_one_line_and_a_usage_error(
    variable: str, value: str, said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad value or a misspelt variable in the environment is one error line naming it, with exit status 2
    (as for every usage error), before anything connects."""
    monkeypatch.setenv(variable, value)
    assert main(["db", "current"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(said)
    assert err.count("\n") == 1


FACTS = ("lives in Lisbon", "moved to Berlin", "allergic", "green tea", "thanked")


def test_demo_runs_on_a_given_database(database_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """memora-pg demo tells its story on any server: the newest version wins, the history shows both, and
    as of a day in between the older one was true."""
    assert main(["demo", "--database-url", database_url]) == 0
    out = capsys.readouterr().out
    # The search ranks the new city above every fact unrelated to where Jake lives, and says what a score means.
    ranked = [line for line in out.split("Search:")[1].split("A score is")[0].splitlines() if " user_" in line]
    order = [next((fact for fact in FACTS if fact in line), line) for line in ranked]
    assert order.index("moved to Berlin") < min(order.index(f) for f in ("allergic", "green tea", "thanked"))
    assert "Above 0 is related, 0 is not" in out
    resolved = out.split("Resolved:")[1].split("History")[0]
    assert "Jake moved to Berlin" in resolved
    assert "Jake lives in Lisbon" not in resolved
    history = out.split("History of that memory")[1].split("As of")[0]
    assert history.index("Jake moved to Berlin") < history.index("Jake lives in Lisbon")
    then = out.split("As of")[1].split("Report:")[0]
    assert "Jake lives in Lisbon" in then
    assert "Berlin" not in then


def test_index_modes(fresh_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    """index drop switches to exact mode (doctor warns, not fails); index build restores hnsw, concurrently."""
    assert main(["db", "upgrade", "--database-url", fresh_database]) == 0
    capsys.readouterr()
    assert main(["index", "status", "--database-url", fresh_database, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "hnsw"
    assert main(["index", "drop", "--database-url", fresh_database]) == 0
    assert "index mode: exact" in capsys.readouterr().out
    assert main(["doctor", "--database-url", fresh_database, "--json"]) == 0
    checks = {c["name"]: c["status"] for c in json.loads(capsys.readouterr().out)}
    assert checks["index mode"] == "warn"
    assert checks["indexes"] == "ok"
    assert main(["index", "build", "--database-url", fresh_database, "--json"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["mode"] == "hnsw"
    assert built["valid"] is True
    assert "USING hnsw (embedding vector_cosine_ops)" in built["definition"]


def test_index_build_rebuilds_an_index_of_other_parameters(
    fresh_database: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index built with other HNSW parameters than the settings' is reported, and `index build`
    rebuilds it under its own name (nothing left behind); at the settings' parameters it is left alone."""
    assert main(["db", "upgrade", "--database-url", fresh_database]) == 0
    capsys.readouterr()
    assert main(["index", "status", "--database-url", fresh_database, "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert (before["m"], before["ef_construction"]) == (16, 128)
    monkeypatch.setenv("MEMORA_PG_HNSW_M", "12")
    monkeypatch.setenv("MEMORA_PG_HNSW_EF_CONSTRUCTION", "80")
    assert main(["index", "status", "--database-url", fresh_database]) == 0
    assert "the settings ask for m = 12, ef_construction = 80" in capsys.readouterr().out
    assert main(["index", "build", "--database-url", fresh_database, "--json"]) == 0
    rebuilt = json.loads(capsys.readouterr().out)
    assert (rebuilt["mode"], rebuilt["valid"], rebuilt["m"], rebuilt["ef_construction"]) == ("hnsw", True, 12, 80)
    assert "ix_memories_embedding_hnsw ON" in rebuilt["definition"]

    async def indexes() -> list[str]:
        engine = create_async_engine(fresh_database)
        try:
            async with engine.connect() as conn:
                found = await conn.execute(
                    text("SELECT indexname FROM pg_indexes WHERE tablename = 'memories' AND indexname LIKE '%hnsw%'")
                )
                return list(found.scalars())
        finally:
            await engine.dispose()

    assert asyncio.run(indexes()) == ["ix_memories_embedding_hnsw"]
    assert main(["index", "build", "--database-url", fresh_database]) == 0
    assert "m = 12, ef_construction = 80)" in capsys.readouterr().out
    assert main(["doctor", "--database-url", fresh_database, "--json"]) == 0
    checks = {c["name"]: c["status"] for c in json.loads(capsys.readouterr().out)}
    assert checks["index parameters"] == "ok"
    monkeypatch.setenv("MEMORA_PG_HNSW_EF_CONSTRUCTION", "128")
    assert main(["doctor", "--database-url", fresh_database, "--json"]) == 0
    checks = {c["name"]: c["status"] for c in json.loads(capsys.readouterr().out)}
    assert checks["index parameters"] == "warn"


def test_report_command(database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """report prints headline numbers, --json is machine-readable, --html writes a self-contained page."""
    assert main(["demo", "--database-url", database_url]) == 0
    capsys.readouterr()
    page = tmp_path / "report.html"
    assert main(["report", "--database-url", database_url, "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "HTML report written" in out
    html = page.read_text()
    assert "<svg" in html
    assert "<script" not in html
    assert main(["report", "--database-url", database_url, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["memories"] >= 5


def test_reembed_command(fresh_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    """reembed switches the database to another embedder's dimension and reports the count."""

    async def seed() -> None:
        from memora_pg import PostgresGraphDB
        from memora_pg.embeddings import HashEmbedder
        from tests.integration.helpers import chat, payload, world

        graph = PostgresGraphDB(fresh_database, embedder=HashEmbedder(384))
        await graph.setup()
        w = await world(graph)
        await graph.save_interaction_with_memories(
            w.org_id, w.agent_id, w.user_id, payload(chat("a"), [("green tea", [0]), ("black coffee", [0])])
        )
        await graph.close()

    asyncio.run(seed())
    assert main(["reembed", "--embedder", "hash:128", "--database-url", fresh_database, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["dimensions"] == 128
    assert main(["doctor", "--database-url", fresh_database, "--embedding-dimensions", "128"]) == 0


def test_export_then_import_through_the_cli(
    database_url: str, fresh_database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """export writes JSON Lines that import loads into an empty database, with the same counts."""
    assert main(["demo", "--database-url", database_url]) == 0
    capsys.readouterr()
    dump = tmp_path / "all.jsonl"
    assert main(["export", "--database-url", database_url, "-o", str(dump), "--json"]) == 0
    exported = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert main(["import", str(dump), "--database-url", fresh_database, "--json"]) == 0
    imported = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in imported.items() if v} == {k: v for k, v in exported.items() if v}


def test_large_tables_get_their_new_index_concurrently_later(
    fresh_database: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a large memories table, migration 0003 leaves its GIN index to `index build`, which never blocks writes."""

    async def upgrade_with_data() -> None:
        engine = create_async_engine(fresh_database)
        options = migrations.MigrationOptions(schema="memora")
        await migrations.upgrade(engine, options, "0002")
        async with engine.begin() as conn:  # written directly: the package's code expects the head revision
            await conn.execute(text("INSERT INTO memora.organizations (org_id, org_name) VALUES ('o', 'o')"))
            await conn.execute(text("INSERT INTO memora.users (org_id, user_id, user_name) VALUES ('o', 'u', 'u')"))
            await conn.execute(
                text(
                    "INSERT INTO memora.memories (org_id, memory_id, user_id, agent_id, memory, obtained_at) "
                    "SELECT 'o', gen_random_uuid(), 'u', 'a', 'm' || g, now() FROM generate_series(1, 50) g"
                )
            )
            await conn.execute(text("ANALYZE memora.memories"))
        monkeypatch.setattr(migrations, "LARGE_TABLE_ROWS", 10)
        await migrations.upgrade(engine, options)
        await engine.dispose()

    asyncio.run(upgrade_with_data())
    assert main(["doctor", "--database-url", fresh_database]) == 1
    assert "missing: ix_memories_metadata" in capsys.readouterr().out
    assert main(["index", "build", "--database-url", fresh_database]) == 0
    capsys.readouterr()
    assert main(["doctor", "--database-url", fresh_database]) == 0


class _Terminal:
    """A stream that says it is a terminal, keeping what is written to it."""

    def __init__(self) -> None:
        self.written: list[str] = []

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> None:
        self.written.append(text)

    def flush(self) -> None:
        pass


def test_the_progress_bar_ends_its_line_even_when_the_command_fails() -> None:
    """On a terminal the bar draws itself and ends its line on the way out, a failure included; off a
    terminal (a pipe, a log) it writes nothing."""
    terminal = _Terminal()

    def failing_import() -> None:
        with commands.Progress("importing", terminal) as bar:  # type: ignore[arg-type]
            bar.update(5, 10)
            raise RuntimeError("the source went away")

    with pytest.raises(RuntimeError):
        failing_import()
    assert terminal.written == ["\rimporting [###############---------------] 5/10", "\n"]

    piped = _Terminal()
    piped.isatty = lambda: False  # type: ignore[method-assign]
    with commands.Progress("importing", piped) as bar:  # type: ignore[arg-type]
        bar.update(5)
    assert piped.written == []


async def _relations(url: str, schema: str = "memora") -> int:
    """How many tables, views and sequences ``schema`` holds (0 when it does not exist)."""
    sql = (
        "SELECT count(*) FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = :schema"
    )
    return int(await scalar_at(url, sql, schema=schema) or 0)


READING = [
    ["export"],
    ["report"],
    ["index", "status"],
    ["text-search"],
    ["reembed", "--embedder", "hash:8"],
    ["mcp", "token", "list"],
    ["mcp", "token", "revoke", "no-such-token"],
]


@pytest.mark.parametrize("command", READING, ids=" ".join)
def test_a_command_that_reads_refuses_a_schema_never_migrated(
    command: list[str], fresh_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a database without memora_pg's schema, a command that only reads says so in one line and exits 2,
    and creates nothing (no silent migration, no report of zeros as if the schema were there)."""
    assert main([*command, "--database-url", fresh_database]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    head = migrations.head_revision()
    assert err.startswith(f"error: The schema 'memora' is at revision none, not at {head}: migrate it to head first")
    assert err.count("\n") == 1
    assert asyncio.run(_relations(fresh_database)) == 0


def test_a_command_that_writes_migrates_and_says_so(fresh_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`mcp token create` writes, so it brings a new database to head, says so on stderr (stdout stays the
    token), and takes the common options after the subcommand too."""
    assert main(["mcp", "token", "create", "--org-id", "acme", "--database-url", fresh_database, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == f"memora-pg: migrating the schema 'memora' from revision none to {migrations.head_revision()}\n"
    assert json.loads(out)["org_id"] == "acme"
    assert main(["mcp", "token", "list", "--database-url", fresh_database, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert [token["org_id"] for token in json.loads(out)] == ["acme"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["mcp", "--http", "nonsense"], "error: memora-pg mcp: argument --http: 'nonsense': use HOST:PORT"),
        (["mcp", "--http", "127.0.0.1:99999"], "error: memora-pg mcp: argument --http: '127.0.0.1:99999'"),
        (["reembed", "--embedder", "bogus"], "error: memora-pg reembed: argument --embedder: 'bogus': use local,"),
        (["import", "--from", "mem0", "--embedder", "hash:0"], "error: memora-pg import: argument --embedder:"),
        (["mcp", "token", "create"], "error: memora-pg mcp token create: the following arguments are required"),
        (["frobnicate"], "error: memora-pg: argument COMMAND: invalid choice: 'frobnicate'"),
    ],
)
def test_a_bad_argument_is_one_line_and_a_usage_error(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(said)
    assert err.count("\n") == 1


def test_an_import_whose_source_does_not_answer_is_one_line_and_leaves_the_target_alone(
    fresh_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unreachable source is a runtime error (exit 1) in one line, and the target is not migrated for it."""
    nowhere = "postgresql://nobody@127.0.0.1:1/none"
    argv = [
        "import",
        "--from",
        "mem0",
        "--source-url",
        nowhere,
        "--embedder",
        "hash:8",
        "--database-url",
        fresh_database,
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot connect to the mem0 deployment's database")
    assert err.count("\n") == 1
    assert asyncio.run(_relations(fresh_database)) == 0


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``memora-pg ARGS`` in a process of its own, as a user runs it: what reaches its stderr is all of it."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMORA_PG_") and k != "DATABASE_URL"}
    return subprocess.run(  # noqa: S603 (our own command line)
        [sys.executable, "-m", "memora_pg", *args],
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.skipif(
    bool(os.environ.get("MEMORA_PG_TEST_DATABASE_URL")), reason="the suite runs against an external server"
)
def test_a_successful_demo_on_the_embedded_server_says_nothing_on_stderr(tmp_path: Path) -> None:
    """The embedded server's start, the model's load and the dependencies' warnings stay quiet."""
    env = {"MEMORA_PG_EMBEDDED_DATA_DIR": str(tmp_path)}
    try:
        done = _cli(["demo"], env)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "Jake moved to Berlin" in done.stdout
        assert done.stderr == ""
    finally:
        embedded.stop(tmp_path, Settings().embedded_postgres_version)


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["report"], ""),
        (["export"], "exported: "),  # stdout is the file: its one-line summary goes to stderr
        (["index", "status"], ""),
        (["text-search"], ""),
    ],
)
def test_a_successful_command_says_nothing_else_on_stderr(command: list[str], said: str, database_url: str) -> None:
    done = _cli([*command, "--database-url", database_url, "--schema", "memora"], {})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout
    assert done.stderr.startswith(said)
    assert done.stderr.count("\n") == (1 if said else 0)
