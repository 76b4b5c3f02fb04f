"""The bulk-import figure: memora_pg's own export/import against raw COPY + CREATE INDEX of the same data.

The package's path is ``memora_pg.ops.transfer``: the bulk organization is exported to a JSON
Lines file (not timed), then imported into a freshly migrated database of its own (timed: the
import sets the HNSW index aside and rebuilds it once, in its one transaction). The raw floor
is the setup's own binary COPY of every table plus one CREATE INDEX of the HNSW index.
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
from pathlib import Path

from bench.lib import data, load
from bench.lib.context import Context
from bench.lib.report import Figure
from bench.lib.server import Server, sqlalchemy_url
from memora_pg.db import Database


async def bulk_figure(ctx: Context, server: Server, times: load.LoadTimes, build_s: float) -> None:
    raw_s = times.copy_memories_s + times.other_s + build_s
    floor = times.memories / raw_s
    notes = [
        f"raw: binary COPY of {times.memories:,} memories ({times.memories / times.copy_memories_s:,.0f} rows/s) "
        f"and {times.other_rows:,} other rows in {times.copy_memories_s + times.other_s:.1f} s, "
        f"CREATE INDEX hnsw {build_s:.1f} s: {floor:,.0f} memories/s",
    ]
    rate: float | None = None
    ratio: float | None = None
    if importlib.util.find_spec("memora_pg.ops.transfer") is None:
        notes.append("memora_pg.ops.transfer is not in this checkout: the package's import is not measured")
    else:
        from memora_pg.ops import transfer

        name = f"bench_import_{ctx.scale.lower()}"
        target_url = await server.create_database(name)
        try:
            await load.migrate(target_url)
            with tempfile.TemporaryDirectory(prefix="memora-bench-export-") as scratch:
                dump = Path(scratch) / "export.jsonl"
                source = Database(sqlalchemy_url(ctx.url), settings=ctx.settings())
                # The same build memory as the raw floor's CREATE INDEX (load.BUILD_MEMORY).
                target = Database(
                    sqlalchemy_url(target_url), settings=ctx.settings(index_build_memory=load.BUILD_MEMORY)
                )
                try:
                    started = time.perf_counter()
                    await transfer.export(source, dump, org_id=data.org_id(0))
                    exported_s = time.perf_counter() - started
                    started = time.perf_counter()
                    counts = await transfer.import_(target, dump)
                    imported_s = time.perf_counter() - started
                finally:
                    await source.close()
                    await target.close()
            rate = counts.get("memories", 0) / imported_s
            ratio = raw_s / imported_s
            notes.append(
                f"memora_pg.ops.transfer.import_: {sum(counts.values()):,} rows in {imported_s:.1f} s "
                f"(export, untimed in the ratio: {exported_s:.1f} s)"
            )
        finally:
            await server.drop_database(name)
    ctx.add(
        Figure(
            "Bulk",
            f"bulk import of {data.scale_label(times.memories)} memories (memora_pg.ops.transfer.import_)",
            ctx.scale,
            "hnsw",
            rate=rate,
            ratio=ratio,
            notes=notes,
            target="≥ 80% of the rate of raw COPY + CREATE INDEX (ratio = raw time / import time)",
            met=None if ratio is None else ratio >= 0.8,
        )
    )
