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
import re
import time
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Annotated, Any, Self
from urllib.parse import unquote

from fastapi import APIRouter, Body, Header, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from nexusai.access import principal_of
from nexusai.errors import InvalidInput, NexusError, NotFound
from nexusai.http import StrictJSONRoute, openai_error
from nexusai.idempotency import answered_once
from nexusai.llm import SAMPLING, Completion, Ending, Message, OpenAIChat, Usage
from nexusai.orchestration.api import check_message, visible_session
from nexusai.orchestration.chat import (
    SYSTEM,
    is_unanswered_copy,
    last_stored,
    require_llm,
    store_reply,
    store_user_message,
)
from nexusai.orchestration.context import Context
from nexusai.orchestration.layout import memory_block
from nexusai.orchestration.service import Orchestration
from nexusai.orchestration.settings import SETTINGS
from nexusai.orchestration.turn import TurnRequest
from nexusai.refusals import refusal
from nexusai.schemas import MAX_ID, CamelModel, FilterIn, IsoTime, check_storable

router = APIRouter(prefix="/v1", tags=["openai-compatible"], route_class=StrictJSONRoute)

# What a request may name as its model to mean "the one nexusai is configured with".
OUR_MODEL = "nexusai"


class ChatMessage(CamelModel):
    model_config = ConfigDict(extra="allow")  # what else a message says is checked by name

    role: str
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        """The text, also of a message sent as parts (`[{"type": "text", "text": ...}]`)."""
        if isinstance(self.content, list):
            return "\n".join(
                str(p.get("text", "")) for p in self.content if p.get("type") == "text"
            )
        return self.content or ""


class ChatCompletionIn(BaseModel):
    """OpenAI's request body. Sampling fields (`llm.SAMPLING`) go to the LLM as given;
    what nexusai cannot honour is refused (400), never dropped."""

    model_config = ConfigDict(extra="allow")

    model: str = OUR_MODEL
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    user: str | None = None
    n: int = 1
    # nexusai's own (the openai SDK sends them as `extra_body={"filter": {...}}`), as POST
    # /context takes them: which episodes the turn may draw memories from, settings for
    # this turn only, and the turn's own time.
    filter: FilterIn | None = None
    settings: dict[str, Any] | None = None
    now: IsoTime | None = None

    @model_validator(mode="after")
    def _storable(self) -> Self:
        check_storable(self)  # the turn is stored: its text must be storable
        return self

    def options(self) -> dict[str, Any]:
        return {k: v for k, v in (self.model_extra or {}).items() if k in SAMPLING}

    def usage_asked(self) -> bool:
        stream_options = self.options().get("stream_options")
        return isinstance(stream_options, dict) and bool(stream_options.get("include_usage"))


# What an OpenAI client may ask that a memory turn cannot give: refused by name.
CANNOT = {
    "tools": "tool calls are not supported: nexusai answers with text",
    "tool_choice": "tool calls are not supported: nexusai answers with text",
    "functions": "function calls are not supported: nexusai answers with text",
    "function_call": "function calls are not supported: nexusai answers with text",
    "parallel_tool_calls": "tool calls are not supported: nexusai answers with text",
    "logprobs": "log probabilities are not passed on",
    "top_logprobs": "log probabilities are not passed on",
    "audio": "audio output is not supported",
    "modalities": "only text output is supported",
}


class Unsupported(NexusError):
    """A request field nexusai cannot honour: 400, naming the field."""

    status_code = 400

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


class OpenAIError(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str


class OpenAIErrorOut(BaseModel):
    """Errors of this router come as OpenAI's clients expect them."""

    error: OpenAIError


def _openai_errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The door's refusals (401, 403, 413, 415) come in OpenAI's shape too."""
    return {
        code: {"model": OpenAIErrorOut, "description": "An error, in OpenAI's shape"}
        for code in sorted({*codes, 401, 403, 413, 415})
    }


@router.get("/models", responses=_openai_errors())  # only the door can refuse it
def list_models(request: Request) -> dict[str, Any]:
    """`nexusai` (the configured LLM, with memory), and the configured LLM's own name."""
    llm: OpenAIChat | None = request.app.state.orchestration.llm
    names = [OUR_MODEL, *([llm.model] if llm else [])]
    return {
        "object": "list",
        "data": [{"id": n, "object": "model", "created": 0, "owned_by": "nexusai"} for n in names],
    }


@router.post("/chat/completions", responses=_openai_errors(404, 409, 422, 502, 503))
def chat_completions(
    request: Request,
    response: Response,
    body: Annotated[dict[str, Any], Body(description="OpenAI's chat completion request")],
    session_header: Annotated[str | None, Header(alias="X-Nexus-Session")] = None,
    project_header: Annotated[str | None, Header(alias="X-Nexus-Project")] = None,
) -> Any:
    """OpenAI's chat completion, with memory: the last user message is the turn's, the
    session is X-Nexus-Session (an id) or the request's `user` (a name, in the X-Nexus-Project
    header's project); `filter`, `settings` and `now` come as `extra_body`. A request sent
    again (an `Idempotency-Key` sent before, or the same body while the first runs, or
    after it when its answer never reached the client or the body carries the answers
    already given) is answered once."""
    orchestration: Orchestration = request.app.state.orchestration
    try:
        asked = _validated(body)
        project = _project(request, project_header)
        session_id = _session(orchestration, session_header, project, asked.user)
        if asked.stream:  # a stream is answered as it is made, so it is never replayed
            return _turn(request, orchestration, asked, session_id)

        def turn() -> Any:
            return _turn(request, orchestration, asked, session_id)

        last = partial(last_stored, orchestration.memory, session_id)
        # A body that carries the conversation names what the client was answered: the same
        # body again after the answer is a retry; a lone message may be said twice.
        history = any(m.role == "assistant" for m in asked.messages)
        return answered_once(request, response, body, turn, by_digest=last, carries_answers=history)
    except NexusError as exc:
        return _error(exc)


def _turn(
    request: Request,
    orchestration: Orchestration,
    asked: ChatCompletionIn,
    session_id: int,
) -> Any:
    scope = visible_session(request, session_id)
    message = _last_user_message(asked)
    check_message(request, message, "messages: the last user message")
    llm = require_llm(orchestration.llm)  # after the input's own 4xx, before any write
    rule = None if asked.filter is None else asked.filter.to_filter()
    turn = TurnRequest(session_id, message, rule=rule, now=asked.now, scope=scope)
    retried = _unanswered(orchestration, session_id, message)
    context = orchestration.chat_context(turn, _carried_recent(asked, retried))
    messages = _with_memories(context, asked.messages)
    model = None if asked.model == OUR_MODEL else asked.model
    # A retry of a turn whose answer failed finds its message stored, and reuses it.
    store_user_message(orchestration.memory, context)
    if asked.stream:
        pieces = _stream(orchestration, llm, context, messages, model, asked)
        return StreamingResponse(pieces, media_type="text/event-stream")
    answer = llm.completion(messages, model, asked.options())
    store_reply(orchestration.memory, context, answer.text)
    return _completion(model or llm.model, answer)


def _validated(body: dict[str, Any]) -> ChatCompletionIn:
    try:
        asked = ChatCompletionIn.model_validate(body)
    except ValidationError as exc:
        raise InvalidInput(_first_refusal(exc)) from None
    for key in asked.model_extra or {}:
        if key in CANNOT:
            raise Unsupported(f"{key}: {CANNOT[key]}", key)
        if key not in SAMPLING:
            raise Unsupported(f"unrecognized request argument supplied: {key}", key)
    if asked.n != 1:
        raise Unsupported("n: only one choice (n = 1) is supported", "n")
    for at, message in enumerate(asked.messages):
        _check_plain(at, message)
    for name, value in asked.options().items():
        _check_sampling(name, value)
    return asked


# OpenAI's ranges for the sampling fields that are numbers: checked here, so that a bad one
# is this request's 400 naming it, not the LLM's error after the turn was read.
NUMBERS = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "presence_penalty": (-2.0, 2.0),
    "frequency_penalty": (-2.0, 2.0),
}
WHOLE = {"max_tokens": 1, "max_completion_tokens": 1, "seed": None}
OBJECTS = ("logit_bias", "response_format", "stream_options")


def _check_sampling(name: str, value: Any) -> None:
    if value is None:
        return
    if name in NUMBERS:
        low, high = NUMBERS[name]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not low <= value <= high
        ):
            raise Unsupported(
                f"{name}: give a number from {low:g} to {high:g}, not {value!r}", name
            )
    elif name in WHOLE:
        least = WHOLE[name]
        whole = isinstance(value, int) and not isinstance(value, bool)
        if not whole or (least is not None and value < least):
            at_least = f" of at least {least}" if least is not None else ""
            raise Unsupported(f"{name}: give a whole number{at_least}, not {value!r}", name)
    elif name in OBJECTS and not isinstance(value, dict):
        raise Unsupported(f"{name}: give an object, not {value!r}", name)
    elif name == "stop" and not _stop_words(value):
        raise Unsupported(f"stop: give a string or a list of up to 4 strings, not {value!r}", name)


def _first_refusal(exc: ValidationError) -> str:
    """The first of pydantic's errors, named by its field (`filter.speaker: ...`), without
    pydantic's "Value error, "."""
    first = exc.errors()[0]
    where, said = refusal(first["loc"], first["msg"])
    named = re.match(r"([\w.\[\]]+): (.+)", said, re.DOTALL)
    if named:  # a check of a whole part names its field inside it
        where, said = f"{where}.{named[1]}", named[2]
    return f"{where}: {said}"


def _stop_words(value: Any) -> bool:
    if isinstance(value, str):
        return True
    return isinstance(value, list) and len(value) <= 4 and all(isinstance(v, str) for v in value)


# A history's tool traffic: an upstream needs it whole (a tool result after its call), and
# nexusai calls no tools, so a history that holds any is refused by name, never cut.
TOOL_FIELDS = ("tool_calls", "tool_call_id", "function_call")


def _check_plain(at: int, message: ChatMessage) -> None:
    said = [key for key in TOOL_FIELDS if (message.model_extra or {}).get(key) is not None]
    if message.role in ("tool", "function") or said:
        where = f"messages[{at}].{said[0] if said else 'role'}"
        raise Unsupported(
            f"{where}: tool calls are not supported: nexusai answers with text, and a history"
            " with tool calls or their results would reach the LLM without them; send the"
            " conversation's text only",
            "messages",
        )


def _session(
    orchestration: Orchestration, header: str | None, project: str | None, user: str | None
) -> int:
    if header is not None:
        return _session_id(header)  # an unknown one is the context's 404
    if user:
        require_llm(orchestration.llm)  # a session is made by name only for a turn that can run
        return orchestration.memory.resolve_session(project, user)
    raise InvalidInput(
        "say which conversation this is: an X-Nexus-Session header (a session id), or the"
        " request's user field (a session's name, in the X-Nexus-Project header's project)"
    )


def _project(request: Request, raw: str | None) -> str | None:
    """The project named by X-Nexus-Project; a project key names its own, or none."""
    header = None if raw is None else header_text(raw)
    principal = principal_of(request)
    if principal.admin or header is None or header == principal.project_name:
        return header if principal.admin else principal.project_name
    raise NotFound(f"project {header!r} does not exist")


def header_text(raw: str) -> str:
    """A header's text. HTTP headers are bytes that servers read as Latin-1, and clients
    that refuse other characters (the openai SDK does) send them percent-encoded, as
    JavaScript's `encodeURIComponent` does (RFC 8187): UTF-8 sent raw is read as UTF-8,
    then `%XX` is decoded (a literal % is sent as %25)."""
    try:
        text = raw.encode("latin-1").decode("utf-8")
    except UnicodeError:
        text = raw
    if re.search(r"%(?![0-9A-Fa-f]{2})", text):
        raise InvalidInput(
            f"X-Nexus-Project: {raw!r} has a % that starts no percent-encoded byte; send a"
            " literal % as %25 (encodeURIComponent does)"
        )
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise InvalidInput(
            f"X-Nexus-Project: {raw!r} is not UTF-8 once percent-decoded; encode the name"
            " with encodeURIComponent (Python: urllib.parse.quote)"
        ) from None


def _session_id(header: str) -> int:
    raw = header.strip()
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_ID:
        raise InvalidInput(f"X-Nexus-Session must be a session id (1 to 2**63 - 1), not {raw!r}")
    return int(raw)


def _carried_recent(asked: ChatCompletionIn, retried: bool) -> dict[str, Any]:
    """This turn's settings, its recent turns those the request carries: the session's
    latest episodes are left out of the memories as held by the prompt only when the
    client sent them (an Agents SDK model sends the new message alone, and turn 2 must
    know turn 1), and so is this very message when a failed try stored it (`retried`).
    `recentLimit` in `settings` caps what the history counts."""
    said = asked.messages[:-1] if asked.messages[-1].role == "user" else asked.messages
    carried = sum(1 for m in said if m.role in ("user", "assistant"))
    settings = dict(asked.settings or {})
    asked_limit = settings.get("recentLimit")
    if isinstance(asked_limit, int) and not isinstance(asked_limit, bool):
        carried = min(carried, asked_limit)
    return {**settings, "recentLimit": min(carried + retried, RECENT_MOST)}


def _unanswered(orchestration: Orchestration, session_id: int, message: str) -> bool:
    """Whether the session's last episode is this message, stored by a try that failed."""
    last = orchestration.memory.recent_episodes(session_id, 1)
    return bool(last) and is_unanswered_copy(last[-1], message)


RECENT_MOST = 100  # recentLimit's most


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
    asked: ChatCompletionIn,
) -> Iterator[str]:
    """OpenAI's chunks as server-sent events; the answer is stored when it is whole. With
    `stream_options.include_usage`, a last chunk carries the LLM's usage, as OpenAI's."""
    ident, name, pieces = _ident(), model or llm.model, []
    ending = Ending()
    try:
        for piece in llm.stream(messages, model, asked.options(), ending):
            pieces.append(piece)
            yield _event(_chunk(ident, name, {"content": piece}, None))
    except NexusError as exc:
        yield _event({"error": _error_body(exc)})
        return
    store_reply(orchestration.memory, context, "".join(pieces))
    yield _event(_chunk(ident, name, {}, ending.finish_reason or "stop"))
    if asked.usage_asked():
        usage = _usage(ending.usage)
        yield _event({**_chunk(ident, name, {}, None), "choices": [], "usage": usage})
    yield "data: [DONE]\n\n"


def _usage(given: Usage | None) -> dict[str, Any]:
    """The LLM's token counts as it sent them; zeros when it sent none."""
    return given or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def _completion(model: str, answer: Completion) -> dict[str, Any]:
    return {
        "id": _ident(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer.text},
                "finish_reason": answer.finish_reason,
            }
        ],
        "usage": _usage(answer.usage),
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
    """OpenAI's error object; the field at fault when there is one."""
    param = getattr(exc, "param", None) or _param_of(str(exc))
    shaped: dict[str, Any] = openai_error(exc.status_code, str(exc), param)["error"]
    return shaped


SETTING_NAMES = frozenset(setting.name for setting in SETTINGS)


def _param_of(message: str) -> str | None:
    """Our messages name the field first (`messages[0].role: ...`); a setting's refusal
    names the setting first (`contextBudget must be ...`), sent as `settings.NAME`."""
    head, colon, _ = message.partition(":")
    if colon and " " not in head:
        return head
    setting = re.match(r"(\w+) must be", message)
    return f"settings.{setting[1]}" if setting and setting[1] in SETTING_NAMES else None


def _error(exc: NexusError) -> JSONResponse:
    return JSONResponse({"error": _error_body(exc)}, status_code=exc.status_code)
