"""LangGraph's long-term memory: ``store_items``, the items of ``memora_pg.langgraph.MemoraStore``.

An item is a JSON object under a namespace (LangGraph's tuple of labels, stored joined by ``.``, which
no label may contain) and a key. Every version of an item is a row: a ``put`` over an existing key
closes the current version (``superseded_at``) and adds a new one, and a ``delete`` closes it, so what
an item said at any time stays readable (``as_of``). The current version of a key is unique
(``ux_store_items_current``). ``created_at`` is the item's first version's time, ``updated_at`` this
version's. A version with ``expires_at`` in the past is gone for every reader, and the store's sweeper
deletes its key's versions.

The columns a search ranks by are those of the other searched tables: ``embedding`` and
``search_text``, set together or not at all, both of ``indexed_text`` (the text of the value's indexed
fields, kept so that an import and a re-embedding can make them again), and ``seq``. ``ttl_ms`` is the
item's time to live, which a read restarts. The namespace
is compared bytewise (``COLLATE "C"``), so a namespace prefix is a range of the btree
``ix_store_items_namespace``. Like the AutoGen entries, items have no HNSW index: a search's scope (a
namespace and those below it) is sorted exactly.

Row-level security isolates organizations as on every tenant table; ``put_store_items`` is the one
writer of the table's rows. On a schema already distributed by Citus the table is distributed by
``org_id``, co-located with the organizations, and the function by its organization.
"""

from __future__ import annotations

import sqlalchemy as sa
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.dialects import postgresql

from alembic import op
from memora_pg.citus import distribute_functions, if_distributed
from memora_pg.migrations import (
    cascading_key,
    deployment_dimensions,
    options,
    tenant_column,
    write_order_column,
)
from memora_pg.sql import function_source, installed

revision = "0019"
down_revision = "0018"

TABLE = "store_items"
PUT = "put_store_items(text, text, text[], text[], text[], vector[], text[], bigint[])"
DISTRIBUTE_ON_CITUS = """\
        PERFORM create_distributed_table('{table}', 'org_id', colocate_with => '{anchor}');
"""


def upgrade() -> None:
    opts = options()
    schema = opts.schema
    op.create_table(
        TABLE,
        tenant_column(),
        sa.Column("item_id", sa.Uuid(), nullable=False),
        sa.Column("namespace", sa.Text(collation="C"), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", postgresql.JSONB(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("superseded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ttl_ms", sa.BigInteger(), nullable=True),
        sa.Column("embedding", VECTOR(deployment_dimensions(schema, opts.dimensions)), nullable=True),
        sa.Column("indexed_text", sa.Text(), nullable=True),
        sa.Column("search_text", postgresql.TSVECTOR(), nullable=True),
        write_order_column(),
        sa.PrimaryKeyConstraint("org_id", "item_id", name="pk_store_items"),
        sa.CheckConstraint(
            "(embedding IS NULL) = (search_text IS NULL)", name=op.f("ck_store_items_searchable_together")
        ),
        cascading_key(schema, TABLE, ["org_id"], "organizations"),
        schema=schema,
    )
    op.create_index(
        "ux_store_items_current",
        TABLE,
        ["org_id", "namespace", "key"],
        unique=True,
        schema=schema,
        postgresql_where=sa.text("superseded_at IS NULL"),
    )
    # A namespace's versions in write order: a search's scope and its neighbours, a key's versions by time.
    op.create_index("ix_store_items_namespace", TABLE, ["org_id", "namespace", "seq"], schema=schema)
    op.create_index("ix_store_items_versions", TABLE, ["org_id", "namespace", "key", "updated_at"], schema=schema)
    op.create_index(
        "ix_store_items_search_text",
        TABLE,
        ["search_text"],
        schema=schema,
        postgresql_using="gin",
        postgresql_with={"gin_pending_list_limit": 64},
    )
    op.execute(f'ALTER TABLE "{schema}".{TABLE} ENABLE ROW LEVEL SECURITY')
    # current_setting(..., true) is NULL when unset, and NULL = org_id is never true: fail closed.
    op.execute(
        f'CREATE POLICY tenant_isolation ON "{schema}".{TABLE} '
        "USING (org_id = current_setting('memora.org_id', true)) "
        "WITH CHECK (org_id = current_setting('memora.org_id', true))"
    )
    op.execute(
        if_distributed(
            schema,
            DISTRIBUTE_ON_CITUS.format(table=f'"{schema}".{TABLE}', anchor=f'"{schema}".organizations'),
        )
    )
    op.execute(installed(function_source("put_store_items", revision), schema))
    op.execute(distribute_functions(schema, [PUT]))


def downgrade() -> None:
    schema = options().schema
    op.execute(f'DROP FUNCTION "{schema}".{PUT}')
    op.drop_table(TABLE, schema=schema)
