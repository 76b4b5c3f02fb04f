"""The MCP server's bearer tokens: made, listed and revoked by the owner, checked on every request.

A token is ``mpg_`` and 256 random bits (base64url). The ``access_tokens`` table keeps its SHA-256
hash, its organization and, when it is bound to one, its user; the token itself is shown once, when
it is made. A check is one indexed read of the hash, so a revoked token stops working at once.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone

from memora_pg.db import Database
from memora_pg.errors import InvalidInputError, NotFoundError
from memora_pg.graph import access_tokens
from memora_pg.graph.access_tokens import TokenRow
from memora_pg.ids import new_short_id

PREFIX = "mpg_"
# Longer than any organization or user id memora_pg accepts elsewhere would be a typo, not a name.
MAX_ID_LENGTH = 200


@dataclass(frozen=True)
class TokenInfo:
    """A token as listed: never the token itself."""

    token_id: str
    org_id: str
    user_id: str | None
    name: str
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True)
class Bearer:
    """Whom a valid token speaks for: its organization and, when bound to one, its user."""

    token_id: str
    org_id: str
    user_id: str | None


def _info(row: TokenRow) -> TokenInfo:
    return TokenInfo(row.token_id, row.org_id, row.user_id, row.token_name, row.created_at, row.revoked_at)


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _checked_id(name: str, value: str | None) -> None:
    if value is None:
        return
    if not value or len(value) > MAX_ID_LENGTH or "\x00" in value or value != value.strip():
        raise InvalidInputError(f"{name} must be 1-{MAX_ID_LENGTH} characters, without NUL or surrounding spaces")


async def mint(database: Database, *, org_id: str, user_id: str | None = None, name: str = "") -> tuple[str, TokenInfo]:
    """A new token for ``org_id`` (bound to ``user_id`` when given): the token, shown only here, and its record."""
    _checked_id("org_id", org_id)
    _checked_id("user_id", user_id)
    if "\x00" in name:
        raise InvalidInputError("a token's name cannot contain NUL")
    token = PREFIX + secrets.token_urlsafe(32)
    statement = access_tokens.mint(
        token_id=new_short_id(), token_hash=digest(token), org_id=org_id, user_id=user_id, name=name
    )
    rows = await database.execute_one(statement)
    return token, _info(rows[0])


async def listed(database: Database, *, org_id: str | None = None) -> list[TokenInfo]:
    """Every token (of ``org_id`` when given), revoked ones included, oldest first."""
    rows = await database.execute_one(access_tokens.listing(org_id=org_id), writes=False)
    return [_info(row) for row in rows]


async def revoke(database: Database, token_id: str) -> TokenInfo:
    """Revoke a token by its id (from :func:`listed`); revoking it again changes nothing."""
    rows = await database.execute_one(access_tokens.revoking(token_id=token_id, now=datetime.now(timezone.utc)))
    if not rows:
        raise NotFoundError(f"no access token with id {token_id!r}")
    return _info(rows[0])


async def bearer(database: Database, token: str) -> Bearer | None:
    """Whom ``token`` speaks for, or None when it is unknown or revoked."""
    if not token.startswith(PREFIX) or len(token) > 200:
        return None
    rows = await database.execute_one(access_tokens.holder(token_hash=digest(token)), writes=False)
    return Bearer(rows[0].token_id, rows[0].org_id, rows[0].user_id) if rows else None
