"""Erasure: a user or an organization, with every trace, counted.

Foreign keys cascade from the organization and the user to everything that names them:
interactions, messages, memories (and so their vectors), sources, contradiction links,
history events, AutoGen entries, user-specific agents and audit rows. The counts are taken
in the same transaction, just before the delete.
"""

from __future__ import annotations

from sqlalchemy import delete

from memora_pg.driver import Connection
from memora_pg.schema import TENANT_TABLES, organizations, users
from memora_pg.sql_text import render

# What erasing one user removes, table by table.
USER_FOOTPRINT = """
SELECT
    (SELECT count(*) FROM {schema}.users WHERE org_id = :org_id AND user_id = :user_id) AS users,
    (SELECT count(*) FROM {schema}.agents WHERE org_id = :org_id AND user_id = :user_id) AS agents,
    (SELECT count(*) FROM {schema}.interactions WHERE org_id = :org_id AND user_id = :user_id) AS interactions,
    (SELECT count(*) FROM {schema}.messages AS g
       JOIN {schema}.interactions AS i ON i.org_id = :org_id AND i.interaction_id = g.interaction_id
      WHERE g.org_id = :org_id AND i.user_id = :user_id) AS messages,
    (SELECT count(*) FROM {schema}.memories WHERE org_id = :org_id AND user_id = :user_id) AS memories,
    (SELECT count(*) FROM {schema}.memories
      WHERE org_id = :org_id AND user_id = :user_id AND embedding IS NOT NULL) AS vectors,
    (SELECT count(*) FROM {schema}.memory_sources AS s
       JOIN {schema}.memories AS m ON m.org_id = :org_id AND m.memory_id = s.memory_id
      WHERE s.org_id = :org_id AND m.user_id = :user_id) AS memory_sources,
    (SELECT count(*) FROM {schema}.memory_updates AS e
       JOIN {schema}.memories AS m ON m.org_id = :org_id AND m.memory_id = e.new_memory_id
      WHERE e.org_id = :org_id AND m.user_id = :user_id) AS memory_updates,
    (SELECT count(*) FROM {schema}.memory_history WHERE org_id = :org_id AND user_id = :user_id) AS memory_history,
    (SELECT count(*) FROM {schema}.autogen_contents WHERE org_id = :org_id AND user_id = :user_id)
        AS autogen_contents,
    (SELECT count(*) FROM {schema}.audit_log WHERE org_id = :org_id AND user_id = :user_id) AS audit_log
"""

# What erasing one organization removes: every row of every table that carries its org_id.
ORG_FOOTPRINT = render(
    """
SELECT {tables},
       (SELECT count(*) FROM {schema}.memories WHERE org_id = :org_id AND embedding IS NOT NULL) AS vectors
""",
    tables=",\n       ".join(
        render("(SELECT count(*) FROM {schema}.{table} WHERE org_id = :org_id) AS {table}", table=table)
        for table in TENANT_TABLES
    ),
)


async def erase_user(conn: Connection, *, org_id: str, user_id: str) -> dict[str, int]:
    """Delete the user and everything that names it; the counts of what went, by table."""
    params = {"org_id": org_id, "user_id": user_id}
    counts = dict((await conn.one(USER_FOOTPRINT, params))._asdict())
    await conn.execute(delete(users).where(users.c.org_id == org_id, users.c.user_id == user_id))
    return {key: int(value) for key, value in counts.items()}


async def erase_organization(conn: Connection, *, org_id: str) -> dict[str, int]:
    """Delete the organization and everything in it; the counts of what went, by table."""
    counts = dict((await conn.one(ORG_FOOTPRINT, {"org_id": org_id}))._asdict())
    await conn.execute(delete(organizations).where(organizations.c.org_id == org_id))
    return {key: int(value) for key, value in counts.items()}
