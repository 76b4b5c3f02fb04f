"""The MCP server's bearer tokens as rows of ``access_tokens`` (migration 0012): the statements that make,
list, revoke and check them. The token itself never reaches the database, only its SHA-256 hash
(memora_pg.mcp.tokens makes the token and runs these)."""

from __future__ import annotations

from datetime import datetime

from memora_pg.driver import Row
from memora_pg.statements import Statement

# A token's row as the listing and the check read it (token_id, org_id, user_id, token_name, created_at,
# revoked_at).
TokenRow = Row

MINT = """
INSERT INTO {schema}.access_tokens (token_id, token_hash, org_id, user_id, token_name)
VALUES (:token_id, :token_hash, :org_id, :user_id, :token_name)
RETURNING token_id, org_id, user_id, token_name, created_at, revoked_at
"""

LIST = """
SELECT token_id, org_id, user_id, token_name, created_at, revoked_at
FROM {schema}.access_tokens
WHERE CAST(:org_id AS text) IS NULL OR org_id = :org_id
ORDER BY created_at, token_id
"""

# The time is a parameter: Citus refuses now() inside COALESCE in an UPDATE of a reference table.
REVOKE = """
UPDATE {schema}.access_tokens SET revoked_at = coalesce(revoked_at, CAST(:now AS timestamptz))
WHERE token_id = :token_id
RETURNING token_id, org_id, user_id, token_name, created_at, revoked_at
"""

HOLDER = """
SELECT token_id, org_id, user_id FROM {schema}.access_tokens
WHERE token_hash = :token_hash AND revoked_at IS NULL
"""


def mint(*, token_id: str, token_hash: bytes, org_id: str, user_id: str | None, name: str) -> Statement:
    """A new token's row (its record comes back)."""
    params = {"token_id": token_id, "token_hash": token_hash, "org_id": org_id, "user_id": user_id, "token_name": name}
    return Statement(MINT, params)


def listing(*, org_id: str | None) -> Statement:
    """Every token's record (of ``org_id`` when given), revoked ones included, oldest first."""
    return Statement(LIST, {"org_id": org_id})


def revoking(*, token_id: str, now: datetime) -> Statement:
    """The token revoked at ``now`` unless it already was (its record comes back; no row: no such token)."""
    return Statement(REVOKE, {"token_id": token_id, "now": now})


def holder(*, token_hash: bytes) -> Statement:
    """Whom the unrevoked token of this hash speaks for (no row: none)."""
    return Statement(HOLDER, {"token_hash": token_hash})
