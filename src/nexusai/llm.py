"""The LLM: any OpenAI-compatible chat-completions endpoint (Ollama, vLLM, llama.cpp
server, OpenAI), with a time-out. Failures become LLMError, which the API answers with 502."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from nexusai.config import Config
from nexusai.errors import NexusError
from nexusai.httpclient import bearer_client

Message = dict[str, str]


class LLMError(NexusError):
    status_code = 502


class OpenAIChat:
    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model = model
        self._client = bearer_client(base_url, api_key, timeout, transport)

    def complete(self, messages: Sequence[Message], model: str | None = None) -> str:
        """The reply; `model` overrides the configured one for this call."""
        with self._errors():
            body = self._body(messages, False, model)
            response = self._client.post("/chat/completions", json=body)
            _raise_for_status(response)
            try:
                return str(response.json()["choices"][0]["message"]["content"])
            except (KeyError, IndexError, TypeError, ValueError):
                raise LLMError(
                    "the LLM answered in a shape that is not a chat completion"
                ) from None

    def stream(self, messages: Sequence[Message], model: str | None = None) -> Iterator[str]:
        """The reply in pieces, as the endpoint sends them (server-sent events)."""
        with (
            self._errors(),
            self._client.stream(
                "POST", "/chat/completions", json=self._body(messages, True, model)
            ) as response,
        ):
            if response.status_code >= 400:
                response.read()
                _raise_for_status(response)
            for line in response.iter_lines():
                piece = _delta(line)
                if piece is None:
                    break
                if piece:
                    yield piece

    def _body(
        self, messages: Sequence[Message], stream: bool, model: str | None = None
    ) -> dict[str, Any]:
        return {"model": model or self.model, "messages": list(messages), "stream": stream}

    def _errors(self) -> _TranslateErrors:
        return _TranslateErrors(str(self._client.base_url))

    def close(self) -> None:
        self._client.close()


class _TranslateErrors:
    """Turns transport failures into LLMError with a message that names the endpoint."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        if isinstance(exc, httpx.TimeoutException):
            raise LLMError(f"the LLM at {self.url} did not answer in time") from None
        if isinstance(exc, httpx.TransportError):
            raise LLMError(f"could not reach the LLM at {self.url}: {type(exc).__name__}") from None


def _raise_for_status(response: httpx.Response) -> None:
    if response.status_code >= 400:
        raise LLMError(f"the LLM answered HTTP {response.status_code}: {response.text[:200]}")


def _delta(line: str) -> str | None:
    """Text of one SSE line: '' for lines without text, None at the end of the stream."""
    if not line.startswith("data:"):
        return ""
    data = line[5:].strip()
    if data == "[DONE]":
        return None
    try:
        return str(json.loads(data)["choices"][0].get("delta", {}).get("content") or "")
    except (KeyError, IndexError, TypeError, ValueError):
        raise LLMError("the LLM streamed something that is not a chat completion chunk") from None


def create_llm(config: Config) -> OpenAIChat | None:
    """None when no LLM is configured: chat then assembles context and says so."""
    if not (config.llm_base_url and config.llm_model):
        return None
    return OpenAIChat(config.llm_base_url, config.llm_model, config.llm_api_key, config.llm_timeout)
