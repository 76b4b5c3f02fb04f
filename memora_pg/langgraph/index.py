"""What a ``MemoraStore`` embeds of an item: LangGraph's ``index`` configuration, and its embedder.

``index={"dims": ..., "embed": ..., "fields": [...]}`` takes what LangGraph's stores take: a LangChain
``Embeddings``, a function of texts (sync or async), or a provider string (through LangChain). Without
``embed``, the store embeds with memora_pg's configured embedder (the offline default unless one is given).
``fields`` are LangGraph's JSON paths (``"content"``, ``"metadata.tags[*]"``; ``"$"``, the default, is the
whole value). An item is one vector: the text at its fields, joined by new lines, so that every search of
memora_pg (hybrid: the vector and the words of the same text) ranks items as it ranks memories.

memora_pg ranks by cosine similarity. LangGraph's other distance types, ``inner_product`` and ``l2``,
order unit-length vectors exactly as cosine does (for ``|d| = 1``, ``q·d`` and ``-|q - d|`` are both monotone
in the cosine), and the embedding models people use return unit-length vectors; so a store configured with
either is taken, and checks that every vector it stores has unit length (:func:`check_unit_length`), refusing
one that has not rather than ordering it otherwise than that configuration would.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import IndexConfig
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from memora_pg.embeddings import Embedder
from memora_pg.errors import ConfigurationError

WHOLE_VALUE = "$"
DISTANCE_TYPES = ("cosine", "inner_product", "l2")
# How far from 1 a stored vector's length may be under inner_product or l2: float32 rounding, and halfvec's.
UNIT_LENGTH_TOLERANCE = 1e-3


class LangChainEmbedder:
    """A LangChain ``Embeddings`` as memora_pg's :class:`~memora_pg.embeddings.Embedder`."""

    def __init__(self, embeddings: Any, dimensions: int) -> None:
        self.embeddings = embeddings
        self._dimensions = dimensions

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = await self.embeddings.aembed_documents(list(texts))
        return vectors

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return list(await asyncio.gather(*(self.embeddings.aembed_query(text) for text in texts)))


Path = tuple[str, list[str]]


def paths(fields: Sequence[str]) -> list[Path]:
    """Each field as LangGraph reads it: the path and its tokens."""
    if isinstance(fields, str) or not all(isinstance(field, str) and field for field in fields):
        raise ConfigurationError(f"`fields` must be a list of JSON paths, not {fields!r}.")
    return [(field, tokenize_path(field) if field != WHOLE_VALUE else [WHOLE_VALUE]) for field in fields]


@dataclass(frozen=True)
class Index:
    """What a store embeds: the ``fields`` of every value (unless a put names its own), with ``embedder``
    (None: the store's, memora_pg's configured one)."""

    fields: tuple[Path, ...]
    embedder: Embedder | None
    config: Mapping[str, Any]
    distance_type: str = "cosine"

    def text(self, value: Mapping[str, Any], fields: Sequence[str] | None = None) -> str | None:
        """The text an item is embedded by: that at its fields, joined; None when they hold none."""
        chosen = self.fields if fields is None else tuple(paths(fields))
        texts = [text for path, tokens in chosen for text in _texts(value, path, tokens)]
        return "\n".join(texts) if texts else None


def _texts(value: Mapping[str, Any], path: str, tokens: list[str]) -> list[str]:
    return get_text_at_path(value, WHOLE_VALUE if path == WHOLE_VALUE else tokens)


def index(config: IndexConfig | Mapping[str, Any] | None) -> Index:
    """The store's index from LangGraph's ``index`` argument (None: the whole value, memora_pg's embedder)."""
    if config is None:
        return Index(((WHOLE_VALUE, [WHOLE_VALUE]),), None, {})
    if not isinstance(config, Mapping):
        raise ConfigurationError(f"`index` must be a dict like LangGraph's IndexConfig, not {type(config).__name__}.")
    unknown = set(config) - {"dims", "embed", "fields", "distance_type", "ann_index_config"}
    if unknown:
        raise ConfigurationError(f"Unknown `index` keys: {', '.join(sorted(map(str, unknown)))}.")
    distance_type = config.get("distance_type", "cosine")
    if distance_type not in DISTANCE_TYPES:
        raise ConfigurationError(
            f"`distance_type` must be one of {', '.join(map(repr, DISTANCE_TYPES))}, not {distance_type!r}."
        )
    fields = tuple(paths(config.get("fields") or [WHOLE_VALUE]))
    embed = config.get("embed")
    if embed is None:
        return Index(fields, None, dict(config), distance_type)
    dims = config.get("dims")
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise ConfigurationError(f"`index['dims']` must be a positive integer with `embed`, not {dims!r}.")
    try:
        embeddings = ensure_embeddings(embed)
    except ValueError as error:
        raise ConfigurationError(str(error)) from error
    return Index(fields, LangChainEmbedder(embeddings, dims), dict(config), distance_type)


def check_unit_length(index: Index, vectors: Sequence[Sequence[float]]) -> None:
    """Under ``inner_product`` or ``l2``, refuse a vector to store that is neither unit-length nor zero (the
    embedding of no text): cosine would order it otherwise than that distance."""
    if index.distance_type == "cosine":
        return
    for vector in vectors:
        length = math.sqrt(math.fsum(x * x for x in vector))
        if length and abs(length - 1) > UNIT_LENGTH_TOLERANCE:
            raise ConfigurationError(
                f"`distance_type={index.distance_type!r}` ranks as cosine similarity only for unit-length "
                f"embeddings, and the embedder returned one of length {length:.4f}: normalize its vectors, or "
                "use distance_type='cosine'."
            )
