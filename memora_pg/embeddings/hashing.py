"""A deterministic, dependency-free embedder for tests and offline development."""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import struct
from collections.abc import Sequence

from memora_pg.errors import InvalidInputError

_TOKEN = re.compile(r"\w+")
_UNIGRAM_WEIGHT = 1.0
_BIGRAM_WEIGHT = 0.5


_PROBES = 4


# The four 64-bit words of a feature's digest, one per probe.
_DIGEST_WORDS = struct.Struct(f"<{_PROBES}Q")


# Not cached: a cache of every word and word pair seen grows with the texts (40 MB at 65,536 features in an
# hour of varied writes) and saved little of a call's time, most of which is the vector's arithmetic.
def _feature(feature: str, dimensions: int) -> list[tuple[int, float]]:
    """Map a feature to a few (bucket, sign) pairs with a stable blake2b hash.

    Spreading each feature over several buckets keeps a chance collision between two
    unrelated words from making their texts look similar.
    """
    digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8 * _PROBES).digest()
    # The low bits choose the bucket and the top bit the sign, so the two are independent.
    return [(value % dimensions, -1.0 if value >> 63 else 1.0) for value in _DIGEST_WORDS.unpack(digest)]


class HashEmbedder:
    """Feature-hashing embedder: same text, same vector; shared words, higher similarity.

    Lower-cased text is split into unicode word tokens (``\\w+``). Every token adds weight 1
    and every pair of adjacent tokens weight 0.5 to four buckets chosen by ``blake2b``, each with a
    hashed sign; the sum is L2-normalized. Text without any word token maps to a fixed unit
    vector (all weight on bucket 0), so no vector is ever zero. Documents and queries are
    embedded identically. It captures word overlap only, not meaning: use it for tests, not
    for real recall.

    Raises :class:`InvalidInputError` if ``dimensions`` is not a positive int, or if a text
    is not a ``str``.
    """

    def __init__(self, dimensions: int = 384) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions <= 0:
            raise InvalidInputError(f"dimensions must be a positive int, got {dimensions!r}")
        self._dimensions = dimensions

    @property
    def dimensions(self) -> int:
        """The length of every vector this embedder returns."""
        return self._dimensions

    def __repr__(self) -> str:
        return f"HashEmbedder(dimensions={self._dimensions})"

    def embed_text(self, text: str) -> list[float]:
        """Embed one text synchronously; the unit vector described on the class."""
        if not isinstance(text, str):
            raise InvalidInputError(f"text must be a str, got {type(text).__name__}")
        dimensions = self._dimensions
        vector = [0.0] * dimensions
        tokens = _TOKEN.findall(text.lower())
        for token in tokens:
            for bucket, sign in _feature(token, dimensions):
                vector[bucket] += sign * _UNIGRAM_WEIGHT
        for first, second in itertools.pairwise(tokens):
            # The NUL separator keeps bigrams out of the unigram feature space.
            for bucket, sign in _feature(f"{first}\x00{second}", dimensions):
                vector[bucket] += sign * _BIGRAM_WEIGHT
        norm = math.sqrt(math.fsum(value * value for value in vector))
        if norm == 0.0:
            # No tokens, or features that cancelled out exactly.
            vector = [0.0] * dimensions
            vector[0] = 1.0
            return vector
        return [value / norm for value in vector]

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts synchronously; one vector per text, in order."""
        if isinstance(texts, str):
            raise InvalidInputError("texts must be a sequence of strings, not a single string")
        return [self.embed_text(text) for text in texts]

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts meant to be stored; identical to :meth:`embed_queries`."""
        return self.embed_sync(texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed search queries; identical to :meth:`embed_documents`."""
        return self.embed_sync(texts)
