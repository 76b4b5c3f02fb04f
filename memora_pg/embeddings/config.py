"""How a component configuration names an embedder, and the embedder it names (never with an API key)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from memora_pg import known_names
from memora_pg.embeddings.base import Embedder
from memora_pg.embeddings.hashing import HashEmbedder
from memora_pg.errors import InvalidInputError


def embedder_config(embedder: Embedder | None) -> dict[str, Any] | None:
    """How a component configuration names an embedder (never with an API key); None: the default."""
    if embedder is None:
        return None
    if isinstance(embedder, HashEmbedder):
        return {"provider": "hash", "dimensions": embedder.dimensions}
    from memora_pg.embeddings import LocalEmbedder

    if isinstance(embedder, LocalEmbedder):
        return {"provider": "local", "variant": embedder.variant}
    if type(embedder).__name__ == "OpenAIEmbedder":
        from memora_pg.embeddings.openai import OpenAIEmbedder

        if isinstance(embedder, OpenAIEmbedder):
            return {
                "provider": "openai",
                "model": embedder.model,
                "base_url": embedder.base_url,
                "dimensions": embedder.dimensions,
            }
    raise InvalidInputError(
        f"A {type(embedder).__name__} cannot be written to a component configuration: only HashEmbedder, "
        "LocalEmbedder and OpenAIEmbedder can (or none: the default embedder)."
    )


def embedder_from_config(config: Mapping[str, Any] | None) -> Embedder | None:
    """The embedder :func:`embedder_config` describes (an OpenAI key comes from OPENAI_API_KEY)."""
    if config is None:
        return None
    options = dict(config)
    provider = options.pop("provider", None)
    if provider == "hash":
        return HashEmbedder(**_known(options, HashEmbedder, provider))
    if provider == "local":
        from memora_pg.embeddings import LocalEmbedder

        return LocalEmbedder(**_known(options, LocalEmbedder, provider))
    if provider == "openai":
        from memora_pg.embeddings.openai import OpenAIEmbedder

        return OpenAIEmbedder(**_known(options, OpenAIEmbedder, provider))
    raise InvalidInputError(f"Unknown embedder provider {provider!r}: use 'hash', 'local' or 'openai'.")


def _known(options: dict[str, Any], embedder: type[Embedder], provider: str) -> dict[str, Any]:
    """``options``, if the embedder's constructor takes each of them (a misspelt one is refused by name)."""
    takes = [name for name in inspect.signature(embedder.__init__).parameters if name != "self"]
    refusal = known_names.unknown(options, takes, where=f"embedder {provider!r}")
    if refusal:
        raise InvalidInputError(refusal)
    return options
