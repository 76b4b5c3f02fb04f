"""Run one Python snippet of the docs as its reader would: ``python -m tests.snippets.run FILE``.

A whole program runs as ``__main__``. A fragment, with ``await`` at its top level, runs inside an event
loop with the names the examples before it made: ``graph`` (a PostgresGraphDB, with its vector store
``vector_db``), one organization, user and agent with a saved memory (``org_id``, ``user_id``,
``agent_id``, ``memory_id``, and ``ids`` for a resolved fetch), ``memory`` (the mem0-style AsyncMemory),
``notes`` (an AutoGen PostgresMemory) and ``chat_client`` (an Agent Framework chat client that answers
"ok"). Everything is on the server the environment names (MEMORA_PG_DATABASE_URL), as for the reader.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import sys
from pathlib import Path
from typing import Any

from memora_pg import PostgresGraphDB
from memora_pg.autogen import PostgresMemory
from memora_pg.mem0 import AsyncMemory
from tests.integration.helpers import chat, payload, world


async def _names() -> dict[str, Any]:
    graph = PostgresGraphDB()
    w = await world(graph)
    lisbon = payload(chat("I live in Lisbon"), [(f"user_{w.user_id} lives in Lisbon", [0])])
    await graph.save_interaction_with_memories(w.org_id, w.agent_id, w.user_id, lisbon)
    (stored,) = await graph.get_all_user_memories(w.org_id, w.user_id)
    names: dict[str, Any] = {
        "graph": graph,
        "vector_db": graph.get_associated_vector_db(),
        "org_id": w.org_id,
        "user_id": w.user_id,
        "agent_id": w.agent_id,
        "memory_id": stored.memory_id,
        "ids": [{"memory_id": stored.memory_id, "user_id": w.user_id, "org_id": w.org_id}],
        "memory": AsyncMemory(),
        "notes": PostgresMemory("notes"),
    }
    try:
        from tests.scripted_chat import ScriptedChat

        names["chat_client"] = ScriptedChat()
    except ImportError:  # Agent Framework is not installed here
        pass
    return names


async def _fragment(code: Any) -> None:
    names = await _names()
    namespace = {"__name__": "__main__", **names}
    try:
        result = eval(code, namespace)  # noqa: S307 (the docs' own snippet, compiled above)
        if inspect.iscoroutine(result):
            await result
    finally:
        await names["memory"].close()
        await names["notes"].close()
        await names["graph"].close()


# The names a fragment may take from the examples before it (see _names).
GIVEN = ("graph", "vector_db", "org_id", "user_id", "agent_id", "memory_id", "ids", "memory", "notes", "chat_client")


def _borrowed(tree: ast.AST) -> set[str]:
    """The names of GIVEN the snippet reads without making them itself."""
    read: set[str] = set()
    made: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else made).add(node.id)
        elif isinstance(node, ast.alias):
            made.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            made.add(node.name)
        elif isinstance(node, ast.arg):
            made.add(node.arg)
    return (read - made) & set(GIVEN)


def main(path: str) -> None:
    source = Path(path).read_text(encoding="utf-8")
    code = compile(source, path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if code.co_flags & inspect.CO_COROUTINE or _borrowed(ast.parse(source)):
        asyncio.run(_fragment(code))
    else:
        exec(code, {"__name__": "__main__"})  # noqa: S102 (the docs' own snippet)


if __name__ == "__main__":
    main(sys.argv[1])
