"""A fake OpenAI-compatible service for this repository's tests: an HTTP server on 127.0.0.1 that answers
``/v1/embeddings`` with hashed vectors and ``/v1/chat/completions`` from a script, and can be told to fail
or stall. The official client, :class:`memora_pg.embeddings.OpenAIEmbedder`, the mem0-style face's model
calls and the upstream Memora agent all talk to it over real HTTP.

It fakes a third party, so it lives with the tests, not in the package. Only the standard library is needed.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeAlias

from memora_pg.embeddings.hashing import HashEmbedder
from memora_pg.errors import InvalidInputError

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["ChatScript", "FakeOpenAIServer", "FakeResponse"]


@dataclass(frozen=True)
class FakeResponse:
    """One scripted HTTP answer of :class:`FakeOpenAIServer`.

    The server waits ``delay`` seconds, then answers with HTTP ``status`` and ``body``:

    * ``body`` a dict or list is sent as JSON; a str is sent as it is (e.g. to send
      invalid JSON).
    * ``body`` ``None`` with an error status (>= 400) sends OpenAI's error shape
      ``{"error": {"message": ..., "type": ..., "param": null, "code": ...}}``.
    * ``body`` ``None`` with a success status sends the normal answer: hashed vectors for
      embeddings, and for chat a completion whose content is ``content`` (a str, or a
      dict/list that is JSON-encoded).
    """

    status: int = 200
    body: Any = None
    delay: float = 0.0
    content: Any = ""


ChatScript: TypeAlias = "str | dict[str, Any] | list[Any] | FakeResponse | Callable[[dict[str, Any]], Any]"
"""A scripted chat answer: content (str, or dict/list sent JSON-encoded), a FakeResponse, or a
callable that takes the parsed request body and returns one of those."""

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}
_WORDS = re.compile(r"\w+")


def _error_body(status: int, message: str) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def _count_tokens(value: object) -> int:
    """A rough token count (words) of a str, or of all strings inside lists and dicts."""
    if isinstance(value, str):
        return len(_WORDS.findall(value))
    if isinstance(value, list):
        return sum(_count_tokens(item) for item in value)
    if isinstance(value, dict):
        return sum(_count_tokens(item) for item in value.values())
    return 0


class _Answer:
    """A decided HTTP answer: status and body (a JSON value or raw text)."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout) makes the write fail; that is expected, stay quiet.
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: no idle threads left behind

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            body: Any = json.loads(raw) if raw else {}
        except ValueError:
            fake._record(self.path, None)
            self._send(_Answer(400, _error_body(400, "the request body is not valid JSON")))
            return
        fake._record(self.path, body)
        if not isinstance(body, dict):
            answer = _Answer(400, _error_body(400, "the request body must be a JSON object"))
        elif self.path.rstrip("/") == "/v1/embeddings":
            answer = fake._answer_embeddings(body)
        elif self.path.rstrip("/") == "/v1/chat/completions":
            answer = fake._answer_chat(body)
        else:
            answer = _Answer(404, _error_body(404, f"no such endpoint: POST {self.path}"))
        self._send(answer)

    def do_GET(self) -> None:
        fake = self.server.fake
        fake._record(self.path, None)
        if self.path.rstrip("/") == "/v1/models":
            models = [{"id": "fake-model", "object": "model", "created": 0, "owned_by": "memora"}]
            self._send(_Answer(200, {"object": "list", "data": models}))
        else:
            self._send(_Answer(404, _error_body(404, f"no such endpoint: GET {self.path}")))

    def _send(self, answer: _Answer) -> None:
        if isinstance(answer.body, str):
            payload = answer.body.encode("utf-8")
            content_type = "text/plain; charset=utf-8"
        else:
            payload = json.dumps(answer.body).encode("utf-8")
            content_type = "application/json"
        try:
            self.send_response(answer.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            pass  # the client hung up, typically after its own timeout


class FakeOpenAIServer:
    """An OpenAI-compatible HTTP server on 127.0.0.1 for tests; stdlib only, thread-safe.

    Use it as ``with FakeOpenAIServer() as server: ...`` or call :meth:`start` and
    :meth:`stop`. It listens on a free port; :attr:`base_url` is
    ``"http://127.0.0.1:PORT/v1"``.

    * ``POST /v1/embeddings`` (``input`` a str or a list of str) answers in OpenAI's shape
      with :class:`HashEmbedder` vectors of ``dimensions`` entries, or of the request's
      ``dimensions`` field when it has one; ``encoding_format: "base64"`` is honoured.
      Responses queued with :meth:`script_embeddings` are used first, one per request.
    * ``POST /v1/chat/completions`` answers with the next response queued by
      :meth:`script_chat`, as an OpenAI ``chat.completion``; with none queued it answers
      HTTP 500 with an OpenAI error saying "no scripted response".
    * Every request is recorded in :attr:`requests` as ``(path, parsed JSON body)``.

    Nothing is logged. Scripts and records can be used from any thread.
    """

    def __init__(self, dimensions: int = 384, *, model: str = "fake-model") -> None:
        self._embedder = HashEmbedder(dimensions)
        self._embedders: dict[int, HashEmbedder] = {dimensions: self._embedder}
        self._model = model
        self._lock = threading.Lock()
        self._chat_script: deque[ChatScript] = deque()
        self._embedding_script: deque[FakeResponse] = deque()
        self._requests: list[tuple[str, Any]] = []
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Start serving in a daemon thread; returns ``self``. Starting twice is an error."""
        if self._httpd is not None:
            raise RuntimeError("FakeOpenAIServer is already running")
        self._stopping.clear()
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="FakeOpenAIServer",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; pending delays end at once. Idempotent."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join()
        self._httpd = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The TCP port the server listens on; only while running."""
        if self._httpd is None:
            raise RuntimeError("FakeOpenAIServer is not running; call start() first")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``"http://127.0.0.1:PORT/v1"``; only while running."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting and records -------------------------------------------------------------

    def script_chat(self, *responses: ChatScript) -> None:
        """Queue chat answers, consumed one per ``/v1/chat/completions`` request in order."""
        with self._lock:
            self._chat_script.extend(responses)

    def script_embeddings(self, *responses: FakeResponse) -> None:
        """Queue answers used, one per request, before ``/v1/embeddings`` hashes again."""
        for response in responses:
            if not isinstance(response, FakeResponse):
                raise InvalidInputError(f"script_embeddings takes FakeResponse objects, got {type(response).__name__}")
        with self._lock:
            self._embedding_script.extend(responses)

    @property
    def requests(self) -> list[tuple[str, Any]]:
        """A copy of every request so far, as ``(path, parsed JSON body or None)``."""
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str) -> list[Any]:
        """The parsed bodies of the requests to ``path`` (e.g. ``"/v1/embeddings"``)."""
        return [body for request_path, body in self.requests if request_path == path]

    @property
    def pending_chat(self) -> int:
        """How many scripted chat answers are not consumed yet."""
        with self._lock:
            return len(self._chat_script)

    @property
    def pending_embeddings(self) -> int:
        """How many scripted embedding answers are not consumed yet."""
        with self._lock:
            return len(self._embedding_script)

    def reset(self) -> None:
        """Forget the queued scripts and the recorded requests."""
        with self._lock:
            self._chat_script.clear()
            self._embedding_script.clear()
            self._requests.clear()

    # -- request handling (server threads) -------------------------------------------------

    def _record(self, path: str, body: Any) -> None:
        with self._lock:
            self._requests.append((path, body))

    def _wait(self, delay: float) -> None:
        if delay > 0:
            self._stopping.wait(delay)

    def _embedder_for(self, dimensions: int) -> HashEmbedder:
        with self._lock:
            embedder = self._embedders.get(dimensions)
            if embedder is None:
                embedder = self._embedders[dimensions] = HashEmbedder(dimensions)
            return embedder

    def _answer_embeddings(self, request: dict[str, Any]) -> _Answer:
        with self._lock:
            scripted = self._embedding_script.popleft() if self._embedding_script else None
        if scripted is not None:
            self._wait(scripted.delay)
            if scripted.body is not None or scripted.status >= 400:
                return self._scripted_answer(scripted)
        texts = request.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            return _Answer(400, _error_body(400, "input must be a string or a list of strings"))
        dimensions = request.get("dimensions")
        if dimensions is None:
            embedder = self._embedder
        elif isinstance(dimensions, int) and not isinstance(dimensions, bool) and dimensions > 0:
            embedder = self._embedder_for(dimensions)
        else:
            return _Answer(400, _error_body(400, "dimensions must be a positive integer"))
        encoding = request.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            return _Answer(400, _error_body(400, "encoding_format must be 'float' or 'base64'"))
        data: list[dict[str, Any]] = []
        for index, vector in enumerate(embedder.embed_sync(texts)):
            embedding: Any = vector
            if encoding == "base64":
                packed = struct.pack(f"<{len(vector)}f", *vector)
                embedding = base64.b64encode(packed).decode("ascii")
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = _count_tokens(texts)
        return _Answer(
            200,
            {
                "object": "list",
                "data": data,
                "model": request.get("model") or self._model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _answer_chat(self, request: dict[str, Any]) -> _Answer:
        if request.get("stream"):
            return _Answer(400, _error_body(400, "FakeOpenAIServer does not support stream=true"))
        with self._lock:
            has_script = bool(self._chat_script)
            scripted: ChatScript = self._chat_script.popleft() if has_script else ""
        if not has_script:
            return _Answer(500, _error_body(500, "FakeOpenAIServer: no scripted response"))
        if callable(scripted):
            try:
                scripted = scripted(request)
            except Exception as exc:  # report the test's failing callable over HTTP
                return _Answer(500, _error_body(500, f"scripted callable raised {exc!r}"))
        content: Any = scripted
        if isinstance(scripted, FakeResponse):
            self._wait(scripted.delay)
            if scripted.body is not None or scripted.status >= 400:
                return self._scripted_answer(scripted)
            content = scripted.content
        if not isinstance(content, str):
            try:
                content = json.dumps(content)
            except (TypeError, ValueError) as exc:
                return _Answer(500, _error_body(500, f"scripted content is not JSON: {exc}"))
        prompt_tokens = _count_tokens(request.get("messages"))
        completion_tokens = _count_tokens(content)
        status = scripted.status if isinstance(scripted, FakeResponse) else 200
        return _Answer(
            status,
            {
                "id": f"chatcmpl-fake-{next(self._ids)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model") or self._model,
                "system_fingerprint": None,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content, "refusal": None},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )

    @staticmethod
    def _scripted_answer(scripted: FakeResponse) -> _Answer:
        if scripted.body is not None:
            return _Answer(scripted.status, scripted.body)
        message = f"FakeOpenAIServer: scripted HTTP {scripted.status}"
        return _Answer(scripted.status, _error_body(scripted.status, message))
