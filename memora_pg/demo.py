"""The README's demo: a short story told through PostgresGraphDB on the embedded server."""

from __future__ import annotations

from collections.abc import Sequence

from memora_pg.config import Settings
from memora_pg.graph.store import PostgresGraphDB


def _table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    out = [title, "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False)), line]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) for row in cells]
    return "\n".join(out) + "\n"


async def run_demo(settings: Settings) -> None:
    where = "the embedded PostgreSQL" if settings.url() is None else "the configured server"
    print(f"memora_pg demo on {where} (schema {settings.db_schema!r})\n")
    async with PostgresGraphDB(settings=settings) as graph:
        org = await graph.create_organization("Acme Health")
        jake = await graph.create_user(org.org_id, "Jake")
        coach = await graph.create_agent(org.org_id, "Nutrition coach", user_id=jake.user_id)
        helper = await graph.create_agent(org.org_id, "Front desk")

        print(_table("Organization", ["org_id", "name", "created"], [[org.org_id, org.org_name, org.created_at]]))
        print(_table("User", ["user_id", "name"], [[jake.user_id, jake.user_name]]))
        agents = await graph.get_all_org_agents(org.org_id)
        print(
            _table(
                "Agents of the organization",
                ["agent_id", "label", "for user"],
                [[a.agent_id, a.agent_label, a.user_id or "(org-wide)"] for a in agents],
            )
        )
        own = await graph.get_all_user_agents(org.org_id, jake.user_id)
        print(f"{jake.user_name}'s own agents: {[a.agent_label for a in own]}")
        assert {coach.agent_id, helper.agent_id} <= {a.agent_id for a in agents}
