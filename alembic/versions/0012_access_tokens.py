"""The MCP server's bearer tokens: ``access_tokens``.

``memora-pg mcp --http`` decides each request's organization (and user, for a token bound to one)
by its bearer token, never by a tool argument. Tokens are made, listed and revoked by
``memora-pg mcp token``; the table keeps only their SHA-256 hash (a token is 256 random bits, so a
fast hash is enough: there is nothing to guess).

The roles that may read ``memories`` get ``SELECT`` on it (an application role granted ``ON ALL
TABLES`` before this revision would otherwise be refused). Row-level security is on, with one policy:
every role may read (a request is authenticated before its organization is known), and none but the
owner may write. So the application role that serves requests under row-level security can check
tokens but never mint or revoke one; the command line does that as the owner, as it runs migrations.

On a schema already distributed by Citus (``organizations`` is), the table becomes a reference table
here, as ``memora-pg db distribute`` makes it on a schema distributed after this revision.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op
from memora_pg.citus import if_distributed
from memora_pg.migrations import created_at_column, options
from memora_pg.sql_text import render

revision = "0012"
down_revision = "0011"


# The roles that may read the memories (an application role granted "ON ALL TABLES" before this table
# existed) may read the tokens too: the MCP server checks them as that role.
READERS_TOO = """
DO $$
DECLARE
    reader text;
BEGIN
    FOR reader IN
        SELECT DISTINCT grantee FROM information_schema.role_table_grants
        WHERE table_schema = '{schema}' AND table_name = 'memories' AND privilege_type = 'SELECT'
          AND grantee <> current_user
    LOOP
        IF reader = 'PUBLIC' THEN
            EXECUTE 'GRANT SELECT ON "{schema}".access_tokens TO PUBLIC';
        ELSE
            EXECUTE format('GRANT SELECT ON "{schema}".access_tokens TO %I', reader);
        END IF;
    END LOOP;
END $$
"""

# On a distributed schema the tokens are a reference table (memora_pg.citus.if_distributed decides).
REFERENCE_ON_CITUS = """\
        PERFORM create_reference_table('"{schema}".access_tokens');
"""


def upgrade() -> None:
    schema = options().schema
    op.create_table(
        "access_tokens",
        sa.Column("token_id", sa.Text(), nullable=False),
        sa.Column("token_hash", sa.LargeBinary(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("token_name", sa.Text(), nullable=False),
        created_at_column(),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("token_id", name="pk_access_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_access_tokens_token_hash"),
        schema=schema,
    )
    op.execute(f'ALTER TABLE "{schema}".access_tokens ENABLE ROW LEVEL SECURITY')
    op.execute(f'CREATE POLICY token_lookup ON "{schema}".access_tokens FOR SELECT USING (true)')
    op.execute(render(READERS_TOO, schema=schema))
    op.execute(if_distributed(schema, render(REFERENCE_ON_CITUS, schema=schema)))


def downgrade() -> None:
    op.drop_table("access_tokens", schema=options().schema)
