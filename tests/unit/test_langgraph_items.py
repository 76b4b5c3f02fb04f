"""Which fields an imported LangGraph item is embedded by: those its store_vectors rows name."""

from __future__ import annotations

from memora_pg.ops.importers.langgraph_items import fields_of


def test_the_fields_langgraph_embedded_are_the_items_fields() -> None:
    # a field whose value held several texts is stored as path.0, path.1, ...: one field here
    assert fields_of(["tags[*].0", "tags[*].1", "text"]) == ("tags[*]", "text")
    assert fields_of(["metadata.note"]) == ("metadata.note",)
    assert fields_of([]) == ()  # put(..., index=False): not embedded
    assert fields_of(None) == ("$",)  # a store without an index: the whole value
