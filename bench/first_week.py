"""A new user's first week: are a handful of facts found by the questions a person asks about them?

    python -m bench.first_week [--data bench/data/first_week.json] [--server-url URL]

Each user's facts are stored the way a new user stores them: the mem0-style ``AsyncMemory.add``
with ``infer=False`` (the text as given), and, for the Memora face, one saved interaction per fact
with the user named. Each paraphrased question is searched in the user's scope with the face's
default settings and the offline default embedder. Reported per face:

* the question's fact among the default hits; the fact first, and in the first three;
* questions that got nothing although the user has the fact;
* unrelated questions (no fact answers them) that got any hit;
* and, for the mem0-style face, the same with ``threshold=0`` (the ranking alone).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.lib.embedding import SharedEmbedder
from bench.lib.facts import save_facts
from bench.lib.server import Server
from memora_pg import (
    AsyncMemory,
    MemorySearchScope,
    PgVectorDB,
    PostgresGraphDB,
    PostgresMemory,
    Settings,
)
from memora_pg.autogen import MemoryContent, MemoryMimeType
from memora_pg.embeddings import LocalEmbedder
from memora_pg.mem0 import MemoryConfig

DEFAULT_DATA = Path(__file__).parent / "data" / "first_week.json"
Search = Callable[[str], Awaitable[list[str]]]


@dataclass
class Tally:
    name: str
    questions: int = 0
    found: int = 0
    first: int = 0
    first_three: int = 0
    empty: int = 0
    unrelated: int = 0
    unrelated_with_hits: int = 0

    def count(self, hits: list[str], answer: str) -> None:
        self.questions += 1
        self.found += answer in hits
        self.first += hits[:1] == [answer]
        self.first_three += answer in hits[:3]
        self.empty += not hits

    def count_unrelated(self, hits: list[str]) -> None:
        self.unrelated += 1
        self.unrelated_with_hits += bool(hits)

    def row(self) -> str:
        n = self.questions
        return (
            f"| {self.name} | {self.found} of {n} | {self.first} / {self.first_three} | {self.empty} of {n} "
            f"| {self.unrelated_with_hits} of {self.unrelated} |"
        )


async def ask(tally: Tally, person: dict[str, Any], search: Search) -> None:
    facts: list[str] = person["facts"]
    for question, answer in person["questions"]:
        tally.count(await search(question), facts[answer])
    for question in person["unrelated"]:
        tally.count_unrelated(await search(question))


async def mem0_face(url: str, embedder: SharedEmbedder, users: list[dict[str, Any]]) -> list[Tally]:
    config = MemoryConfig.model_validate(
        {"vector_store": {"provider": "pgvector", "config": {"connection_string": url, "collection_name": "week"}}}
    )
    default, ranking = Tally("mem0-style `search` (default threshold)"), Tally("mem0-style `search`, threshold 0")
    memory = AsyncMemory(config, embedder=embedder)
    try:
        for person in users:
            user_id = person["name"].lower()
            for fact in person["facts"]:
                await memory.add([{"role": "user", "content": fact}], user_id=user_id, infer=False)

            def searcher(threshold: float | None, user_id: str = user_id) -> Search:
                async def search(question: str) -> list[str]:
                    found = await memory.search(question, filters={"user_id": user_id}, threshold=threshold)
                    return [hit["memory"] for hit in found["results"]]

                return search

            await ask(default, person, searcher(None))
            await ask(ranking, person, searcher(0))
    finally:
        await memory.close()
    return [default, ranking]


async def autogen_face(url: str, embedder: SharedEmbedder, users: list[dict[str, Any]]) -> list[Tally]:
    tally = Tally("AutoGen `PostgresMemory.query` (default)")
    for person in users:
        store = PostgresMemory(f"week-{person['name'].lower()}", database_url=url, embedder=embedder)
        try:
            await store.setup()
            for fact in person["facts"]:
                await store.add(MemoryContent(content=fact, mime_type=MemoryMimeType.TEXT))

            async def search(question: str, store: PostgresMemory = store) -> list[str]:
                return [str(hit.content) for hit in (await store.query(question)).results]

            await ask(tally, person, search)
        finally:
            await store.close()
    return [tally]


async def memora_face(url: str, embedder: SharedEmbedder, users: list[dict[str, Any]]) -> list[Tally]:
    tally = Tally("Memora `PgVectorDB.search_memory` (default)")
    async with PostgresGraphDB(url, settings=Settings(database_url=url), embedder=embedder) as graph:
        vector = graph.get_associated_vector_db()
        assert isinstance(vector, PgVectorDB)
        org = await graph.create_organization("first-week")
        agent = await graph.create_agent(org.org_id, "assistant")
        for person in users:
            user = await graph.create_user(org.org_id, person["name"])
            await save_facts(graph, org.org_id, agent.agent_id, user.user_id, person["facts"])

            async def search(question: str, user_id: str = user.user_id) -> list[str]:
                hits = await vector.search_memory(question, MemorySearchScope.USER, org.org_id, user_id)
                return [memory.memory for memory, _ in hits]

            await ask(tally, person, search)
    return [tally]


async def run(args: argparse.Namespace) -> str:
    users = json.loads(await asyncio.to_thread(args.data.read_text))["users"]
    embedder = SharedEmbedder(LocalEmbedder())
    with Server(args.server_url) as server:
        url = await server.create_database("memora_first_week")
        tallies: list[Tally] = []
        try:
            for face in (mem0_face, autogen_face, memora_face):
                print(f"... {face.__name__}", file=sys.stderr, flush=True)
                tallies += await face(url, embedder, users)
        finally:
            await server.drop_database("memora_first_week")
    questions = tallies[0].questions
    lines = [
        f"First week (`{args.data.name}`): {len(users)} users, {questions} paraphrased questions, "
        f"{tallies[0].unrelated} unrelated ones. Command: `python -m bench.first_week`.",
        "",
        "| search | the fact among the hits | first / in the first three | nothing returned | unrelated with hits |",
        "| --- | --- | --- | --- | --- |",
        *(t.row() for t in tallies),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.first_week", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the first-week set")
    parser.add_argument(
        "--server-url", default=None, help="another PostgreSQL server (default: a temporary embedded one)"
    )
    print(asyncio.run(run(parser.parse_args(argv))))


if __name__ == "__main__":
    main()
