"""The LangGraph suite's runner accounts for a failure only by a listed difference of that test and message."""

from __future__ import annotations

from tests.differential.langgraph_suite import Outcome, summary


def test_a_failure_is_explained_only_by_its_own_difference() -> None:
    found = [
        Outcome("test_store::test_basic_store_ops[memora]", "passed", ""),
        Outcome("test_store::test_scores[aaa-vector-cosine]", "failed", "assert 0.76 == 1.0 ± 0.001"),
        Outcome("test_async_store::test_omit_expired_search_pagination[memora]", "failed", "no attribute '_cursor'"),
        # a listed message on another test, and another message on a listed test, are not explained
        Outcome("test_store::test_search[memora]", "failed", "assert 0.76 == 1.0 ± 0.001"),
        Outcome("test_store::test_scores[bbb-vector-l2]", "error", "ConfigurationError: `distance_type`"),
    ]
    text, unexplained = summary(found)
    assert [outcome.test for outcome in unexplained] == [
        "test_store::test_search[memora]",
        "test_store::test_scores[bbb-vector-l2]",
    ]
    assert text.startswith("LangGraph's store tests on memora_pg: 1 of 5 passed, 4 failed, 0 skipped")
