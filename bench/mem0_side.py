"""mem0's open-source ``Memory`` on the same server, driven in its own virtual environment.

Run by ``bench.run`` as ``<venv>/bin/python bench/mem0_side.py COMMAND ARGS.json`` with the
environment of the benchmark venv (``pip install mem0ai 'psycopg[binary,pool]' numpy``), so
mem0's dependencies never meet memora_pg's. Only the standard library, numpy and mem0 are
imported here. Prints one JSON object on its last line.

Setup: telemetry off (``MEM0_TELEMETRY=False``), the pgvector store with its HNSW index
(mem0's default) in a database of its own, and mem0's own OpenAI embedder whose ``embed``
is replaced by a lookup of the precomputed vectors (mem0 has no embedder that takes given
vectors), so no model and no network call runs. The LLM is never called: ``infer=False``.

Commands:

* ``init``: create mem0's collection table and indexes through mem0's own code.
* ``measure``: time ``add`` (10 messages per call, one memory each), user-scoped ``search`` and
  metadata-filtered ``search``; return the timings and the ids each search returned.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

os.environ["MEM0_TELEMETRY"] = "False"
os.environ.setdefault("OPENAI_API_KEY", "unused-no-network-call-is-made")

import numpy as np


def _memory(args: dict[str, Any]) -> Any:
    from mem0 import Memory  # type: ignore[import-not-found]

    config = {
        "vector_store": {
            "provider": "pgvector",
            "config": {
                "connection_string": args["url"],
                "collection_name": args["collection"],
                "embedding_model_dims": args["dimensions"],
                "hnsw": True,
            },
        },
        "embedder": {"provider": "openai", "config": {"api_key": "unused", "embedding_dims": args["dimensions"]}},
        "llm": {"provider": "openai", "config": {"api_key": "unused"}},
        "history_db_path": args["history_path"],
    }
    return Memory.from_config(config)


def init(args: dict[str, Any]) -> dict[str, Any]:
    memory = _memory(args)
    memory.vector_store._ensure_collection()
    return {"collection": args["collection"]}


def measure(args: dict[str, Any]) -> dict[str, Any]:
    import mem0

    memory = _memory(args)
    vectors = np.load(args["vectors_file"])
    book: dict[str, list[float]] = {}
    for text, row in zip(args["add_texts"], vectors["add"], strict=True):
        book[text] = row.tolist()
    for text, row in zip(args["query_texts"], vectors["queries"], strict=True):
        book[text] = row.tolist()

    def embed(text: Any, memory_action: Any = None) -> list[float]:
        return book[text]

    memory.embedding_model.embed = embed
    memory.embedding_model.embed_batch = lambda texts, memory_action=None: [book[t] for t in texts]

    batch = args["add_batch"]
    add_texts = args["add_texts"]
    add_seconds = []
    for call in range(len(add_texts) // batch):
        messages = [{"role": "user", "content": t} for t in add_texts[call * batch : (call + 1) * batch]]
        started = time.perf_counter()
        memory.add(messages, user_id=args["add_user"], infer=False)
        add_seconds.append(time.perf_counter() - started)

    def searches(kind: str) -> dict[str, Any]:
        seconds, ids = [], []
        for query in args[kind]:
            filters = {"user_id": query["user_id"], **query.get("metadata", {})}
            started = time.perf_counter()
            found = memory.search(query["text"], filters=filters, top_k=query["k"], threshold=0.0)
            seconds.append(time.perf_counter() - started)
            ids.append([item["id"] for item in found["results"]])
        return {"seconds": seconds, "ids": ids}

    return {
        "mem0": getattr(mem0, "__version__", "unknown"),
        "add_seconds": add_seconds,
        "search": searches("user_queries"),
        "filtered": searches("filtered_queries"),
    }


def main() -> None:
    command, path = sys.argv[1], sys.argv[2]
    with open(path) as given:
        args = json.load(given)
    result = {"init": init, "measure": measure}[command](args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
