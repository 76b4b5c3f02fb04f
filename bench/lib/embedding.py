"""The embedder a benchmark shares between its faces and floors: each distinct text embedded once."""

from __future__ import annotations

from collections.abc import Sequence

from memora_pg.embeddings import Embedder, unrelated_similarity


class SharedEmbedder:
    """The offline embedder, each distinct text embedded once (documents and queries apart)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.unrelated_similarity = unrelated_similarity(inner)
        self.cache: dict[tuple[bool, str], list[float]] = {}

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    async def _embed(self, texts: Sequence[str], query: bool) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if (query, t) not in self.cache))
        for start in range(0, len(missing), 256):
            batch = missing[start : start + 256]
            vectors = await (self.inner.embed_queries(batch) if query else self.inner.embed_documents(batch))
            self.cache.update({(query, t): list(v) for t, v in zip(batch, vectors, strict=True)})
        return [self.cache[(query, t)] for t in texts]

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(texts, False)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(texts, True)
