"""Bringing another memory store's data into memora_pg: mem0 2.x (``mem0``) and LangGraph's ``PostgresStore``."""
