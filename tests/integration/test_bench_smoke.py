"""The benchmark suite at a toy scale: it completes on the test server and reports every figure.

Speeds are never asserted here (they belong in BENCHMARKS.md); what is checked is that each
figure is measured, printed and written, and that the correctness columns the targets rely on
(recall, result counts, round trips) are computed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import run
from bench.lib import data

pytestmark = pytest.mark.slow

FIGURES = (
    ("exact", "save_interaction_with_memories (10 messages + 5 memories), one connection"),
    ("hnsw", "save_interaction_with_memories (10 messages + 5 memories), one connection"),
    ("exact", "save_interaction_with_memories, 8 concurrent writers on different users"),
    ("hnsw", "save_interaction_with_memories, 8 concurrent writers on different users"),
    ("exact", "mem0-style add(infer=False), 10 messages per call: time per memory"),
    ("hnsw", "mem0-style add(infer=False), 10 messages per call: time per memory"),
    ("both", "add rate, exact mode vs hnsw mode"),
    ("hnsw", "bulk import of 500 memories (memora_pg.ops.transfer.import_)"),
    ("", "fetch_user_memories_resolved_batch, 25 ids, chains of depth 10"),
    ("", "get_all_user_interactions, page of 50 with messages and memories"),
    ("exact", "user-scoped search, PgVectorDB.search_memory, USER scope, default (hybrid)"),
    ("exact", "user-scoped search, PgVectorDB.search_memory, USER scope, dense mode"),
    ("hnsw", "user-scoped search, PgVectorDB.search_memory, USER scope, dense mode"),
    ("hnsw", "user-scoped search, AsyncMemory.search (mem0-style), user filter, default (hybrid)"),
    ("hnsw", "user-scoped search, PgVectorDB.search_memory, USER scope, default (hybrid)"),
    ("hnsw", "user-scoped search, raw post-filtered HNSW (WHERE user … ORDER BY embedding <=> q LIMIT 10)"),
    ("exact", "organization-scoped search, PgVectorDB.search_memory, ORGANIZATION scope, dense (ef_search 100)"),
    ("hnsw", "organization-scoped search, PgVectorDB.search_memory, ORGANIZATION scope, dense (ef_search 100)"),
    ("hnsw", "organization-scoped search, PgVectorDB.search_memory, ORGANIZATION scope, default (hybrid)"),
    ("exact", "metadata-filtered search (filter keeps 1% of a user's rows), AsyncMemory.search, default (hybrid)"),
    ("hnsw", "metadata-filtered search (filter keeps 1% of a user's rows), AsyncMemory.search, default (hybrid)"),
)


def test_layout_of_a_toy_scale_keeps_whole_chains_and_interactions() -> None:
    """500 memories are 2 users of 250, in whole interactions of 5 memories and chains of 10."""
    layout = data.Layout(500)
    assert (layout.users, layout.per_user, layout.orgs) == (2, 250, 1)
    assert len(list(data.update_rows(layout, 0))) == 225
    assert data.tsvector_of("remembers amber note amber") == [("amber", [2, 4]), ("note", [3]), ("remembers", [1])]


async def test_suite_at_500_memories_prints_every_figure(
    server_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run at 500 memories measures and writes every figure, with recall and round trips filled in."""
    out = tmp_path / "BENCHMARKS.md"
    figures = await run.main(
        [
            "--scale",
            "500",
            "--iterations",
            "3",
            "--warmup",
            "1",
            "--server-url",
            server_url,
            "--mem0-python",
            "",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    measured = {(f.mode, f.name) for f in figures}
    for mode, name in FIGURES:
        assert (mode, name) in measured, name
        assert name in printed
    report = out.read_text()
    for _, name in FIGURES:
        assert name in report
    by_name = {(f.mode, f.name): f for f in figures}
    resolved = by_name[("", "fetch_user_memories_resolved_batch, 25 ids, chains of depth 10")]
    assert "1 statement(s) per call" in resolved.notes
    assert "25 current versions returned" in resolved.notes
    floor = by_name[("hnsw", "user-scoped search, PgVectorDB.search_memory, USER scope, dense mode")].notes[1]
    assert floor.startswith("raw floor: recall@10 1.000, 10.0 of 10 results")
    assert "Beside mem0" in printed
