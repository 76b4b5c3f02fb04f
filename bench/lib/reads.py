"""Read figures: resolved fetches, interaction pages, and the three kinds of search.

Searches are checked as well as timed: every result list is compared with the exact top 10
computed with numpy from the same precomputed vectors (recall@10), its length is recorded,
and the plan of the package's statement is taken with EXPLAIN ANALYZE on the same parameters.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import numpy as np
from sqlalchemy import event

from bench.lib import baselines, data
from bench.lib.context import Context, Statements
from bench.lib.report import Figure
from bench.lib.server import connect, sqlalchemy_url
from bench.lib.timing import Run, interleaved
from memora_pg import AsyncMemory, MemoryConfig, MemorySearchScope, PgVectorDB, PostgresGraphDB
from memora_pg.engine import create_engine

K = 10
RESOLVE_IDS = 100
PAGE = 100


def _users(ctx: Context, count: int = 50) -> list[int]:
    """The users the read figures cycle through (users of organization 0)."""
    return list(range(min(count, ctx.layout.users, data.USERS_PER_ORG)))


async def explain(conn: asyncpg.Connection, sent: Sequence[tuple[str, Any]]) -> str:
    """The plan of the last statement sent, run (in a transaction, after the ones before it) on ``conn``."""
    async with conn.transaction():
        for statement, parameters in sent[:-1]:
            await conn.execute(statement, *(parameters or ()))
        statement, parameters = sent[-1]
        rows = await conn.fetch(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + statement, *(parameters or ())
        )
    return "\n".join(row[0] for row in rows)


async def explained(conn: asyncpg.Connection, sent: Sequence[tuple[str, Any]], options: str) -> list[dict[str, Any]]:
    """The JSON plan of each statement one call sent, under ``EXPLAIN (options, FORMAT JSON)``."""
    plans = []
    for statement, parameters in sent:
        plan = await conn.fetchval(f"EXPLAIN ({options}, FORMAT JSON) " + statement, *(parameters or ()))
        plans.append((json.loads(plan) if isinstance(plan, str) else plan)[0])
    return plans


async def server_time(conn: asyncpg.Connection, sent: Sequence[tuple[str, Any]], *, repeats: int = 15) -> float:
    """The server's median time (planning and execution, seconds) on the statements of one read call.

    Each statement runs under ``EXPLAIN (ANALYZE, TIMING OFF)`` in one transaction, in order, as
    the call sent them; what a call takes beyond this is its client share (Python, the driver, the
    round trips)."""
    totals = []
    for _ in range(repeats):
        async with conn.transaction():
            plans = await explained(conn, sent, "ANALYZE, TIMING OFF")
        totals.append(sum(p.get("Planning Time", 0.0) + p.get("Execution Time", 0.0) for p in plans) / 1000)
    return float(statistics.median(totals))


async def client_share(conn: asyncpg.Connection, statements: Statements, call: Any, median: float) -> float:
    """``median`` (a read call's p50) less the server's time on the statements ``call(0)`` sends."""
    return median - await call_server_time(conn, statements, call)


async def call_server_time(conn: asyncpg.Connection, statements: Statements, call: Any) -> float:
    """The server's time on the statements ``call(0)`` sends."""
    statements.clear()
    await call(0)
    return await server_time(conn, list(statements.sent))


def plan_summary(plan: str) -> str:
    """The scan nodes of a plan on the memories table, e.g. ``Index Scan using ix_memories_user_recent``."""
    nodes = []
    for line in plan.splitlines():
        text = line.strip().lstrip("-> ").strip()
        if ("Scan" in text) and (" on memories" in text or "ix_memories" in text):
            node = text.split("  (")[0].split(" (")[0]
            if node not in nodes:
                nodes.append(node)
    return ", ".join(nodes) or "no scan of memories"


def index_backed(plan: str) -> bool:
    return "Seq Scan on memories" not in plan and any(
        kind in plan for kind in ("Index Scan", "Bitmap Index Scan", "Index Only Scan")
    )


def recall(found: Sequence[str], truth: Sequence[str]) -> float:
    if not truth:
        return 1.0
    return len(set(found) & set(truth)) / len(truth)


def _quality(results: list[list[str]], truths: list[list[str]]) -> tuple[float, float, bool]:
    """Mean recall@10, mean result count, and whether every call returned as many rows as exist (the full top-k)."""
    recalls = [recall(found, truth) for found, truth in zip(results, truths, strict=True)]
    counts = [len(found) for found in results]
    complete = all(len(found) >= len(truth) for found, truth in zip(results, truths, strict=True))
    return statistics.fmean(recalls), statistics.fmean(counts), complete


def _fewest(results: list[list[str]]) -> int:
    return min(len(found) for found in results)


def _quality_note(name: str, results: list[list[str]], truths: list[list[str]]) -> str:
    mean_recall, mean_count, _ = _quality(results, truths)
    return f"{name}: recall@10 {mean_recall:.3f}, {mean_count:.1f} of 10 results (fewest {_fewest(results)})"


# -- resolved fetch and interaction pages ------------------------------------------------------


async def resolve_figure(ctx: Context, graph: PostgresGraphDB, statements: Statements, raw: asyncpg.Connection) -> None:
    users = _users(ctx)

    def requests(i: int) -> list[tuple[str, str, Any]]:
        user = users[i % len(users)]
        org = ctx.layout.org_of(user)
        return [
            (org, data.user_id(user), data.memory_uuid(user, j))
            for j in data.chain_roots(ctx.layout, user, RESOLVE_IDS)
        ]

    def batch(i: int) -> list[list[dict[str, str]]]:
        return [[{"org_id": o, "user_id": u, "memory_id": str(m)} for o, u, m in requests(i)]]

    async def ours(i: int) -> int:
        return len((await graph.fetch_user_memories_resolved_batch(batch(i)))[0])

    async def theirs(i: int) -> int:
        return len(await baselines.resolve(raw, requests(i)))

    # As of the middle of every user's history: half of each chain had been obtained then.
    middle = data.BASE_TIME + timedelta(seconds=ctx.layout.per_user // 2 * 12)

    async def ours_as_of(i: int) -> int:
        return len((await graph.fetch_user_memories_resolved_batch(batch(i), as_of=middle))[0])

    runs = await interleaved(
        {"ours": ours, "raw": theirs, "as_of": ours_as_of}, iterations=ctx.iterations, warmup=ctx.warmup
    )
    statements.clear()
    await ours_as_of(0)
    as_of_trips = len(statements)
    statements.clear()
    await ours(0)
    trips = len(statements)
    plan = await explain(raw, statements.sent)
    asked = len(requests(0))
    as_of_ratio = runs["as_of"].sample.median / runs["ours"].sample.median
    ctx.add(
        Figure(
            "Reads",
            f"fetch_user_memories_resolved_batch as_of (valid time), {asked} ids, chains of depth {data.CHAIN_DEPTH}",
            ctx.scale,
            ours=runs["as_of"].sample,
            raw=runs["ours"].sample,
            client_share=await client_share(raw, statements, ours_as_of, runs["as_of"].sample.median),
            notes=[
                f"{as_of_trips} statement(s) per call",
                f"{min(runs['as_of'].results)} versions current at the middle of the history",
                "raw column: the current-time resolved fetch of the same run",
            ],
            target="one round trip; ≤ 1.5× the current-time fetch",
            met=as_of_trips == 1 and as_of_ratio <= 1.5,
        )
    )
    returned = min(runs["ours"].results)
    ratio = runs["ours"].sample.median / runs["raw"].sample.median
    served = await call_server_time(raw, statements, ours)  # the raw side sends the same statement
    ctx.add(
        Figure(
            "Reads",
            f"fetch_user_memories_resolved_batch, {asked} ids, chains of depth {data.CHAIN_DEPTH}",
            ctx.scale,
            ours=runs["ours"].sample,
            raw=runs["raw"].sample,
            client_share=runs["ours"].sample.median - served,
            raw_client_share=runs["raw"].sample.median - served,
            notes=[f"{trips} statement(s) per call", f"{returned} current versions returned", plan_summary(plan)],
            target="one round trip; ≤ 2× raw",
            met=trips == 1 and ratio <= 2 and returned == asked,
        )
    )


async def page_figure(ctx: Context, graph: PostgresGraphDB, statements: Statements, raw: asyncpg.Connection) -> None:
    users = _users(ctx)

    async def ours(i: int) -> int:
        user = users[i % len(users)]
        page = await graph.get_all_user_interactions(ctx.layout.org_of(user), data.user_id(user), True, True, 0, PAGE)
        return len(page)

    async def theirs(i: int) -> int:
        user = users[i % len(users)]
        return len(await baselines.page(raw, ctx.layout.org_of(user), data.user_id(user), PAGE))

    runs = await interleaved({"ours": ours, "raw": theirs}, iterations=ctx.iterations, warmup=ctx.warmup)
    statements.clear()
    await ours(0)
    trips = len(statements)
    ratio = runs["ours"].sample.median / runs["raw"].sample.median
    served = await call_server_time(raw, statements, ours)  # the raw side sends the same statement
    size = min(PAGE, ctx.layout.interactions_per_user())
    ctx.add(
        Figure(
            "Reads",
            f"get_all_user_interactions, page of {size} with messages and memories",
            ctx.scale,
            ours=runs["ours"].sample,
            raw=runs["raw"].sample,
            client_share=runs["ours"].sample.median - served,
            raw_client_share=runs["raw"].sample.median - served,
            notes=[f"{trips} statement(s) per call", f"{min(runs['ours'].results)} interactions per page"],
            target="≤ 2× raw",
            met=ratio <= 2,
        )
    )


# -- searches ----------------------------------------------------------------------------------


class Queries:
    """Query ``i`` of a figure: its user, text (the embedder's key) and vector, and the exact answer."""

    def __init__(self, ctx: Context, kind: str, users: list[int]) -> None:
        self.ctx, self.kind, self.users = ctx, kind, users
        self.vectors: dict[int, np.ndarray[Any, Any]] = {}

    def user(self, i: int) -> int:
        return self.users[i % len(self.users)]

    def text(self, i: int) -> str:
        """The query's text, its vector registered with the embedder first."""
        self.vector(i)
        return self._text(i)

    def _text(self, i: int) -> str:
        # "remembers" matches every memory, so the full-text arm of hybrid search has work to do.
        return f"remembers {data.WORDS[i % 64]} {self.kind} q{i}"

    def vector(self, i: int) -> np.ndarray[Any, Any]:
        if i not in self.vectors:
            self.vectors[i] = self.ctx.space.queries(self.user(i), 1, salt=i)[0]
            self.ctx.book.put([self._text(i)], self.vectors[i][None, :])
        return self.vectors[i]


def _ids_of_user(ctx: Context, user: int, rows: Iterable[Any]) -> list[str]:
    return [str(data.memory_uuid(user, int(j))) for j in rows]


def user_truth(ctx: Context, queries: Queries, i: int, topic: int | None = None) -> list[str]:
    user = queries.user(i)
    vectors = ctx.space.user_vectors(user)
    rows = np.arange(ctx.layout.per_user)
    if topic is not None:
        rows = rows[rows % data.TOPICS == topic]
    top = data.exact_top(vectors[rows], queries.vector(i), K)
    return _ids_of_user(ctx, user, rows[top])


def org_truths(ctx: Context, queries: Queries, count: int) -> list[list[str]]:
    """The exact organization-wide top 10 of queries 0..count-1 (organization 0), streamed user by user."""
    matrix = np.stack([queries.vector(i) for i in range(count)])
    best_scores = np.full((count, K), -np.inf, dtype=np.float32)
    best_ids: list[list[str]] = [[""] * K for _ in range(count)]
    for user in range(min(ctx.layout.users, data.USERS_PER_ORG)):
        similarity = ctx.space.user_vectors(user) @ matrix.T  # per_user x count
        for q in range(count):
            column = similarity[:, q]
            top = np.argpartition(-column, K - 1)[:K] if len(column) > K else np.arange(len(column))
            merged = np.concatenate([best_scores[q], column[top]])
            labels = best_ids[q] + _ids_of_user(ctx, user, top)
            order = np.argsort(-merged, kind="stable")[:K]
            best_scores[q] = merged[order]
            best_ids[q] = [labels[o] for o in order]
    return best_ids


async def _plan_of(raw: asyncpg.Connection, statements: Statements, call: Any) -> str:
    statements.clear()
    await call(0)
    return await explain(raw, statements.sent)


async def user_search_figures(ctx: Context, engine: Any, mode: str, raw: asyncpg.Connection) -> dict[str, Run]:
    """User-scoped search: PgVectorDB and the mem0-style face in their default (hybrid) mode, and
    PgVectorDB in dense mode (whose recall is measured against the exact cosine answer), against the
    exact floor."""
    queries = Queries(ctx, "user", _users(ctx))
    dense = PgVectorDB(engine, embedder=ctx.book, settings=ctx.settings(), search_mode="dense")
    hybrid = PgVectorDB(engine, embedder=ctx.book, settings=ctx.settings())
    memory = AsyncMemory(
        MemoryConfig(vector_store={"provider": "pgvector", "config": {"collection_name": data.collection(0)}}),
        engine=engine,
        embedder=ctx.book,
    )
    statements = Statements(engine)

    def org(i: int) -> str:
        return ctx.layout.org_of(queries.user(i))

    async def vector_db(store: PgVectorDB, i: int) -> list[str]:
        hits = await store.search_memory(queries.text(i), MemorySearchScope.USER, org(i), data.user_id(queries.user(i)))
        return [m.memory_id for m, _ in hits]

    async def face(i: int) -> list[str]:
        found = await memory.search(
            queries.text(i), filters={"user_id": data.user_id(queries.user(i))}, top_k=K, threshold=None
        )
        return [item["id"] for item in found["results"]]

    async def floor(i: int) -> list[str]:
        rows = await baselines.user_exact(raw, org(i), data.user_id(queries.user(i)), queries.vector(i), K)
        return [str(r["memory_id"]) for r in rows]

    async def naive(i: int) -> list[str]:
        rows = await baselines.user_naive(raw, org(i), data.user_id(queries.user(i)), queries.vector(i), K)
        return [str(r["memory_id"]) for r in rows]

    calls = {
        "dense": lambda i: vector_db(dense, i),
        "hybrid": lambda i: vector_db(hybrid, i),
        "face": face,
        "floor": floor,
        "naive": naive,
    }
    runs = await interleaved(calls, iterations=ctx.iterations, warmup=ctx.warmup)
    truths = [user_truth(ctx, queries, i) for i in range(ctx.warmup, ctx.warmup + ctx.iterations)]
    plan = await _plan_of(raw, statements, lambda i: vector_db(dense, i))
    floor_run = runs["floor"]
    floor_served = await server_time(
        raw, [(baselines.USER_EXACT, (org(0), data.user_id(queries.user(0)), queries.vector(0), K))]
    )
    for name, label in (
        ("hybrid", "PgVectorDB.search_memory, USER scope, default (hybrid)"),
        ("face", "AsyncMemory.search (mem0-style), user filter, default (hybrid)"),
    ):
        run = runs[name]
        ratio = run.sample.median / floor_run.sample.median
        ctx.add(
            Figure(
                "Search",
                f"user-scoped search, {label}",
                ctx.scale,
                mode,
                ours=run.sample,
                raw=floor_run.sample,
                client_share=await client_share(raw, statements, calls[name], run.sample.median),
                raw_client_share=floor_run.sample.median - floor_served,
                notes=[
                    f"{statistics.fmean(len(r) for r in run.results):.1f} results (fused with full-text and"
                    " neighbours: not a cosine recall figure; LoCoMo recall is bench.retrieval's)"
                ],
                target="p50 ≤ 2× raw exact floor",
                met=ratio <= 2.0,
            )
        )
    run = runs["dense"]
    mean_recall, _, complete = _quality(run.results, truths)
    ratio = run.sample.median / floor_run.sample.median
    ctx.add(
        Figure(
            "Search",
            "user-scoped search, PgVectorDB.search_memory, USER scope, dense mode",
            ctx.scale,
            mode,
            ours=run.sample,
            raw=floor_run.sample,
            client_share=await client_share(raw, statements, calls["dense"], run.sample.median),
            raw_client_share=floor_run.sample.median - floor_served,
            notes=[
                _quality_note("ours", run.results, truths),
                _quality_note("raw floor", floor_run.results, truths),
                f"plan: {plan_summary(plan)}",
            ],
            target="recall@10 = 1.0, full top-k, p50 ≤ 1.5× raw exact floor",
            met=mean_recall == 1.0 and complete and ratio <= 1.5,
        )
    )
    ctx.add(
        Figure(
            "Search",
            "user-scoped search, raw post-filtered HNSW (WHERE user … ORDER BY embedding <=> q LIMIT 10)",
            ctx.scale,
            mode,
            ours=runs["naive"].sample,
            raw=floor_run.sample,
            notes=[_quality_note("naive", runs["naive"].results, truths)],
        )
    )
    await memory.close()
    return runs


async def org_search_figure(ctx: Context, engine: Any, mode: str, raw: asyncpg.Connection) -> None:
    """Organization-wide search: HNSW with iterative scans (hnsw mode) or an exact scan (exact mode)."""
    queries = Queries(ctx, "org", _users(ctx, 1000))
    store = PgVectorDB(engine, embedder=ctx.book, settings=ctx.settings(), search_mode="dense")
    default = PgVectorDB(engine, embedder=ctx.book, settings=ctx.settings())
    statements = Statements(engine)
    ef_search = ctx.settings().hnsw_ef_search
    org = data.org_id(0)
    # an exact scan of a whole organization is slow: fewer calls
    iterations = ctx.iterations if mode == "hnsw" else max(3, ctx.iterations // 10)
    warmup = ctx.warmup if mode == "hnsw" else 2

    async def ours(i: int) -> list[str]:
        hits = await store.search_memory(queries.text(i), MemorySearchScope.ORGANIZATION, org)
        return [m.memory_id for m, _ in hits]

    async def theirs(i: int) -> list[str]:
        rows = await baselines.org_nearest(raw, org, queries.vector(i), K, ef_search)
        return [str(r["memory_id"]) for r in rows]

    async def hybrid(i: int) -> list[str]:
        hits = await default.search_memory(queries.text(i), MemorySearchScope.ORGANIZATION, org)
        return [m.memory_id for m, _ in hits]

    runs = await interleaved({"ours": ours, "raw": theirs, "hybrid": hybrid}, iterations=iterations, warmup=warmup)
    all_truths = org_truths(ctx, queries, warmup + iterations)
    truths = all_truths[warmup:]
    plan = await _plan_of(raw, statements, ours)
    mean_recall, _, complete = _quality(runs["ours"].results, truths)
    p50 = runs["ours"].sample.median
    ctx.add(
        Figure(
            "Search",
            f"organization-scoped search, PgVectorDB.search_memory, ORGANIZATION scope, dense (ef_search {ef_search})",
            ctx.scale,
            mode,
            ours=runs["ours"].sample,
            raw=runs["raw"].sample,
            notes=[
                _quality_note("ours", runs["ours"].results, truths),
                _quality_note("raw", runs["raw"].results, truths),
                f"plan: {plan_summary(plan)}",
            ],
            target="recall@10 ≥ 0.95; p50 ≤ 15 ms",
            met=mean_recall >= 0.95 and complete and p50 <= 0.015,
        )
    )
    hybrid_p50 = runs["hybrid"].sample.median
    notes = ["fused with full-text and neighbours: the raw side is the dense HNSW floor"]
    agreement = None
    if mode == "hnsw":
        agreement = await _exact_hybrid_agreement(ctx, queries, runs["hybrid"].results, first=warmup)
        notes.append(
            f"top 10 shared with the same hybrid search whose nearest rows are exact (no index scans): {agreement:.3f}"
        )
    ctx.add(
        Figure(
            "Search",
            "organization-scoped search, PgVectorDB.search_memory, ORGANIZATION scope, default (hybrid)",
            ctx.scale,
            mode,
            ours=runs["hybrid"].sample,
            raw=runs["raw"].sample,
            notes=notes,
            target="p50 ≤ 15 ms; top 10 agree with an exact hybrid ranking for ≥ 95% of hits",
            met=hybrid_p50 <= 0.015 and (agreement is None or agreement >= 0.95),
        )
    )


async def _exact_hybrid_agreement(ctx: Context, queries: Queries, found: Sequence[list[str]], *, first: int) -> float:
    """The share of the hybrid search's hits (``found``, of queries ``first``, ``first`` + 1, ...) that the same
    search returns when its nearest rows are exact: on connections where PostgreSQL may not use an index scan,
    HNSW's only kind, so the nearest rows come from a sort of the organization's rows."""
    engine = create_engine(sqlalchemy_url(ctx.url), ctx.settings(pool_size=1, max_overflow=0))

    @event.listens_for(engine.sync_engine, "connect")
    def no_index_scans(connection: Any, _: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("SET enable_indexscan = off")
        cursor.close()

    exact = PgVectorDB(engine, embedder=ctx.book, settings=ctx.settings())
    shared = total = 0
    try:
        for offset, hits in enumerate(found):
            i = first + offset
            truth = await exact.search_memory(queries.text(i), MemorySearchScope.ORGANIZATION, data.org_id(0))
            shared += len(set(hits) & {m.memory_id for m, _ in truth})
            total += len(truth)
    finally:
        await engine.dispose()
    return shared / total if total else float("nan")


async def org_hnsw_figure(ctx: Context) -> None:
    """The organization-wide search alone, in hnsw mode, with the context's settings."""
    raw = await connect(ctx.url)
    try:
        await org_search_figure(ctx, ctx.engine(1), "hnsw", raw)
    finally:
        await raw.close()


async def filtered_search_figure(ctx: Context, engine: Any, mode: str, raw: asyncpg.Connection) -> Run:
    """mem0-style search under a metadata filter that keeps 1% of the user's rows."""
    queries = Queries(ctx, "filtered", _users(ctx))
    # The default (hybrid) mode, as a user gets it: the raw side is the dense floor under the same filter.
    memory = AsyncMemory(
        MemoryConfig(vector_store={"provider": "pgvector", "config": {"collection_name": data.collection(0)}}),
        engine=engine,
        embedder=ctx.book,
    )
    statements = Statements(engine)

    def topic(i: int) -> int:
        return (i * 7) % data.TOPICS

    async def ours(i: int) -> list[str]:
        filters = {"user_id": data.user_id(queries.user(i)), "topic": f"t{topic(i)}"}
        found = await memory.search(queries.text(i), filters=filters, top_k=K, threshold=None)
        return [item["id"] for item in found["results"]]

    async def theirs(i: int) -> list[str]:
        user = queries.user(i)
        rows = await baselines.filtered(
            raw, ctx.layout.org_of(user), data.user_id(user), queries.vector(i), {"topic": f"t{topic(i)}"}, K
        )
        return [str(r["memory_id"]) for r in rows]

    async def unfiltered(i: int) -> list[str]:
        found = await memory.search(
            queries.text(i), filters={"user_id": data.user_id(queries.user(i))}, top_k=K, threshold=None
        )
        return [item["id"] for item in found["results"]]

    runs = await interleaved(
        {"ours": ours, "raw": theirs, "unfiltered": unfiltered}, iterations=ctx.iterations, warmup=ctx.warmup
    )
    truths = [user_truth(ctx, queries, i, topic(i)) for i in range(ctx.warmup, ctx.warmup + ctx.iterations)]
    plan = await _plan_of(raw, statements, ours)
    _, _, complete = _quality(runs["ours"].results, truths)
    ratio = runs["ours"].sample.median / runs["unfiltered"].sample.median
    ctx.add(
        Figure(
            "Search",
            "metadata-filtered search (filter keeps 1% of a user's rows), AsyncMemory.search, default (hybrid)",
            ctx.scale,
            mode,
            ours=runs["ours"].sample,
            raw=runs["raw"].sample,
            notes=[
                f"the same search without the filter: p50 {runs['unfiltered'].sample.median * 1000:.2f} ms,"
                f" filtered ÷ unfiltered {ratio:.2f}×",
                f"plan: {plan_summary(plan)}",
            ],
            target="full top-k; index-backed; p50 ≤ 2× the same search without the filter",
            met=complete and index_backed(plan) and ratio <= 2.0,
        )
    )
    await memory.close()
    return runs["ours"]


async def read_figures(ctx: Context, mode: str) -> dict[str, Run]:
    """Every read figure in one mode; returns the runs the mem0 comparison needs."""
    raw = await connect(ctx.url)
    try:
        engine = ctx.engine(1)
        graph = PostgresGraphDB(engine, embedder=ctx.book, settings=ctx.settings())
        statements = Statements(engine)
        if mode == "hnsw":
            await resolve_figure(ctx, graph, statements, raw)
            await page_figure(ctx, graph, statements, raw)
        runs = await user_search_figures(ctx, engine, mode, raw)
        await org_search_figure(ctx, engine, mode, raw)
        runs["filtered"] = await filtered_search_figure(ctx, engine, mode, raw)
        return runs
    finally:
        await raw.close()
