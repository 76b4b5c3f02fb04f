"""An MCP client talking to ``memora-pg mcp`` over stdio, as a desktop assistant does.

    python docs/examples/mcp_client.py

It starts the server as a subprocess (the embedded PostgreSQL unless MEMORA_PG_DATABASE_URL says
otherwise), remembers a fact and finds it again through the server's tools. Its user is new on each
run, and only what it wrote is deleted at the end.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

from mcp import Client, StdioServerParameters


async def main() -> None:
    # The server gets this process's environment, so MEMORA_PG_DATABASE_URL (if set) is its database too.
    user_id = f"example-ada-{uuid.uuid4().hex[:8]}"  # this run's own user: calls that name no one are hers
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "memora_pg", "mcp", "--user-id", user_id], env=dict(os.environ)
    )
    async with Client(server) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        print("tools:", ", ".join(tools))
        added = await client.call_tool("add_memory", {"text": "Ada is learning the cello", "infer": False})
        print("added:", added.structured_content)
        found = await client.call_tool("search_memories", {"query": "which instrument does Ada play?", "top_k": 3})
        for hit in (found.structured_content or {})["results"]:
            print(f"found: {hit['memory']!r} (score {hit['score']:.2f})")
        await client.call_tool("delete_all_memories", {"user_id": user_id})


if __name__ == "__main__":
    asyncio.run(main())
