"""The tables, as SQLAlchemy Core sees them. Alembic's migrations create exactly these.

Tenancy is the first key: ``org_id`` leads every primary key, foreign key, unique
constraint and btree index, so that every table can be distributed by ``org_id`` with
co-located joins, and row-level security per organization stays cheap.

The tables are declared without a schema; :mod:`memora_pg.driver` compiles each statement into
the configured schema (default ``memora``) with ``schema_translate_map``. Only Core statements
use them: no ORM object ever exists, so nothing can load lazily behind a caller's back.

The embedding column is declared without a dimension: the dimension is a deployment
setting fixed by the first migration (``vector(N)`` in the database).
"""

from __future__ import annotations

from functools import lru_cache

from pgvector.sqlalchemy import VECTOR
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    Uuid,
    column,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _created_at() -> Column[object]:
    return Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now())


organizations = Table(
    "organizations",
    metadata,
    Column("org_id", Text, primary_key=True),
    Column("org_name", Text, nullable=False),
    _created_at(),
)

users = Table(
    "users",
    metadata,
    Column("org_id", Text, primary_key=True),
    Column("user_id", Text, primary_key=True),
    Column("user_name", Text, nullable=False),
    _created_at(),
    ForeignKeyConstraint(["org_id"], ["organizations.org_id"], ondelete="CASCADE"),
)

agents = Table(
    "agents",
    metadata,
    Column("org_id", Text, primary_key=True),
    Column("agent_id", Text, primary_key=True),
    Column("agent_label", Text, nullable=False),
    # Set for a user-specific agent, which is deleted with its user.
    Column("user_id", Text, nullable=True),
    _created_at(),
    ForeignKeyConstraint(["org_id"], ["organizations.org_id"], ondelete="CASCADE"),
    ForeignKeyConstraint(["org_id", "user_id"], ["users.org_id", "users.user_id"], ondelete="CASCADE"),
    Index(None, "org_id", "user_id"),
)

interactions = Table(
    "interactions",
    metadata,
    Column("org_id", Text, primary_key=True),
    Column("interaction_id", Text, primary_key=True),
    Column("user_id", Text, nullable=False),
    # The agent of the latest save or update: a plain value, kept when the agent is deleted.
    Column("agent_id", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    # Insertion order: breaks ties on updated_at so that pages never repeat or skip a row.
    Column("seq", BigInteger, Identity(always=False), nullable=False),
    ForeignKeyConstraint(["org_id", "user_id"], ["users.org_id", "users.user_id"], ondelete="CASCADE"),
    Index("ix_interactions_user_recent", "org_id", "user_id", text("updated_at DESC"), text("seq DESC")),
)

messages = Table(
    "messages",
    metadata,
    Column("org_id", Text, primary_key=True),
    Column("interaction_id", Text, primary_key=True),
    # Positions are always 0..n-1: they replace upstream's linked list of message nodes.
    Column("msg_position", Integer, primary_key=True),
    Column("role", Text, nullable=True),
    Column("content", Text, nullable=True),
    CheckConstraint("msg_position >= 0", name="position_not_negative"),
    ForeignKeyConstraint(
        ["org_id", "interaction_id"],
        ["interactions.org_id", "interactions.interaction_id"],
        ondelete="CASCADE",
    ),
)

memories = Table(
    "memories",
    metadata,
    Column("org_id", Text, primary_key=True),
    Column("memory_id", Uuid(as_uuid=True), primary_key=True),
    Column("user_id", Text, nullable=False),
    # The agent of the call that created the memory: a plain value, kept when the agent is deleted.
    Column("agent_id", Text, nullable=False),
    # Null for a memory written through the vector store alone, without an interaction.
    Column("interaction_id", Text, nullable=True),
    Column("memory", Text, nullable=False),
    Column("obtained_at", DateTime(timezone=True), nullable=False),
    Column("seq", BigInteger, Identity(always=False), nullable=False),
    Column("metadata", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    # Null when the memory is not searchable (never embedded, or removed from the vector store).
    Column("embedding", VECTOR(), nullable=True),
    Column("search_text", TSVECTOR, nullable=True),
    # Searchable on both arms or on neither (migration 0011).
    CheckConstraint("(embedding IS NULL) = (search_text IS NULL)", name="searchable_together"),
    # The two clocks of a version (migration 0008; memora_pg.graph.timeline). Valid time runs from
    # obtained_at to the earlier of valid_until (the earliest obtained_at among its later versions)
    # and expires_at; system time from stored_at (null: stored before 0008, taken as obtained_at)
    # to superseded_at (the earliest stored_at among its later versions).
    Column("stored_at", DateTime(timezone=True), nullable=True, server_default=func.now()),
    Column("superseded_at", DateTime(timezone=True), nullable=True),
    Column("valid_until", DateTime(timezone=True), nullable=True),
    Column("expires_at", DateTime(timezone=True), nullable=True),
    ForeignKeyConstraint(["org_id", "user_id"], ["users.org_id", "users.user_id"], ondelete="CASCADE"),
    ForeignKeyConstraint(
        ["org_id", "interaction_id"],
        ["interactions.org_id", "interactions.interaction_id"],
        ondelete="CASCADE",
    ),
    # As-of reads by system time: the user's versions by when they were stored.
    Index("ix_memories_user_stored", "org_id", "user_id", func.coalesce(column("stored_at"), column("obtained_at"))),
    Index("ix_memories_user_recent", "org_id", "user_id", text("obtained_at DESC"), text("seq DESC")),
    Index("ix_memories_user_agent_recent", "org_id", "user_id", "agent_id", text("obtained_at DESC"), text("seq DESC")),
    # Neighbours by key (migration 0009): the memories just before and after one, in its interaction
    # or, for memories of no interaction, among its user's.
    Index("ix_memories_interaction_seq", "org_id", "interaction_id", "seq"),
    Index("ix_memories_unattached_seq", "org_id", "user_id", "seq", postgresql_where=text("interaction_id IS NULL")),
    # A pending list of at most 64 kB (migration 0015): every scan of the index reads all of it.
    Index(
        "ix_memories_search_text", "search_text", postgresql_using="gin", postgresql_with={"gin_pending_list_limit": 64}
    ),
    # Metadata filters of the mem0-style API: containment (@>) and key presence (?).
    Index("ix_memories_metadata", "metadata", postgresql_using="gin"),
    # The one index that cannot lead with org_id: HNSW indexes a single vector column.
    Index(
        "ix_memories_embedding_hnsw",
        "embedding",
        postgresql_using="hnsw",
        postgresql_ops={"embedding": "vector_cosine_ops"},
    ),
    # Room on each page for HOT updates of the clocks' ends (migration 0008).
    postgresql_with={"fillfactor": "90"},
)

memory_sources = Table(
    "memory_sources",
    metadata,
    Column("org_id", Text, primary_key=True),
    Column("memory_id", Uuid(as_uuid=True), primary_key=True),
    Column("interaction_id", Text, primary_key=True),
    Column("msg_position", Integer, primary_key=True),
    ForeignKeyConstraint(["org_id", "memory_id"], ["memories.org_id", "memories.memory_id"], ondelete="CASCADE"),
    # Truncating messages removes the links to them; the memory stays.
    ForeignKeyConstraint(
        ["org_id", "interaction_id", "msg_position"],
        ["messages.org_id", "messages.interaction_id", "messages.msg_position"],
        ondelete="CASCADE",
    ),
    Index(None, "org_id", "interaction_id", "msg_position"),
)

memory_updates = Table(
    "memory_updates",
    metadata,
    # One CONTRARY_UPDATE edge old -> new: a memory has at most one predecessor.
    Column("org_id", Text, primary_key=True),
    Column("new_memory_id", Uuid(as_uuid=True), primary_key=True),
    Column("old_memory_id", Uuid(as_uuid=True), nullable=False),
    ForeignKeyConstraint(["org_id", "new_memory_id"], ["memories.org_id", "memories.memory_id"], ondelete="CASCADE"),
    ForeignKeyConstraint(["org_id", "old_memory_id"], ["memories.org_id", "memories.memory_id"], ondelete="CASCADE"),
    Index(None, "org_id", "old_memory_id"),
)


# -- faces: data with no home in the core tables ---------------------------------------------

autogen_contents = Table(
    "autogen_contents",
    metadata,
    # The AutoGen memory protocol's entries: any mime type, in a namespace (the memory's name).
    Column("org_id", Text, primary_key=True),
    Column("content_id", Uuid(as_uuid=True), primary_key=True),
    Column("namespace", Text, nullable=False),
    Column("user_id", Text, nullable=True),
    Column("agent_id", Text, nullable=True),
    Column("mime_type", Text, nullable=False),
    # Exactly one of the three holds the content: text and markdown, JSON, or bytes and images.
    Column("content_text", Text, nullable=True),
    Column("content_json", JSONB, nullable=True),
    Column("content_bytes", LargeBinary, nullable=True),
    Column("metadata", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    # Null for content that is not searchable by similarity (bytes and images).
    Column("embedding", VECTOR(), nullable=True),
    Column("seq", BigInteger, Identity(always=False), nullable=False),
    _created_at(),
    # The full-text vector of the embedded text (migration 0007), set exactly when embedding is.
    Column("search_text", TSVECTOR, nullable=True),
    CheckConstraint("num_nonnulls(content_text, content_json, content_bytes) = 1", name="one_content"),
    CheckConstraint("(embedding IS NULL) = (search_text IS NULL)", name="searchable_together"),
    ForeignKeyConstraint(["org_id"], ["organizations.org_id"], ondelete="CASCADE"),
    ForeignKeyConstraint(["org_id", "user_id"], ["users.org_id", "users.user_id"], ondelete="CASCADE"),
    Index("ix_autogen_contents_namespace", "org_id", "namespace", "user_id", "agent_id", "seq"),
)


store_items = Table(
    "store_items",
    metadata,
    # LangGraph's store items (memora_pg.langgraph, migration 0019): one row per version of an item, a
    # JSON object under a namespace (its labels joined by ".") and a key; the current version is the one
    # not superseded. Searched by the embedding and full-text vector of the value's indexed fields.
    Column("org_id", Text, primary_key=True),
    Column("item_id", Uuid(as_uuid=True), primary_key=True),
    Column("namespace", Text(collation="C"), nullable=False),
    Column("key", Text, nullable=False),
    Column("value", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("superseded_at", DateTime(timezone=True), nullable=True),
    Column("expires_at", DateTime(timezone=True), nullable=True),
    Column("ttl_ms", BigInteger, nullable=True),
    Column("embedding", VECTOR(), nullable=True),
    # What the embedding and the full-text vector are of: the text of the value's indexed fields.
    Column("indexed_text", Text, nullable=True),
    Column("search_text", TSVECTOR, nullable=True),
    Column("seq", BigInteger, Identity(always=False), nullable=False),
    CheckConstraint("(embedding IS NULL) = (search_text IS NULL)", name="searchable_together"),
    ForeignKeyConstraint(["org_id"], ["organizations.org_id"], ondelete="CASCADE"),
    Index(
        "ux_store_items_current",
        "org_id",
        "namespace",
        "key",
        unique=True,
        postgresql_where=text("superseded_at IS NULL"),
    ),
    Index("ix_store_items_namespace", "org_id", "namespace", "seq"),
    Index("ix_store_items_versions", "org_id", "namespace", "key", "updated_at"),
    Index(
        "ix_store_items_search_text",
        "search_text",
        postgresql_using="gin",
        postgresql_with={"gin_pending_list_limit": 64},
    ),
)

memory_history = Table(
    "memory_history",
    metadata,
    # Events of the mem0-style API (ADD, UPDATE, DELETE) with the text before and after.
    Column("org_id", Text, primary_key=True),
    Column("event_id", Uuid(as_uuid=True), primary_key=True),
    Column("memory_id", Uuid(as_uuid=True), nullable=False),
    # The memory's user, so that erasing a user erases its history too.
    Column("user_id", Text, nullable=False),
    Column("event", Text, nullable=False),
    Column("old_memory", Text, nullable=True),
    Column("new_memory", Text, nullable=True),
    Column("actor_id", Text, nullable=True),
    Column("role", Text, nullable=True),
    Column("is_deleted", Boolean, nullable=False, server_default=text("false")),
    Column("seq", BigInteger, Identity(always=False), nullable=False),
    _created_at(),
    CheckConstraint("event IN ('ADD', 'UPDATE', 'DELETE')", name="known_event"),
    ForeignKeyConstraint(["org_id", "user_id"], ["users.org_id", "users.user_id"], ondelete="CASCADE"),
    Index("ix_memory_history_memory", "org_id", "memory_id", "seq"),
)


audit_log = Table(
    "audit_log",
    metadata,
    # Who did what, when: one row per mutation, written in the mutation's own transaction.
    Column("org_id", Text, primary_key=True),
    Column("event_id", Uuid(as_uuid=True), primary_key=True),
    # Set when the mutation concerns one user, so that erasing the user erases these rows too.
    Column("user_id", Text, nullable=True),
    Column("agent_id", Text, nullable=True),
    Column("method", Text, nullable=False),
    Column("ids", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("seq", BigInteger, Identity(always=False), nullable=False),
    ForeignKeyConstraint(["org_id"], ["organizations.org_id"], ondelete="CASCADE"),
    ForeignKeyConstraint(["org_id", "user_id"], ["users.org_id", "users.user_id"], ondelete="CASCADE"),
    Index("ix_audit_log_recent", "org_id", text("at DESC")),
)

access_tokens = Table(
    "access_tokens",
    metadata,
    # Bearer tokens of the MCP server's HTTP transport (``memora-pg mcp token``). Only a hash is
    # kept; the token decides the organization (and the user, when bound to one) of each request.
    # Credentials, not memories: no foreign key to the organization, not exported, not erased
    # with it (revoke them), and on Citus a reference table, read before any organization is known.
    Column("token_id", Text, primary_key=True),
    Column("token_hash", LargeBinary, nullable=False, unique=True),
    Column("org_id", Text, nullable=False),
    Column("user_id", Text, nullable=True),
    Column("token_name", Text, nullable=False),
    _created_at(),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)


# The tables an organization's rows live in, for row-level security and for erasure.
TENANT_TABLES = (
    "organizations",
    "users",
    "agents",
    "interactions",
    "messages",
    "memories",
    "memory_sources",
    "memory_updates",
    "memory_history",
    "autogen_contents",
    "store_items",
    "audit_log",
)


@lru_cache(maxsize=8)
def metadata_in(schema: str) -> MetaData:
    """The same tables placed in ``schema``, for comparing them with a migrated database."""
    placed = MetaData(naming_convention=NAMING_CONVENTION)
    for table in metadata.sorted_tables:
        table.to_metadata(placed, schema=schema)
    return placed
