"""The language model of the mem0-style API, on the official ``openai`` client, and a reranker on it.

Every answer is validated before anything is written: a call that fails, times out or
answers something that is not the requested JSON is an ``LLMError``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from memora_pg.errors import LLMError


class OpenAILLM:
    """Chat completions on any OpenAI-compatible endpoint (mem0's ``llm`` config, provider ``openai``)."""

    def __init__(
        self,
        model: str = "gpt-4o-mini",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        temperature: float = 0.1,
        max_tokens: int = 2000,
        top_p: float | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.top_p = top_p
        import openai  # here, not at import time: only a configured model needs the SDK

        self._client = openai.AsyncOpenAI(
            api_key=api_key or _env_key(),
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
        )

    @classmethod
    def from_config(cls, options: dict[str, Any]) -> OpenAILLM:
        return cls(
            options.get("model") or "gpt-4o-mini",
            api_key=options.get("api_key"),
            base_url=options.get("openai_base_url") or options.get("base_url"),
            temperature=float(options.get("temperature", 0.1)),
            max_tokens=int(options.get("max_tokens", 2000)),
            top_p=options.get("top_p"),
            timeout=float(options.get("timeout", 60.0)),
            max_retries=int(options.get("max_retries", 2)),
        )

    async def complete(self, messages: Sequence[dict[str, str]], *, json_object: bool) -> str:
        extra: dict[str, Any] = {"response_format": {"type": "json_object"}} if json_object else {}
        if self.top_p is not None:
            extra["top_p"] = self.top_p
        import openai

        try:
            response = await self._client.chat.completions.create(
                model=self.model,
                messages=list(messages),  # type: ignore[arg-type]
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                **extra,
            )
        except openai.APITimeoutError as error:
            raise LLMError(f"The language model {self.model!r} did not answer in time.") from error
        except openai.APIError as error:
            raise LLMError(f"The language model {self.model!r} failed: {type(error).__name__}.") from error
        if not response.choices or response.choices[0].message.content is None:
            raise LLMError(f"The language model {self.model!r} returned no content.")
        return response.choices[0].message.content

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> dict[str, Any]:
        """The model's answer as a JSON object (fenced code blocks are tolerated)."""
        content = _strip_fences(await self.complete(messages, json_object=True))
        try:
            parsed = json.loads(content)
        except json.JSONDecodeError as error:
            raise LLMError("The language model's answer is not valid JSON.") from error
        if not isinstance(parsed, dict):
            raise LLMError("The language model's answer is not a JSON object.")
        return parsed

    async def aclose(self) -> None:
        await self._client.close()


def _env_key() -> str:
    import os

    # Local OpenAI-compatible servers need no key, but the client insists on one.
    return os.environ.get("OPENAI_API_KEY") or "not-needed"


def _strip_fences(content: str) -> str:
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text.strip()


@runtime_checkable
class Reranker(Protocol):
    """Scores documents for a query; higher is more relevant."""

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]: ...


RERANK_PROMPT = """Score how relevant each document is to the query, from 0 (unrelated) to 1 (answers it).
Query: {query}
Documents (JSON list, in order): {documents}
Answer with a JSON object {{"scores": [one number per document, in the same order]}} and nothing else."""


class LLMReranker:
    """A reranker that asks a language model to score the candidates (mem0's ``llm_reranker``)."""

    def __init__(self, llm: OpenAILLM) -> None:
        self.llm = llm

    async def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        if not documents:
            return []
        prompt = RERANK_PROMPT.format(query=query, documents=json.dumps(list(documents), ensure_ascii=False))
        answer = await self.llm.complete_json([{"role": "user", "content": prompt}])
        found = answer.get("scores")
        if not isinstance(found, list) or len(found) != len(documents):
            raise LLMError("The reranker's answer does not hold one score per document.")
        try:
            return [float(score) for score in found]
        except (TypeError, ValueError) as error:
            raise LLMError("The reranker's scores are not numbers.") from error
