"""LangGraph's long-term memory on memora_pg: ``MemoraStore`` and ``AsyncMemoraStore``, ``BaseStore``s that
LangGraph graphs (``compile(store=...)``, ``get_store()``) and LangMem's memory tools use unchanged.

Install with ``pip install 'memora-pg[langgraph]'``. docs/langgraph.md says how items are kept.
"""

from __future__ import annotations

from memora_pg.langgraph.store import AsyncMemoraStore
from memora_pg.langgraph.sync import MemoraStore

__all__ = ["AsyncMemoraStore", "MemoraStore"]
