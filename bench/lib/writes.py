"""Write figures: save_interaction_with_memories (one writer and eight), and the mem0-style add.

Writes go to writer users of their own, so the read figures' users keep exactly the bulk
data. Each side writes to its own user: the rows differ, the work is the same.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from bench.lib import baselines, data
from bench.lib.context import Context, Statements
from bench.lib.load import SCHEMA
from bench.lib.report import Figure
from bench.lib.server import connect
from bench.lib.timing import Sample, interleaved, throughput
from memora_pg import AsyncMemory, MemoriesAndInteraction, MemoryConfig, MemoryToStore, PostgresGraphDB

MESSAGES = 10
MEMORIES = 5
ADD_BATCH = 10
WRITERS = 8
# Writes go to an organization of their own, so that organization-wide searches of the bulk
# organization find exactly the rows their exact answers were computed from.
COLLECTION = "writes"
ORG = f"mem0:{COLLECTION}"


def _at(i: int) -> datetime:
    return datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=i)


def _messages(key: str) -> list[tuple[str, str]]:
    return [("user" if p % 2 == 0 else "assistant", f"{key} message {p}") for p in range(MESSAGES)]


async def _writers(conn: asyncpg.Connection, names: list[str]) -> None:
    await conn.execute(baselines.ENSURE_ORG, ORG, COLLECTION)
    await conn.execute(
        f'INSERT INTO "{SCHEMA}".agents (org_id, agent_id, agent_label) VALUES ($1, $2, $2) ON CONFLICT DO NOTHING',
        ORG,
        data.AGENT_ID,
    )
    await conn.executemany(
        f'INSERT INTO "{SCHEMA}".users (org_id, user_id, user_name) VALUES ($1, $2, $2) ON CONFLICT DO NOTHING',
        [(ORG, name) for name in names],
    )


class Saver:
    """Both sides of save_interaction_with_memories, for one mode, on a given user per call."""

    def __init__(self, ctx: Context, mode: str) -> None:
        self.ctx, self.mode = ctx, mode

    def payload(self, key: str) -> tuple[MemoriesAndInteraction, list[str], Any, list[tuple[str, str]]]:
        texts = [f"{key} fact {k}" for k in range(MEMORIES)]
        vectors = self.ctx.space.fresh(key, MEMORIES)
        self.ctx.book.put(texts, vectors)
        messages = _messages(key)
        payload = MemoriesAndInteraction(
            interaction=[{"role": role, "content": content} for role, content in messages],
            memories=[MemoryToStore(memory=text, source_msg_block_pos=[2 * k]) for k, text in enumerate(texts)],
            interaction_date=_at(0),
        )
        return payload, texts, vectors, messages

    async def ours(self, graph: PostgresGraphDB, user: str, key: str) -> None:
        payload, *_ = self.payload(key)
        await graph.save_interaction_with_memories(ORG, data.AGENT_ID, user, payload)

    def raw_arguments(self, user: str, key: str) -> dict[str, Any]:
        _, texts, vectors, messages = self.payload(key)
        return {
            "org_id": ORG,
            "user_id": user,
            "agent_id": data.AGENT_ID,
            "at": _at(0),
            "messages": messages,
            "texts": texts,
            "vectors": list(vectors),
            "positions": [2 * k for k in range(MEMORIES)],
        }

    async def raw(self, conn: asyncpg.Connection, user: str, key: str) -> None:
        """memora_pg's own statement, sent raw: the ratio's baseline."""
        await baselines.save_one(conn, **self.raw_arguments(user, key))

    async def hand(self, conn: asyncpg.Connection, user: str, key: str) -> None:
        """A statement per table in a transaction, as one would write it by hand."""
        await baselines.save(conn, **self.raw_arguments(user, key))


async def save_figures(ctx: Context, mode: str) -> None:
    saver = Saver(ctx, mode)
    raw_conn = await connect(ctx.url)
    try:
        ours_user, raw_user, hand_user = f"w-{mode}-ours", f"w-{mode}-raw", f"w-{mode}-hand"
        await _writers(raw_conn, [ours_user, raw_user, hand_user])
        engine = ctx.engine(1)
        graph = PostgresGraphDB(engine, embedder=ctx.book, settings=ctx.settings())
        statements = Statements(engine)
        runs = await interleaved(
            {
                "ours": lambda i: saver.ours(graph, ours_user, f"save {mode} ours {i}"),
                "raw": lambda i: saver.raw(raw_conn, raw_user, f"save {mode} raw {i}"),
                "hand": lambda i: saver.hand(raw_conn, hand_user, f"save {mode} hand {i}"),
            },
            iterations=ctx.iterations,
            warmup=ctx.warmup,
        )
        statements.clear()
        await saver.ours(graph, ours_user, f"save {mode} counted")
        ratio = runs["ours"].sample.median / runs["raw"].sample.median
        ctx.add(
            Figure(
                "Writes",
                f"save_interaction_with_memories ({MESSAGES} messages + {MEMORIES} memories), one connection",
                ctx.scale,
                mode,
                ours=runs["ours"].sample,
                raw=runs["raw"].sample,
                # The server's work is the raw side's: the same statement with the same rows.
                client_share=runs["ours"].sample.median - runs["raw"].sample.median,
                notes=[
                    f"{len(statements)} statement per save; raw: the same statement, audit row included",
                    _hand_note(runs["ours"].sample, runs["hand"].sample, baselines.SAVE_STATEMENTS),
                ],
                target="≤ 1.5× raw",
                met=ratio <= 1.5,
            )
        )
        await concurrent_figure(ctx, saver, mode)
    finally:
        await raw_conn.close()


async def concurrent_figure(ctx: Context, saver: Saver, mode: str) -> None:
    """Saves per second of one writer, then of eight writers on eight users, through one pool of eight."""
    per_worker = max(5, ctx.iterations // 4)
    users = [f"w-{mode}-c{w}" for w in range(WRITERS)]
    raw_conns = [await connect(ctx.url) for _ in range(WRITERS)]
    try:
        await _writers(raw_conns[0], users)
        engine = ctx.engine(WRITERS)
        graph = PostgresGraphDB(engine, embedder=ctx.book, settings=ctx.settings())
        # warm every pooled connection and its statement cache
        await throughput(
            lambda w, i: saver.ours(graph, users[w], f"conc {mode} warm {w} {i}"), workers=WRITERS, per_worker=6
        )
        await throughput(
            lambda w, i: saver.raw(raw_conns[w], users[w], f"conc {mode} rawwarm {w} {i}"),
            workers=WRITERS,
            per_worker=6,
        )
        one = await throughput(
            lambda w, i: saver.ours(graph, users[w], f"conc {mode} one {i}"), workers=1, per_worker=per_worker * 2
        )
        eight = await throughput(
            lambda w, i: saver.ours(graph, users[w], f"conc {mode} eight {w} {i}"),
            workers=WRITERS,
            per_worker=per_worker,
        )
        raw_one = await throughput(
            lambda w, i: saver.raw(raw_conns[w], users[w], f"conc {mode} rawone {i}"),
            workers=1,
            per_worker=per_worker * 2,
        )
        raw_eight = await throughput(
            lambda w, i: saver.raw(raw_conns[w], users[w], f"conc {mode} raweight {w} {i}"),
            workers=WRITERS,
            per_worker=per_worker,
        )
        scaling = eight / one
        ctx.add(
            Figure(
                "Writes",
                f"save_interaction_with_memories, {WRITERS} concurrent writers on different users",
                ctx.scale,
                mode,
                rate=eight,
                ratio=scaling,
                notes=[
                    f"1 writer {one:,.0f} saves/s, {WRITERS} writers {eight:,.0f} saves/s",
                    f"raw: 1 writer {raw_one:,.0f}/s, {WRITERS} writers {raw_eight:,.0f}/s"
                    f" ({raw_eight / raw_one:.2f}×)",
                ],
                target=f"{WRITERS} writers ≥ 1.6× one",
                met=scaling >= 1.6,
            )
        )
    finally:
        for conn in raw_conns:
            await conn.close()


async def add_figure(ctx: Context, mode: str) -> Figure:
    """The mem0-style ``add(messages, infer=False)`` of 10 messages: 10 memories per call."""
    raw_conn = await connect(ctx.url)
    try:
        engine = ctx.engine(1)
        memory = AsyncMemory(
            MemoryConfig(vector_store={"provider": "pgvector", "config": {"collection_name": COLLECTION}}),
            engine=engine,
            embedder=ctx.book,
        )
        statements = Statements(engine)

        def texts(key: str) -> tuple[list[str], Any]:
            batch = [f"{key} memory {k}" for k in range(ADD_BATCH)]
            vectors = ctx.space.fresh(key, ADD_BATCH)
            ctx.book.put(batch, vectors)
            return batch, vectors

        async def ours(i: int) -> None:
            batch, _ = texts(f"add {mode} ours {i}")
            await memory.add([{"role": "user", "content": t} for t in batch], user_id=f"a-{mode}-ours", infer=False)

        def raw_side(side: str, send: Any) -> Any:
            async def call(i: int) -> None:
                batch, vectors = texts(f"add {mode} {side} {i}")
                await send(
                    raw_conn,
                    org_id=ORG,
                    collection=COLLECTION,
                    user_id=f"a-{mode}-{side}",
                    at=_at(i),
                    texts=batch,
                    vectors=list(vectors),
                )

            return call

        raw = raw_side("raw", baselines.add_one)  # memora_pg's own statement, sent raw
        hand = raw_side("hand", baselines.add)  # a statement per table, as one would write it by hand

        runs = await interleaved({"ours": ours, "raw": raw, "hand": hand}, iterations=ctx.iterations, warmup=ctx.warmup)
        statements.clear()
        await ours(-1)
        per_memory = Sample([s / ADD_BATCH for s in runs["ours"].sample.seconds])
        raw_per_memory = Sample([s / ADD_BATCH for s in runs["raw"].sample.seconds])
        hand_per_memory = Sample([s / ADD_BATCH for s in runs["hand"].sample.seconds])
        await memory.close()
        return ctx.add(
            Figure(
                "Writes",
                f"mem0-style add(infer=False), {ADD_BATCH} messages per call: time per memory",
                ctx.scale,
                mode,
                ours=per_memory,
                raw=raw_per_memory,
                rate=1 / per_memory.median,
                # Per call of ADD_BATCH messages, as the target counts it: the same statement sent raw.
                client_share=runs["ours"].sample.median - runs["raw"].sample.median,
                notes=[
                    f"{len(statements)} statement per call (client share per call of {ADD_BATCH}); raw: the same "
                    "statement, audit row included",
                    _hand_note(per_memory, hand_per_memory, baselines.ADD_STATEMENTS),
                ],
            )
        )
    finally:
        await raw_conn.close()


def _hand_note(ours: Sample, hand: Sample, statements: int) -> str:
    return (
        f"by hand ({statements} statements in a transaction): median {hand.median * 1000:.2f} ms, "
        f"memora_pg {ours.median / hand.median:.2f}× that"
    )


async def add_rate_figure(ctx: Context, hnsw: Figure, exact: Figure) -> None:
    assert hnsw.rate is not None
    assert exact.rate is not None
    ratio = exact.rate / hnsw.rate
    ctx.add(
        Figure(
            "Writes",
            "add rate, exact mode vs hnsw mode",
            ctx.scale,
            "both",
            rate=exact.rate,
            ratio=ratio,
            notes=[f"exact {exact.rate:,.0f} memories/s, hnsw {hnsw.rate:,.0f} memories/s"],
            target="exact ≥ 10× hnsw",
            met=ratio >= 10,
        )
    )
