"""The LLM: any OpenAI-compatible chat-completions endpoint (Ollama, vLLM, llama.cpp
server, OpenAI), with a time-out. Failures become LLMError, which the API answers with 502."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from nexusai.config import Config
from nexusai.errors import NexusError
from nexusai.httpclient import bearer_client

Message = dict[str, str]
Usage = dict[str, Any]  # the endpoint's token counts, as it sends them
# Request fields an OpenAI-compatible endpoint understands and nexusai passes on as given.
SAMPLING = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "logit_bias",
    "response_format",
    "stream_options",
)


@dataclass(frozen=True)
class Completion:
    text: str
    usage: Usage | None = None
    finish_reason: str = "stop"  # as the endpoint said: "length" when it was cut short


@dataclass
class Ending:
    """How a stream ended, as the endpoint said it: its token counts (when asked for with
    `stream_options.include_usage`) and its finish reason."""

    usage: Usage = field(default_factory=dict)
    finish_reason: str | None = None


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
        return self.completion(messages, model).text

    def completion(
        self,
        messages: Sequence[Message],
        model: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> Completion:
        """The reply and its token usage; `options` (of `SAMPLING`) go to the endpoint."""
        with self._errors():
            body = self._body(messages, False, model, options)
            response = self._client.post("/chat/completions", json=body)
            _raise_for_status(response)
            try:
                answer = response.json()
                choice = answer["choices"][0]
                text = str(choice["message"]["content"])
                finish = str(choice.get("finish_reason") or "stop")
            except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                raise LLMError(
                    "the LLM answered in a shape that is not a chat completion"
                ) from None
            usage = answer.get("usage")
            return Completion(text, usage if isinstance(usage, dict) else None, finish)

    def stream(
        self,
        messages: Sequence[Message],
        model: str | None = None,
        options: dict[str, Any] | None = None,
        ending: Ending | None = None,
    ) -> Iterator[str]:
        """The reply in pieces, as the endpoint sends them (server-sent events); its token
        usage and finish reason go into `ending`. A stream that stops with neither a finish
        reason nor `[DONE]` was cut off: LLMError, so that no part is taken for a whole."""
        body = self._body(messages, True, model, options)
        end = ending if ending is not None else Ending()
        with (
            self._errors(),
            self._client.stream("POST", "/chat/completions", json=body) as response,
        ):
            if response.status_code >= 400:
                response.read()
                _raise_for_status(response)
            for line in response.iter_lines():
                piece = _delta(line, end)
                if piece is None:
                    return
                if piece:
                    yield piece
        if end.finish_reason is None:
            raise LLMError("the LLM's stream ended before its answer did (no finish reason)")

    def _body(
        self,
        messages: Sequence[Message],
        stream: bool,
        model: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        body = {"model": model or self.model, "messages": list(messages), "stream": stream}
        return {**(options or {}), **body}

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


def _delta(line: str, end: Ending) -> str | None:
    """Text of one SSE line: '' for lines without text, None at the end of the stream. A
    chunk's usage (the last one's, when asked for) and finish reason go into `end`."""
    if not line.startswith("data:"):
        return ""
    data = line[5:].strip()
    if data == "[DONE]":
        end.finish_reason = end.finish_reason or "stop"
        return None
    try:
        chunk = json.loads(data)
        if isinstance(chunk.get("usage"), dict):
            end.usage.update(chunk["usage"])
        choices = chunk["choices"]
        if choices and choices[0].get("finish_reason"):
            end.finish_reason = str(choices[0]["finish_reason"])
        return str(choices[0].get("delta", {}).get("content") or "") if choices else ""
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        raise LLMError("the LLM streamed something that is not a chat completion chunk") from None


def create_llm(config: Config) -> OpenAIChat | None:
    """None when no LLM is configured: chat then assembles context and says so."""
    if not (config.llm_base_url and config.llm_model):
        return None
    return OpenAIChat(config.llm_base_url, config.llm_model, config.llm_api_key, config.llm_timeout)
