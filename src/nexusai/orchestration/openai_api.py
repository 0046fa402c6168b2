"""OpenAI-compatible chat with memory: `POST /v1/chat/completions` and `GET /v1/models`.

An application that already uses an OpenAI client points its base URL at nexusai and gets
long-term memory without other changes. A request's session: the `X-Nexus-Session` header
(an id) wins; otherwise the request's `user` field names one, in the project the
`X-Nexus-Project` header names (created when missing; without the header, in no project).
The last user message is the turn: its context is assembled as `/chat` assembles it, the
memories and entities join the system message, the application's own messages follow as
sent (they are its history), and the model answers. The user message is stored before the
model is asked, and the answer after. Errors come in OpenAI's shape.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field, ValidationError

from nexusai.access import principal_of
from nexusai.errors import InvalidInput, NexusError, NotFound
from nexusai.http import errors
from nexusai.llm import Message, OpenAIChat
from nexusai.orchestration.api import visible_session
from nexusai.orchestration.chat import (
    SYSTEM,
    memory_block,
    require_llm,
    store_reply,
    store_user_message,
)
from nexusai.orchestration.context import Context
from nexusai.orchestration.service import Orchestration
from nexusai.schemas import MAX_ID, CamelModel

router = APIRouter(prefix="/v1", tags=["openai-compatible"])

# What a request may name as its model to mean "the one nexusai is configured with".
OUR_MODEL = "nexusai"


class ChatMessage(CamelModel):
    role: str
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        """The text, also of a message sent as parts (`[{"type": "text", "text": ...}]`)."""
        if isinstance(self.content, list):
            return "\n".join(
                str(p.get("text", "")) for p in self.content if p.get("type") == "text"
            )
        return self.content or ""


class ChatCompletionIn(CamelModel):
    """OpenAI's request body; fields nexusai does not use are accepted and ignored."""

    model: str = OUR_MODEL
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    user: str | None = None


@router.get("/models", responses=errors())  # only the door can refuse it
def list_models(request: Request) -> dict[str, Any]:
    llm: OpenAIChat | None = request.app.state.orchestration.llm
    names = [OUR_MODEL, *([llm.model] if llm else [])]
    return {
        "object": "list",
        "data": [{"id": n, "object": "model", "created": 0, "owned_by": "nexusai"} for n in names],
    }


class OpenAIError(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: int


class OpenAIErrorOut(BaseModel):
    """Errors of this router come as OpenAI's clients expect them."""

    error: OpenAIError


def _openai_errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    shaped: dict[int | str, dict[str, Any]] = {
        code: {"model": OpenAIErrorOut, "description": "An error, in OpenAI's shape"}
        for code in codes
    }
    return {**errors(415), **shaped}  # 401 and 415 come from the door, in ours


@router.post("/chat/completions", responses=_openai_errors(404, 422, 502, 503))
def chat_completions(
    request: Request,
    body: Annotated[dict[str, Any], Body(description="OpenAI's chat completion request")],
    session_header: Annotated[str | None, Header(alias="X-Nexus-Session")] = None,
    project_header: Annotated[str | None, Header(alias="X-Nexus-Project")] = None,
) -> Any:
    orchestration: Orchestration = request.app.state.orchestration
    try:
        asked = _validated(body)
        project = _project(request, project_header)
        session_id = _session(orchestration, session_header, project, asked.user)
        visible_session(request, session_id)
        context = orchestration.context(session_id, _last_user_message(asked))
        llm = require_llm(orchestration.llm)
        messages = _with_memories(context, asked.messages)
        model = None if asked.model == OUR_MODEL else asked.model
        store_user_message(orchestration.memory, context)
        if asked.stream:
            pieces = _stream(orchestration, llm, context, messages, model)
            return StreamingResponse(pieces, media_type="text/event-stream")
        reply = llm.complete(messages, model)
    except NexusError as exc:
        return _error(exc)
    store_reply(orchestration.memory, context, reply)
    return _completion(model or llm.model, reply)


def _validated(body: dict[str, Any]) -> ChatCompletionIn:
    try:
        return ChatCompletionIn.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise InvalidInput(f"{where}: {first['msg']}") from None


def _session(
    orchestration: Orchestration, header: str | None, project: str | None, user: str | None
) -> int:
    if header is not None:
        return _session_id(header)  # an unknown one is the context's 404
    if user:
        return orchestration.memory.resolve_session(project, user)
    raise InvalidInput(
        "say which conversation this is: an X-Nexus-Session header (a session id), or the"
        " request's user field (a session's name, in the X-Nexus-Project header's project)"
    )


def _project(request: Request, header: str | None) -> str | None:
    """The project named by X-Nexus-Project; a project key names its own, or none."""
    principal = principal_of(request)
    if principal.admin or header is None or header == principal.project_name:
        return header if principal.admin else principal.project_name
    raise NotFound(f"project {header!r} does not exist")


def _session_id(header: str) -> int:
    raw = header.strip()
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_ID:
        raise InvalidInput(f"X-Nexus-Session must be a session id (1 to 2**63 - 1), not {raw!r}")
    return int(raw)


def _last_user_message(body: ChatCompletionIn) -> str:
    for message in reversed(body.messages):
        if message.role == "user" and message.text().strip():
            return message.text()
    raise InvalidInput("messages: there is no user message with text to answer")


def _with_memories(context: Context, messages: list[ChatMessage]) -> list[Message]:
    """The application's messages, its system message (if any) extended with the memories
    and entities of this turn, or one put first."""
    block = memory_block(context)
    sent: list[Message] = [{"role": m.role, "content": m.text()} for m in messages]
    if not block:
        return sent
    if sent and sent[0]["role"] == "system":
        return [{"role": "system", "content": f"{sent[0]['content']}\n\n{block}"}, *sent[1:]]
    return [{"role": "system", "content": f"{SYSTEM}\n\n{block}"}, *sent]


def _stream(
    orchestration: Orchestration,
    llm: OpenAIChat,
    context: Context,
    messages: list[Message],
    model: str | None,
) -> Iterator[str]:
    """OpenAI's chunks as server-sent events; the answer is stored when it is whole."""
    ident, name, pieces = _ident(), model or llm.model, []
    try:
        for piece in llm.stream(messages, model):
            pieces.append(piece)
            yield _event(_chunk(ident, name, {"content": piece}, None))
    except NexusError as exc:
        yield _event({"error": _error_body(exc)})
        return
    store_reply(orchestration.memory, context, "".join(pieces))
    yield _event(_chunk(ident, name, {}, "stop"))
    yield "data: [DONE]\n\n"


def _completion(model: str, reply: str) -> dict[str, Any]:
    return {
        "id": _ident(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _chunk(ident: str, model: str, delta: dict[str, str], finish: str | None) -> dict[str, Any]:
    return {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _ident() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def _event(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"


def _error_body(exc: NexusError) -> dict[str, Any]:
    kind = "invalid_request_error" if exc.status_code < 500 else "api_error"
    return {"message": str(exc), "type": kind, "param": None, "code": exc.status_code}


def _error(exc: NexusError) -> JSONResponse:
    return JSONResponse({"error": _error_body(exc)}, status_code=exc.status_code)
