"""The texts of the write statements: the contrary links, in a CTE arm and as a statement of their own."""

from __future__ import annotations

from memora_pg.graph import saves, versions
from memora_pg.sql_text import render


def test_a_link_written_alone_leaves_out_the_calls_own_memories() -> None:
    """On Citus the contrary links are a statement of their own, after the call's memories are in: it must not
    link a contrary memory to a memory of the same call, which the one-statement form's snapshot rules out."""
    assert versions.OWN_MEMORIES_LEFT_OUT in saves.LINKS_ALONE
    assert versions.OWN_MEMORIES_LEFT_OUT not in versions.LINKS
    # The rest is the same insert as the one-statement form's arm.
    assert render(versions.LINK, own="") in versions.LINKS
    assert render(versions.LINK, own=versions.OWN_MEMORIES_LEFT_OUT) in saves.LINKS_ALONE
