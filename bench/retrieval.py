"""Retrieval quality: LoCoMo recall@k of every face's default search, beside the floors of the same run.

    python -m bench.retrieval PATH [--updates bench/data/update_detection.json]
        [--locomo-updates bench/data/locomo_updates.json] [--out bench/results/retrieval.md]

PATH is a LoCoMo-format file (the development set, or the full set a user downloads). Every
turn is one memory, text ``"<speaker>: <text>"``, stored for one user per conversation through
each face's public API: the Memora graph (one interaction per session, each turn a memory
sourced from its message, dated by the session), the mem0-style ``AsyncMemory``
(``add(infer=False)`` of each session's turns), the AutoGen ``PostgresMemory`` (one ``add`` per
turn) and LangGraph's ``MemoraStore`` (one item per turn, keyed by its id, a namespace per
conversation). Every question of categories 1-4 with evidence is searched in the user's scope; recall@k
is the share of the question's evidence turns among the first k results, averaged over the
questions. Evidence ids are cleaned as written (``"D8:6; D9:17"`` is two ids, ``"D:11:26"`` is
``D11:26``); ids that name no turn are dropped, and a question left with none is skipped.

The floors run in the same database: plain cosine similarity over the user's rows, and
PostgreSQL full-text alone (``english``, any query word, ``ts_rank``), both as raw SQL.

``--updates`` also measures update detection: each user's facts are saved as memories, each from
an interaction of its own; for each update, the Memora vector DB's search with the update's text
as the query (what the Memora agent runs before its comparison call) must return the old version
among its hits.

Embeddings come from the offline default embedder (multilingual-e5-small); each distinct text is
embedded once, before anything is timed, and shared by every face and floor. Search p50/p95
are per call of each face's public search, embedding excluded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.lib.embedding import SharedEmbedder
from bench.lib.facts import save_facts
from bench.lib.locomo import CATEGORIES, Conversation, Question, load
from bench.lib.server import Server
from memora_pg import (
    AsyncMemory,
    MemoriesAndInteraction,
    MemorySearchScope,
    MemoryToStore,
    PgVectorDB,
    PostgresGraphDB,
    PostgresMemory,
    Settings,
)
from memora_pg.embeddings import LocalEmbedder
from memora_pg.mem0 import MemoryConfig

KS = (1, 5, 10, 20, 50)
SECTION_START = "<!-- bench:retrieval:start -->"
SECTION_END = "<!-- bench:retrieval:end -->"


# -- scoring ------------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    recalls: dict[str, list[list[float]]] = field(default_factory=dict)
    returned: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    depth: int = 50

    def add(self, question: Question, ranked: Sequence[str], seconds: float | None = None) -> None:
        row = [len(set(ranked[:k]) & set(question.evidence)) / len(question.evidence) for k in KS]
        for key in ("all", CATEGORIES[question.category]):
            self.recalls.setdefault(key, []).append(row)
        self.returned.append(len(ranked))
        if seconds is not None:
            self.seconds.append(seconds)

    def recall(self, key: str = "all") -> list[float]:
        rows = self.recalls.get(key, [])
        return [statistics.fmean(column) for column in zip(*rows, strict=True)] if rows else []

    def cells(self, key: str = "all") -> list[str]:
        return [f"{value:.3f}" if k <= self.depth else "—" for k, value in zip(KS, self.recall(key), strict=True)]


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# -- the faces ---------------------------------------------------------------------------------


Search = Callable[[str], Awaitable[list[str]]]


async def _each(result: Result, conversation: Conversation, search: Search) -> None:
    for question in conversation.questions:
        start = time.perf_counter()
        ranked = await search(question.text)
        result.add(question, ranked, time.perf_counter() - start)


async def memora_face(url: str, settings: Settings, embedder: SharedEmbedder, data: list[Conversation]) -> Result:
    """PostgresGraphDB saves, PgVectorDB.search_memory (its default: top 10)."""
    result = Result("Memora `PgVectorDB.search_memory`", depth=10)
    async with PostgresGraphDB(url, settings=settings, embedder=embedder) as graph:
        vector = graph.get_associated_vector_db()
        assert isinstance(vector, PgVectorDB)
        org = await graph.create_organization("locomo")
        agent = await graph.create_agent(org.org_id, "assistant")
        for conversation in data:
            user = await graph.create_user(org.org_id, conversation.sample_id)
            for session in sorted({t.session for t in conversation.turns}):
                turns = [t for t in conversation.turns if t.session == session]
                await graph.save_interaction_with_memories(
                    org.org_id,
                    agent.agent_id,
                    user.user_id,
                    MemoriesAndInteraction(
                        interaction=[{"role": "user", "content": t.text} for t in turns],
                        interaction_date=turns[0].date,
                        memories=[MemoryToStore(memory=t.text, source_msg_block_pos=[i]) for i, t in enumerate(turns)],
                    ),
                )

            ids = {t.text: t.dia_id for t in conversation.turns}

            async def search(question: str, user_id: str = user.user_id, ids: dict[str, str] = ids) -> list[str]:
                hits = await vector.search_memory(question, MemorySearchScope.USER, org.org_id, user_id)
                return [ids[memory.memory] for memory, _ in hits]

            await _each(result, conversation, search)
    return result


async def mem0_face(url: str, settings: Settings, embedder: SharedEmbedder, data: list[Conversation]) -> Result:
    """AsyncMemory.add(infer=False) per session, search(top_k=50) with its default threshold."""
    result = Result("mem0-style `AsyncMemory.search(top_k=50)`")
    config = MemoryConfig.model_validate(
        {"vector_store": {"provider": "pgvector", "config": {"connection_string": url, "collection_name": "locomo"}}}
    )
    memory = AsyncMemory(config, embedder=embedder)
    try:
        for conversation in data:
            for session in sorted({t.session for t in conversation.turns}):
                turns = [t for t in conversation.turns if t.session == session]
                await memory.add(
                    [{"role": "user", "content": t.text} for t in turns], user_id=conversation.sample_id, infer=False
                )
            ids = {t.text: t.dia_id for t in conversation.turns}

            async def search(
                question: str, user_id: str = conversation.sample_id, ids: dict[str, str] = ids
            ) -> list[str]:
                found = await memory.search(question, top_k=50, filters={"user_id": user_id})
                return [ids[hit["memory"]] for hit in found["results"]]

            await _each(result, conversation, search)
    finally:
        await memory.close()
    return result


async def autogen_face(url: str, settings: Settings, embedder: SharedEmbedder, data: list[Conversation]) -> Result:
    """PostgresMemory.add per turn, query(k=50)."""
    from memora_pg.autogen import MemoryContent, MemoryMimeType

    result = Result("AutoGen `PostgresMemory.query(k=50)`")
    for conversation in data:
        store = PostgresMemory(conversation.sample_id, database_url=url, embedder=embedder, k=50)
        try:
            await store.setup()
            for turn in conversation.turns:
                await store.add(MemoryContent(content=turn.text, mime_type=MemoryMimeType.TEXT))
            ids = {t.text: t.dia_id for t in conversation.turns}

            async def search(question: str, store: PostgresMemory = store, ids: dict[str, str] = ids) -> list[str]:
                found = await store.query(question)
                return [ids[str(hit.content)] for hit in found.results]

            await _each(result, conversation, search)
        finally:
            await store.close()
    return result


async def langgraph_face(url: str, settings: Settings, embedder: SharedEmbedder, data: list[Conversation]) -> Result:
    """MemoraStore.put per turn (one namespace per conversation, batched by session), search(limit=50)."""
    from langgraph.store.base import PutOp

    from memora_pg.langgraph import AsyncMemoraStore

    result = Result("LangGraph `MemoraStore.search(limit=50)`")
    async with AsyncMemoraStore(settings=settings, embedder=embedder, index={"fields": ["text"]}) as store:
        for conversation in data:
            namespace = ("locomo", conversation.sample_id)
            for session in sorted({t.session for t in conversation.turns}):
                turns = [t for t in conversation.turns if t.session == session]
                await store.abatch([PutOp(namespace, t.dia_id, {"text": t.text}) for t in turns])

            async def search(question: str, namespace: tuple[str, ...] = namespace) -> list[str]:
                return [item.key for item in await store.asearch(namespace, query=question, limit=50)]

            await _each(result, conversation, search)
    return result


# -- the floors --------------------------------------------------------------------------------

FLOOR_TABLE = """
CREATE TABLE IF NOT EXISTS floor_turns (
    user_id text, dia_id text, memory text, embedding vector({dimensions}),
    search_text tsvector GENERATED ALWAYS AS (to_tsvector('english', memory)) STORED
)"""
COSINE = """
SELECT dia_id FROM floor_turns WHERE user_id = $1 ORDER BY embedding <=> $2 LIMIT 50
"""
FULL_TEXT = """
SELECT dia_id FROM floor_turns,
     CAST(replace(CAST(plainto_tsquery('english', $2) AS text), ' & ', ' | ') AS tsquery) AS query
WHERE user_id = $1 AND search_text @@ query
ORDER BY ts_rank(search_text, query) DESC
LIMIT 50
"""


async def floors(url: str, embedder: SharedEmbedder, data: list[Conversation]) -> list[Result]:
    from bench.lib.server import connect

    conn = await connect(url)
    cosine, lexical = (
        Result("plain cosine over the user's rows (floor)"),
        Result("full-text alone, `english`, `ts_rank` (floor)"),
    )
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.execute(FLOOR_TABLE.format(dimensions=embedder.dimensions))
        from memora_pg import vector_params

        for conversation in data:
            vectors = await embedder.embed_documents([t.text for t in conversation.turns])
            await conn.executemany(
                "INSERT INTO floor_turns (user_id, dia_id, memory, embedding) VALUES ($1, $2, $3, $4)",
                [
                    (conversation.sample_id, t.dia_id, t.text, vector_params.encode(v))
                    for t, v in zip(conversation.turns, vectors, strict=True)
                ],
            )
            for question in conversation.questions:
                (query,) = await embedder.embed_queries([question.text])
                start = time.perf_counter()
                ranked = [
                    r["dia_id"] for r in await conn.fetch(COSINE, conversation.sample_id, vector_params.encode(query))
                ]
                cosine.add(question, ranked, time.perf_counter() - start)
                ranked = [r["dia_id"] for r in await conn.fetch(FULL_TEXT, conversation.sample_id, question.text)]
                lexical.add(question, ranked)
    finally:
        await conn.close()
    return [cosine, lexical]


# -- update detection ------------------------------------------------------------------------------


FORMS = {
    "placeholder": "the agent's form: facts and updates name the user by placeholder",
    "name": "the agent's facts, the update names the user",
    "none": 'the agent\'s facts, the update says "the user"',
    "names throughout": "facts and updates name the user (a person's own notes)",
}


async def update_detection(url: str, settings: Settings, embedder: SharedEmbedder, path: Path) -> dict[str, float]:
    """For each form of asking (FORMS), the share of updates whose old version the Memora vector DB's
    search (top 10) returns; and the same share for plain cosine top 10 of the names-throughout form.

    The agent's form stores each fact as memora-core writes it, ``user_<id> lives in Leeds`` (the
    set's ``{user}``); its search is the agent's before its comparison call, with the update's text."""
    users = json.loads(await asyncio.to_thread(path.read_text))["users"]
    found = dict.fromkeys(FORMS, 0)
    cosine_found = total = 0
    async with PostgresGraphDB(url, settings=settings, embedder=embedder) as graph:
        vector = graph.get_associated_vector_db()
        assert isinstance(vector, PgVectorDB)
        org = await graph.create_organization("updates")
        agent = await graph.create_agent(org.org_id, "assistant")

        async def user_with(name: str, facts: list[str]) -> str:
            user = await graph.create_user(org.org_id, name)
            placed = [fact.replace("{user}", f"user_{user.user_id}") for fact in facts]
            await save_facts(graph, org.org_id, agent.agent_id, user.user_id, placed)
            return user.user_id

        async def finds(user_id: str, query: str, old: str) -> bool:
            hits = await vector.search_memory(query, MemorySearchScope.USER, org.org_id, user_id)
            return old in {memory.memory for memory, _ in hits}

        for person in users:
            facts: list[str] = person["facts"]
            agent_facts: list[str] = person["agent_form"]["facts"]
            named_user = await user_with(person["name"], facts)
            agent_user = await user_with(person["name"], agent_facts)
            agent_placed = [fact.replace("{user}", f"user_{agent_user}") for fact in agent_facts]
            fact_vectors = await embedder.embed_documents(facts)
            asked = zip(
                person["updates"], person["agent_form"]["updates"], person["unnamed_form"]["updates"], strict=True
            )
            for update, agent_update, unnamed_update in asked:
                total += 1
                old = update["old"]
                placeholder = agent_update.replace("{user}", f"user_{agent_user}")
                found["placeholder"] += await finds(agent_user, placeholder, agent_placed[old])
                found["name"] += await finds(agent_user, update["new"], agent_placed[old])
                found["none"] += await finds(agent_user, unnamed_update, agent_placed[old])
                found["names throughout"] += await finds(named_user, update["new"], facts[old])
                (query,) = await embedder.embed_queries([update["new"]])
                similarities = [sum(a * b for a, b in zip(query, v, strict=True)) for v in fact_vectors]
                top = sorted(range(len(facts)), key=lambda i: -similarities[i])[:10]
                cosine_found += old in top
    return {"updates": total, **{form: n / total for form, n in found.items()}, "cosine": cosine_found / total}


def speaker_observations(conversation: dict[str, Any], speaker: str) -> list[str]:
    """A speaker's observations in session order, then in the order the file lists them."""
    sessions = sorted(conversation["observation"], key=lambda key: int(key.split("_")[1]))
    return [text for key in sessions for text, _ in conversation["observation"][key].get(speaker, [])]


async def locomo_update_detection(
    url: str, settings: Settings, embedder: SharedEmbedder, locomo: Path, path: Path
) -> dict[str, float]:
    """Update detection among LoCoMo's own observations (``bench/data/locomo_updates.json``): each
    speaker is a user whose observations are stored as the Memora agent writes them (the speaker's
    name as the user's placeholder), and each update is asked with the placeholder, the name and
    "the user"; the share whose old observation the Memora vector DB's search returns, per form."""
    conversations = {c["sample_id"]: c for c in json.loads(await asyncio.to_thread(locomo.read_text))}
    updates = json.loads(await asyncio.to_thread(path.read_text))["updates"]
    found = dict.fromkeys(("placeholder", "name", "none"), 0)
    async with PostgresGraphDB(url, settings=settings, embedder=embedder) as graph:
        vector = graph.get_associated_vector_db()
        assert isinstance(vector, PgVectorDB)
        org = await graph.create_organization("locomo-updates")
        agent = await graph.create_agent(org.org_id, "assistant")
        stored: dict[tuple[str, str], tuple[str, list[str]]] = {}
        for sample_id, speaker in dict.fromkeys((u["sample_id"], u["speaker"]) for u in updates):
            user = await graph.create_user(org.org_id, speaker)
            named = re.compile(rf"\b{re.escape(speaker)}\b")
            texts = [
                named.sub(f"user_{user.user_id}", text)
                for text in speaker_observations(conversations[sample_id], speaker)
            ]
            await save_facts(graph, org.org_id, agent.agent_id, user.user_id, texts)
            stored[(sample_id, speaker)] = (user.user_id, texts)
        for update in updates:
            user_id, texts = stored[(update["sample_id"], update["speaker"])]
            speaker = update["speaker"]
            original = speaker_observations(conversations[update["sample_id"]], speaker)[update["old"]]
            if not original.startswith(update["starts"]):
                raise SystemExit(f"{path}: observation {update['old']} of {speaker} is not {update['starts']!r}")
            named = re.compile(rf"\b{re.escape(speaker)}\b")
            asked = {
                "placeholder": named.sub(f"user_{user_id}", update["new"]),
                "name": update["new"],
                "none": named.sub("the user", re.sub(rf"^{re.escape(speaker)}\b", "The user", update["new"])),
            }
            for form, query in asked.items():
                hits = await vector.search_memory(query, MemorySearchScope.USER, org.org_id, user_id)
                found[form] += texts[update["old"]] in {memory.memory for memory, _ in hits}
    return {"updates": len(updates), **{form: n / len(updates) for form, n in found.items()}}


# -- the run -----------------------------------------------------------------------------------


def table(results: Sequence[Result], key: str = "all") -> list[str]:
    lines = [
        "| search | R@1 | R@5 | R@10 | R@20 | R@50 | hits returned | p50 ms | p95 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        timing = [f"{_p(r.seconds, 0.5) * 1000:.2f}", f"{_p(r.seconds, 0.95) * 1000:.2f}"] if r.seconds else ["—", "—"]
        lines.append(
            f"| {r.name} | "
            + " | ".join(r.cells(key))
            + f" | {statistics.fmean(r.returned):.1f} | "
            + " | ".join(timing)
            + " |"
        )
    return lines


def report(
    results: Sequence[Result],
    updates: dict[str, float] | None,
    path: Path,
    command: str,
    locomo_updates: dict[str, float] | None = None,
) -> str:
    questions = len(results[0].returned) if results else 0
    lines = [f"Retrieval on `{path.name}`: {questions} questions. Command: `{command}`.", "", *table(results), ""]
    for category in CATEGORIES.values():
        lines += [f"**{category}**", "", "| search | R@1 | R@5 | R@10 | R@20 | R@50 |"]
        lines.append("| --- | --- | --- | --- | --- | --- |")
        lines += [f"| {r.name} | " + " | ".join(r.cells(category)) + " |" for r in results]
        lines.append("")
    if updates:
        lines += [
            f"Update detection ({int(updates['updates'])} reworded updates among each user's other facts): the share "
            "whose old version the Memora vector DB's search returns, by how the update names the user.",
            "",
            "| how the update is asked | found |",
            "| --- | --- |",
            *(f"| {form}: {meaning} | {updates[form]:.1%} |" for form, meaning in FORMS.items()),
            f"| plain cosine top 10, names throughout | {updates['cosine']:.1%} |",
        ]
    if locomo_updates:
        lines += [
            "",
            f"Update detection among LoCoMo's observations ({int(locomo_updates['updates'])} updates, "
            "`bench/data/locomo_updates.json`, each speaker's observations stored with the placeholder):",
            "",
            "| how the update is asked | found |",
            "| --- | --- |",
            *(f"| {form} | {locomo_updates[form]:.1%} |" for form in ("placeholder", "name", "none")),
        ]
    return "\n".join(lines)


FACES = (memora_face, mem0_face, autogen_face, langgraph_face)


async def run(args: argparse.Namespace) -> str:
    data = await asyncio.to_thread(load, args.path)
    embedder = SharedEmbedder(LocalEmbedder())
    # Every text embedded up front, in batches: the timings are the searches', not the model's.
    await embedder.embed_documents([t.text for c in data for t in c.turns])
    await embedder.embed_queries([q.text for c in data for q in c.questions])
    with Server(args.server_url) as server:
        results: list[Result] = []
        url = await server.create_database("memora_retrieval")
        try:
            settings = Settings(database_url=url)
            faces = [face for face in FACES if args.faces is None or face.__name__.removesuffix("_face") in args.faces]
            for face in faces:
                print(f"... {face.__name__}", file=sys.stderr, flush=True)
                results.append(await face(url, settings, embedder, data))
            if args.faces is None:
                results += await floors(url, embedder, data)
            updates = None
            if args.updates:
                print("... update detection", file=sys.stderr, flush=True)
                updates = await update_detection(url, settings, embedder, args.updates)
            locomo_updates = None
            if args.locomo_updates:
                print("... update detection among LoCoMo's observations", file=sys.stderr, flush=True)
                locomo_updates = await locomo_update_detection(url, settings, embedder, args.path, args.locomo_updates)
        finally:
            await server.drop_database("memora_retrieval")
    command = "python -m bench.retrieval " + " ".join(sys.argv[1:])
    return report(results, updates, args.path, command, locomo_updates)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="a LoCoMo-format JSON file")
    parser.add_argument(
        "--updates", type=Path, default=None, help="the update-detection set (bench/data/update_detection.json)"
    )
    parser.add_argument(
        "--locomo-updates",
        type=Path,
        default=None,
        help="updates to PATH's observations (bench/data/locomo_updates.json)",
    )
    parser.add_argument(
        "--server-url", default=None, help="another PostgreSQL server (default: a temporary embedded one)"
    )
    parser.add_argument(
        "--faces",
        type=lambda value: value.split(","),
        default=None,
        help="only these faces, without the floors: memora,mem0,autogen,langgraph (default: every face and floor)",
    )
    parser.add_argument("--out", type=Path, default=None, help="replace the retrieval section of this Markdown file")
    args = parser.parse_args(argv)
    text = asyncio.run(run(args))
    print(text)
    if args.out:
        page = args.out.read_text() if args.out.exists() else ""
        block = f"{SECTION_START}\n{text}\n{SECTION_END}"
        if SECTION_START in page:
            before, rest = page.split(SECTION_START, 1)
            page = before + block + rest.split(SECTION_END, 1)[1]
        else:
            page += "\n\n## Retrieval\n\n" + block + "\n"
        args.out.write_text(page)


if __name__ == "__main__":
    main()
