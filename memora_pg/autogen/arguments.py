"""The checks of ``PostgresMemory``'s arguments, and its limits."""

from __future__ import annotations

from typing import Any

from memora_pg.errors import InvalidInputError
from memora_pg.graph.validate import no_nul

# The foreign key from an entry to its user (schema.NAMING_CONVENTION).
USER_KEY = "fk_autogen_contents_org_id_user_id_users"
DEFAULT_ORG_ID = "default"
DEFAULT_ORG_NAME = "default"
MAX_K = 1_000
MAX_NAME_CHARS = 10_000


def optional_id(value: object, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"`{what}` must be None or a non-empty string.")
    no_nul(value, f"`{what}`")
    return value


def check_k(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_K:
        raise InvalidInputError(f"`k` must be an integer from 1 to {MAX_K}, not {value!r}.")
    return value


def check_threshold(value: object, name: str = "score_threshold") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not -1.0 <= value <= 1.0:
        raise InvalidInputError(f"`{name}` must be None or a number from -1 to 1, not {value!r}.")
    return float(value)


def _check_distance(value: object) -> float | None:
    """``distance_threshold`` (a cosine distance d, 0 to 2) as the similarity floor 1 - d."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 2.0:
        raise InvalidInputError(f"`distance_threshold` must be None or a cosine distance from 0 to 2, not {value!r}.")
    return 1.0 - float(value)


def query_options(kwargs: dict[str, Any], k: int, threshold: float | None) -> tuple[int, float | None]:
    """``query()``'s keyword arguments: ``k`` (alias ``top_k``, RedisMemory's name) and
    ``score_threshold`` (or ``distance_threshold``, a cosine distance d meaning similarity >= 1 - d)."""
    unknown = sorted(set(kwargs) - {"k", "top_k", "score_threshold", "distance_threshold", "as_of", "as_of_clock"})
    if unknown:
        raise InvalidInputError(
            f"query() takes the keyword arguments k (or top_k), score_threshold (or distance_threshold), "
            f"as_of and as_of_clock, not {unknown}."
        )
    if "k" in kwargs and "top_k" in kwargs:
        raise InvalidInputError("Pass `k` or its alias `top_k`, not both.")
    if "score_threshold" in kwargs and "distance_threshold" in kwargs:
        raise InvalidInputError("Pass `score_threshold` or `distance_threshold` (similarity = 1 - distance), not both.")
    chosen_k = check_k(kwargs.get("k", kwargs.get("top_k", k)))
    if "distance_threshold" in kwargs:
        return chosen_k, _check_distance(kwargs["distance_threshold"])
    return chosen_k, check_threshold(kwargs.get("score_threshold", threshold))
