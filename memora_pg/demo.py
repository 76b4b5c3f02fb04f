"""The README's demo: a short story told through PostgresGraphDB and its vector store.

It runs on the embedded PostgreSQL (or any server given), with the offline embedder, and
needs no API key: the memories a language model would extract are written out here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

from memora_pg.config import Settings
from memora_pg.contract import MemorySearchScope
from memora_pg.embeddings import embed_checked, unrelated_similarity
from memora_pg.graph import search
from memora_pg.models import ContraryMemoryToStore, MemoriesAndInteraction, MemoryToStore
from memora_pg.store import PostgresGraphDB
from memora_pg.vector import PgVectorDB


def _table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    out = [
        title,
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(out) + "\n"


def _score_meaning(settings: Settings, floor: float, gate: float) -> str:
    """What a search score says, with this run's weights and the question's measured floor and gate."""
    dense = settings.search_dense_weight
    return (
        f"A score is in [0, 1]: {dense:.0%} meaning (how far the cosine similarity lies above {floor:.3f}, once\n"
        f"the nearest memory is above {gate:.3f}: for this question, where this embedder places text about no\n"
        f"one) and {1 - dense:.0%} words (BM25), lifted a little by the memory written just before or after it.\n"
        "Above 0 is related, 0 is not; a memory that answers well scores about 0.1 to 0.5. Read the order first.\n"
    )


def _when(day: int) -> datetime:
    return datetime(2026, 11, day, 9, 30, tzinfo=timezone.utc)


async def run_demo(settings: Settings) -> None:
    where = "the embedded PostgreSQL" if settings.url() is None else "the configured server"
    print(f"memora_pg demo on {where} (schema {settings.db_schema!r})\n")
    async with PostgresGraphDB(settings=settings) as graph:
        org = await graph.create_organization("Acme Health")
        jake = await graph.create_user(org.org_id, "Jake")
        coach = await graph.create_agent(org.org_id, "Nutrition coach", user_id=jake.user_id)
        u, a = f"user_{jake.user_id}", f"agent_{coach.agent_id}"

        first = [
            {"role": "user", "content": "Hi! I live in Lisbon and I'm allergic to peanuts."},
            {"role": "assistant", "content": "Thanks, noted. Any favourite drink?"},
            {"role": "user", "content": "Green tea every morning."},
        ]
        interaction_id, _ = await graph.save_interaction_with_memories(
            org.org_id,
            coach.agent_id,
            jake.user_id,
            MemoriesAndInteraction(
                interaction=first,
                interaction_date=_when(2),
                memories=[
                    MemoryToStore(memory=f"{u} lives in Lisbon", source_msg_block_pos=[0]),
                    MemoryToStore(memory=f"{u} is allergic to peanuts", source_msg_block_pos=[0]),
                    MemoryToStore(memory=f"{u} drinks green tea every morning", source_msg_block_pos=[2]),
                ],
            ),
        )
        lisbon = next(m for m in await graph.get_all_user_memories(org.org_id, jake.user_id) if "Lisbon" in m.memory)

        second = [*first, {"role": "user", "content": f"Update: I moved to Berlin. {coach.agent_label}, thanks!"}]
        await graph.update_interaction_and_memories(
            org.org_id,
            coach.agent_id,
            jake.user_id,
            interaction_id,
            MemoriesAndInteraction(
                interaction=second,
                interaction_date=_when(20),
                memories=[MemoryToStore(memory=f"{u} thanked {a}", source_msg_block_pos=[3])],
                contrary_memories=[
                    ContraryMemoryToStore(
                        memory=f"{u} moved to Berlin",
                        source_msg_block_pos=[3],
                        existing_contrary_memory_id=lisbon.memory_id,
                    )
                ],
            ),
        )

        print(
            _table(
                "Organization, user, agent",
                ["kind", "id", "name"],
                [
                    ["organization", org.org_id, org.org_name],
                    ["user", jake.user_id, jake.user_name],
                    ["agent (Jake's own)", coach.agent_id, coach.agent_label],
                ],
            )
        )
        stored = await graph.get_interaction(org.org_id, jake.user_id, interaction_id)
        print(
            _table(
                "The conversation",
                ["#", "role", "content"],
                [[m.msg_position, m.role, m.content] for m in stored.messages or []],
            )
        )
        every_version = await graph.get_all_user_memories(org.org_id, jake.user_id)
        print(
            _table(
                "Every stored memory version, newest first",
                ["obtained", "memory", "from messages"],
                [
                    [m.obtained_at.date(), m.memory, [s.msg_position for s in m.message_sources or []]]
                    for m in every_version
                ],
            )
        )

        question = "Which city is Jake living in now?"
        vector = graph.get_associated_vector_db()
        assert isinstance(vector, PgVectorDB)
        (hits,) = await vector.search_memories([question], MemorySearchScope.USER, org.org_id, jake.user_id)
        print(
            _table(
                f"Search: {question!r} (raw hits, all versions)",
                ["score", "stored text"],
                [[f"{score:.3f}", m.memory] for m, score in hits],
            )
        )
        asked = await embed_checked(vector.embedder, [question], query=True)
        floors = await search.cosine_floors(vector.embedder, asked, settings, unrelated_similarity(vector.embedder))
        # Without a measured floor, the settings fix it (search_cosine_floor), and it is the gate too.
        fixed = float(settings.search_cosine_floor or 0)
        print(_score_meaning(settings, *(floors[0] if floors else (fixed, fixed))))
        refs = [{"memory_id": m.memory_id, "user_id": m.user_id, "org_id": m.org_id} for m, _ in hits]
        resolved = await graph.fetch_user_memories_resolved(refs)
        print(
            _table(
                "Resolved: newest versions, names in place of placeholders", ["memory"], [[m.memory] for m in resolved]
            )
        )
        newest = next(m for m in resolved if "Berlin" in m.memory)
        history = await graph.get_user_memory_history(org.org_id, jake.user_id, newest.memory_id)
        print(
            _table(
                "History of that memory", ["obtained", "memory"], [[m.obtained_at.date(), m.memory] for m in history]
            )
        )
        then = _when(10)
        as_of = await graph.fetch_user_memories_resolved(refs, as_of=then)
        print(
            _table(
                f"As of {then.date()} (valid time): what was true then",
                ["memory"],
                [[m.memory] for m in as_of if "Lisbon" in m.memory or "Berlin" in m.memory],
            )
        )
        print(
            f"Report: {len(every_version)} memory versions, {len(resolved)} current after resolution, "
            f"{len(history) - 1} contradiction(s) in the chain, {len(stored.messages or [])} messages."
        )
        print("All of it in one PostgreSQL database; each write above was one transaction.")
