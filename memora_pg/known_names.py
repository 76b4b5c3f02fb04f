"""Names a configuration may use, and the refusal of any other: a misspelt key must not pass unnoticed.

A configuration key that is read with ``.get`` falls back to its default when it is misspelt: a
``conection_string`` sends every write to the embedded server, not to the database the user named.
Every place that takes a configuration by name (the mem0-style config dicts, the AutoGen component
configs, the ``MEMORA_PG_*`` environment) checks its keys here, and names the closest known one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, model_validator

from memora_pg.errors import InvalidInputError


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` is most likely a misspelling of, if any is close."""
    by_folded = {option.lower(): option for option in known}
    found = difflib.get_close_matches(name.lower(), list(by_folded), n=1, cutoff=0.6)
    return by_folded[found[0]] if found else None


def unknown(given: Iterable[str], known: Iterable[str], *, where: str, noun: str = "key") -> str | None:
    """A one-sentence refusal of the names in ``given`` that ``known`` lacks, or None when all are known.

    >>> unknown(["conection_string"], ["connection_string", "dbname"], where="vector_store.config")
    "vector_store.config: unknown key 'conection_string' (did you mean 'connection_string'?)"
    """
    options = sorted(set(known))
    strangers = [name for name in given if name not in options]
    if not strangers:
        return None
    parts = []
    for name in strangers:
        guess = closest(name, options)
        parts.append(f"{name!r} (did you mean {guess!r}?)" if guess else repr(name))
    nouns = noun if len(strangers) == 1 else f"{noun}s"
    guessed = any(closest(name, options) for name in strangers)
    hint = "" if guessed or len(options) > 20 else f"; known: {', '.join(options)}"
    return f"{where}: unknown {nouns} {', '.join(parts)}{hint}"


class StrictConfig(BaseModel):
    """A component configuration that refuses a key it does not have, naming the closest one it does
    (pydantic's own ``extra="forbid"`` says only "Extra inputs are not permitted")."""

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, given: Any) -> Any:
        if isinstance(given, dict):
            names = set(cls.model_fields) | {field.alias for field in cls.model_fields.values() if field.alias}
            refusal = unknown(given, names, where=cls.__name__)
            if refusal:
                raise InvalidInputError(refusal)
        return given
