"""The embedder interface, and the one checked way the rest of the package calls it."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from memora_pg.errors import EmbeddingError, InvalidInputError, MemoraPGError


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into fixed-length float vectors.

    Contract:

    * ``dimensions`` is the length of every vector the embedder returns; it never changes
      for the life of the instance.
    * ``embed_documents`` embeds texts that are stored and searched (memories);
      ``embed_queries`` embeds search queries. Asymmetric models (e5 and similar) treat the
      two differently; symmetric ones may implement both the same way.
    * Both return exactly one vector per input text, in input order.

    Callers inside memora_pg go through :func:`embed_checked`, which enforces the contract,
    so an embedder may simply raise whatever its backend raises.
    """

    @property
    def dimensions(self) -> int:
        """The length of every vector this embedder returns."""
        ...

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts meant to be stored and searched; one vector per text, in order."""
        ...

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed search queries; one vector per text, in order."""
        ...


def unrelated_similarity(embedder: Embedder) -> float:
    """The cosine similarity around which unrelated texts land for this embedder (0 unless it says).

    An embedder may declare it as an ``unrelated_similarity`` attribute: e5-style models place
    unrelated texts near 0.75, OpenAI's text-embedding-3 models near 0. The hybrid search scores
    the dense arm from there (``Settings.search_cosine_floor`` overrides it).
    """
    value = getattr(embedder, "unrelated_similarity", 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not -1 <= value < 1:
        raise EmbeddingError(f"embedder {type(embedder).__name__} reports unrelated_similarity={value!r}")
    return float(value)


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, each checked to be a string."""
    # A bare str is a Sequence[str] too; embedding it character by character is never meant.
    if isinstance(texts, str):
        raise InvalidInputError("texts must be a sequence of strings, not a single string")
    checked = list(texts)
    for position, text in enumerate(checked):
        if not isinstance(text, str):
            raise InvalidInputError(f"texts[{position}] is {type(text).__name__}, expected str")
    return checked


def _check_dimensions(embedder: Embedder) -> int:
    dimensions = embedder.dimensions
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions <= 0:
        raise EmbeddingError(
            f"embedder {type(embedder).__name__} reports dimensions={dimensions!r}, expected a positive int"
        )
    return dimensions


def _as_sequence(value: object) -> Sequence[object] | None:
    # numpy arrays are not registered as Sequence; their tolist() gives plain lists.
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, Sequence):
        value = tolist()
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray)):
        return value
    return None


_NUMBERS = {float, int}
# pgvector keeps 32-bit floats: a larger magnitude cannot be stored.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _checked_with_numpy(vectors: Sequence[object], count: int, dimensions: int) -> list[list[float]] | None:
    """The common case checked at once: a well-formed block of finite floats. None sends the
    caller to the value-by-value check, which names the first bad value."""
    # numpy would turn True into 1.0: plain lists must hold only ints and floats (type(True) is bool).
    if not all(isinstance(row, np.ndarray) or set(map(type, row)) <= _NUMBERS for row in vectors):  # type: ignore[call-overload]
        return None
    try:
        raw = np.asarray(vectors)
    except (TypeError, ValueError):
        return None
    # Only real numbers: strings, bools and objects go to the value-by-value check.
    if raw.dtype.kind not in "fiu" or raw.shape != (count, dimensions):
        return None
    block = raw.astype(np.float64, copy=False)
    if not np.isfinite(block).all() or np.abs(block).max(initial=0.0) > FLOAT32_MAX:
        return None
    checked: list[list[float]] = block.tolist()
    return checked


def _check_vectors(result: object, count: int, dimensions: int) -> list[list[float]]:
    vectors = _as_sequence(result)
    if vectors is None:
        raise EmbeddingError(f"embedder returned {type(result).__name__}, expected a list of vectors")
    if len(vectors) != count:
        raise EmbeddingError(f"embedder returned {len(vectors)} vectors for {count} texts")
    fast = _checked_with_numpy(vectors, count, dimensions)
    if fast is not None:
        return fast
    checked: list[list[float]] = []
    for row, item in enumerate(vectors):
        vector = _as_sequence(item)
        if vector is None:
            raise EmbeddingError(f"embedder returned {type(item).__name__} as vector {row}, expected a list of floats")
        if len(vector) != dimensions:
            raise EmbeddingError(f"embedder returned vectors of {len(vector)} dimensions, expected {dimensions}")
        floats: list[float] = []
        for position, value in enumerate(vector):
            if type(value) is not float:
                # numpy scalars are numbers.Real; bool is an int but never a coordinate.
                if isinstance(value, bool) or not isinstance(value, numbers.Real):
                    raise EmbeddingError(
                        f"embedder returned {type(value).__name__} at vector {row}, "
                        f"position {position}, expected a float"
                    )
                value = float(value)
            if not math.isfinite(value):
                raise EmbeddingError(
                    f"embedder returned a non-finite value ({value}) at vector {row}, position {position}"
                )
            if abs(value) > FLOAT32_MAX:
                raise EmbeddingError(
                    f"embedder returned {value} at vector {row}, position {position}: "
                    "pgvector stores 32-bit floats, and this is outside their range"
                )
            floats.append(value)
        checked.append(floats)
    return checked


async def embed_checked(embedder: Embedder, texts: Sequence[str], *, query: bool) -> list[list[float]]:
    """Embed ``texts`` with ``embedder`` and enforce the :class:`Embedder` contract.

    Calls ``embed_queries`` when ``query`` is true, else ``embed_documents``. Returns plain
    ``list[list[float]]``: exactly one vector per text, in input order, each of length
    ``embedder.dimensions``, every value a finite float. Empty input returns ``[]`` without
    calling the embedder.

    Raises :class:`InvalidInputError` if ``texts`` is a bare string or holds a non-string,
    and :class:`EmbeddingError` if the embedder's result breaks the contract or the embedder
    raises anything that is not a :class:`MemoraPGError` (the original is kept as
    ``__cause__``). A :class:`MemoraPGError` raised by the embedder, and
    ``asyncio.CancelledError``, propagate unchanged.
    """
    items = check_texts(texts)
    if not items:
        return []
    dimensions = _check_dimensions(embedder)
    try:
        if query:
            vectors: object = await embedder.embed_queries(items)
        else:
            vectors = await embedder.embed_documents(items)
    except MemoraPGError:
        raise
    except Exception as exc:
        raise EmbeddingError(f"embedder {type(embedder).__name__} failed: {type(exc).__name__}: {exc}") from exc
    return _check_vectors(vectors, len(items), dimensions)
