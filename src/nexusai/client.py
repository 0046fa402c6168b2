"""A typed Python client for nexusai's HTTP API: `Client` (blocking) and `AsyncClient`.

    from nexusai.client import Client

    with Client() as nexus:                       # NEXUS_URL, NEXUS_API_KEY, or arguments
        project = nexus.create_project("home")
        session = nexus.create_session(project_id=project.id)
        nexus.add_episodes(session.id, [{"speaker": "user", "content": "My dog is Biscuit"}])
        context = nexus.context(session.id, "What is my dog called?", explain=True)

Every endpoint is described once, in `Endpoints`, as a `Call`; the two clients only send
calls (so they cannot drift apart). Answers come back as the models the API itself
answers with (`nexusai.schemas`); errors as `NexusAPIError` subclasses that carry the
API's message. Calls that change nothing are retried on connection errors; writes never
are (a write that may have landed is not sent twice).
"""

from __future__ import annotations

import inspect
import json
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, Concatenate, Generic, ParamSpec, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from nexusai.http import refusal
from nexusai.models import parse_time
from nexusai.schemas import (
    ChatOut,
    ContextOut,
    EditedEpisodeOut,
    EntityDetail,
    EntityOut,
    EpisodeBatchOut,
    EpisodeOut,
    FilterIn,
    ForgetOut,
    Health,
    ImportOut,
    MarkedEpisodeOut,
    ProjectOut,
    RecalledOut,
    ScopeOut,
    ScoredEpisodeOut,
    SessionOut,
    StoredEpisodeOut,
)

T = TypeVar("T")
P = ParamSpec("P")
Settings = dict[str, int | float | str]  # GET /settings' names; an int stays an int
DEFAULT_URL = "http://127.0.0.1:4000"


class NexusAPIError(Exception):
    """The service refused or failed a call; `detail` is its message."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail


class UnauthorizedError(NexusAPIError): ...


class ForbiddenError(NexusAPIError):
    """The key is valid but may not do this (read-only, or it needs the admin key)."""


class NotFoundError(NexusAPIError): ...


class ConflictError(NexusAPIError): ...


class TooLargeError(NexusAPIError): ...


class InvalidInputError(NexusAPIError): ...


class LLMFailedError(NexusAPIError): ...


class StorageFullError(NexusAPIError):
    """The service's disk is full: nothing of the write was kept; send it again later."""


class UnavailableError(NexusAPIError):
    """The service (or one it needs) is down or does not answer; status 0 when no
    connection could be made at all, `timed_out` when one was made and nothing came."""

    timed_out = False
    reason = ""  # the transport's error, when no answer came at all


_ERRORS: dict[int, type[NexusAPIError]] = {
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: TooLargeError,
    415: InvalidInputError,
    422: InvalidInputError,
    502: LLMFailedError,
    503: UnavailableError,
    507: StorageFullError,
}


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its answer."""

    method: str
    path: str
    parse: Callable[[Any], T]
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    safe: bool = False  # changes nothing: may be retried
    # A write the service answers once however often it is sent (`Idempotency-Key`, or a
    # chat turn's own digest): may be retried too.
    once: bool = False
    key: str | None = None  # sent as Idempotency-Key

    def tries(self, retries: int) -> int:
        """How many times it may be sent when no answer comes: once, unless it is safe to
        send again."""
        return retries + 1 if self.safe or self.once else 1

    def request(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        params = {k: v for k, v in self.params.items() if v is not None}
        headers = {"Idempotency-Key": self.key} if self.key else None
        # A datetime or date in a body (an episode's occurredAt) is sent as ISO 8601 text.
        body = None if self.json is None else to_jsonable_python(self.json)
        return client.build_request(
            self.method, self.path, json=body, params=params, headers=headers
        )


def _model(kind: type[Any]) -> Callable[[Any], Any]:
    adapter: TypeAdapter[Any] = TypeAdapter(kind)
    return adapter.validate_python


def _filter_query(filter: FilterIn | Mapping[str, Any] | None) -> dict[str, Any]:
    return {} if filter is None else checked_filter(filter).query()


def _filter_body(filter: FilterIn | Mapping[str, Any]) -> Any:
    return _body(checked_filter(filter))


def checked_filter(filter: FilterIn | Mapping[str, Any]) -> FilterIn:
    """Checked here, so a bad filter is an `InvalidInputError` (422, as the service would
    answer) before anything is sent, its detail worded as the service words it."""
    if isinstance(filter, FilterIn):
        return filter
    try:
        return FilterIn.model_validate(filter)
    except ValidationError as exc:
        said = "; ".join(_said(e["loc"], e["msg"]) for e in exc.errors(include_url=False))
        raise InvalidInputError(422, said) from None


def _said(loc: tuple[Any, ...], message: str) -> str:
    """A filter's refusal as the service words it: `filter.speaker: ...`."""
    field, said = refusal(loc, message, located=False)
    return f"filter: {said}" if field == "body" else f"filter.{field}: {said}"


def _nothing(_: Any) -> None:
    return None


def _text(answer: Any) -> str:
    return str(answer)


def _body(model: BaseModel | dict[str, Any]) -> Any:
    return (
        model.model_dump(by_alias=True, exclude_unset=True, mode="json")
        if isinstance(model, BaseModel)
        else model
    )


class Endpoints:
    """Every endpoint, once: what to send and how to read the answer."""

    @staticmethod
    def create_project(name: str, retention_days: int | None = None) -> Call[ProjectOut]:
        """`retention_days`: each episode is kept that long after it was said."""
        body: dict[str, Any] = {"name": name}
        if retention_days is not None:
            body["retentionDays"] = retention_days
        return Call("POST", "/projects", _model(ProjectOut), body)

    @staticmethod
    def set_retention(project_id: int, days: int | None) -> Call[ProjectOut]:
        """Keeps the project's episodes `days` after they were said (None: no limit but
        each episode's own expiry); every deadline is set anew at once."""
        body = {"retentionDays": days}
        return Call("PATCH", f"/projects/{project_id}", _model(ProjectOut), body)

    @staticmethod
    def export_project(project_id: int) -> Call[str]:
        """The project as JSONL, in the format `import_file` reads."""
        return Call("GET", f"/projects/{project_id}/export", _text, safe=True)

    @staticmethod
    def list_projects(limit: int = 100, offset: int = 0) -> Call[list[ProjectOut]]:
        params = {"limit": limit, "offset": offset}
        return Call("GET", "/projects", _model(list[ProjectOut]), params=params, safe=True)

    @staticmethod
    def get_project(project_id: int) -> Call[ProjectOut]:
        return Call("GET", f"/projects/{project_id}", _model(ProjectOut), safe=True)

    @staticmethod
    def delete_project(project_id: int) -> Call[None]:
        return Call("DELETE", f"/projects/{project_id}", _nothing)

    @staticmethod
    def create_session(project_id: int | None = None, title: str | None = None) -> Call[SessionOut]:
        body = {"projectId": project_id, "title": title}
        return Call("POST", "/sessions", _model(SessionOut), body)

    @staticmethod
    def resolve_session(*, title: str, project: str | None = None) -> Call[SessionOut]:
        """The session titled so in the named project (or in none), created when missing.
        Keyword arguments only: the TypeScript client takes them as (title, project), and a
        call in the other order must not make the wrong project (`clients/signatures.json`)."""
        body = {"project": project, "title": title}
        return Call("POST", "/sessions/resolve", _model(SessionOut), body)

    @staticmethod
    def list_sessions(
        project_id: int | None = None, limit: int = 100, offset: int = 0
    ) -> Call[list[SessionOut]]:
        params = {"projectId": project_id, "limit": limit, "offset": offset}
        return Call("GET", "/sessions", _model(list[SessionOut]), params=params, safe=True)

    @staticmethod
    def get_session(session_id: int) -> Call[SessionOut]:
        return Call("GET", f"/sessions/{session_id}", _model(SessionOut), safe=True)

    @staticmethod
    def update_session(session_id: int, **changes: Any) -> Call[SessionOut]:
        """`title=...` and/or `project_id=...` (None moves it out of its project)."""
        body = {("projectId" if k == "project_id" else k): v for k, v in changes.items()}
        return Call("PATCH", f"/sessions/{session_id}", _model(SessionOut), body)

    @staticmethod
    def delete_session(session_id: int) -> Call[None]:
        return Call("DELETE", f"/sessions/{session_id}", _nothing)

    @staticmethod
    def add_episodes(
        session_id: int,
        episodes: Sequence[dict[str, Any] | BaseModel],
        idempotency_key: str | None = None,
    ) -> Call[list[StoredEpisodeOut]]:
        """A batch, all or nothing: each `{"speaker", "content", "occurredAt"?,
        "imageCaption"?, "metadata"?}`. Stored once however often it is sent with the same
        `idempotency_key` (one is made for each call when none is given)."""
        body = {"episodes": [_body(e) for e in episodes]}
        parse = _model(EpisodeBatchOut)
        path = f"/sessions/{session_id}/episodes"
        key = idempotency_key or uuid.uuid4().hex
        return Call("POST", path, lambda j: parse(j).episodes, body, once=True, key=key)

    @staticmethod
    def add_episodes_named(
        project: str | None,
        title: str,
        episodes: Sequence[dict[str, Any] | BaseModel],
        idempotency_key: str | None = None,
    ) -> Call[list[StoredEpisodeOut]]:
        """`add_episodes` into the session `resolve_session` names; a batch that is refused
        makes no project or session."""
        body = {"project": project, "title": title, "episodes": [_body(e) for e in episodes]}
        parse = _model(EpisodeBatchOut)
        key = idempotency_key or uuid.uuid4().hex
        path = "/sessions/resolve/episodes"
        return Call("POST", path, lambda j: parse(j).episodes, body, once=True, key=key)

    @staticmethod
    def list_episodes(
        session_id: int,
        limit: int = 100,
        offset: int = 0,
        filter: FilterIn | Mapping[str, Any] | None = None,
    ) -> Call[list[EpisodeOut]]:
        """A session's episodes in time order; with a `filter`, only those it keeps (a
        metadata value is looked up through an index, not by reading every episode)."""
        params = {"limit": limit, "offset": offset, **_filter_query(filter)}
        path = f"/sessions/{session_id}/episodes"
        return Call("GET", path, _model(list[EpisodeOut]), params=params, safe=True)

    @staticmethod
    def get_episode(episode_id: int) -> Call[MarkedEpisodeOut]:
        return Call("GET", f"/episodes/{episode_id}", _model(MarkedEpisodeOut), safe=True)

    @staticmethod
    def update_episode(episode_id: int, changes: dict[str, Any]) -> Call[EditedEpisodeOut]:
        """camelCase fields as the API takes them; `metadata` is a JSON merge patch."""
        return Call("PATCH", f"/episodes/{episode_id}", _model(EditedEpisodeOut), changes)

    @staticmethod
    def pin(episode_id: int, pinned: bool = True) -> Call[EditedEpisodeOut]:
        """Pinned, every turn of the episode's scope carries it (under `standing`)."""
        return Endpoints.update_episode(episode_id, {"pinned": pinned})

    @staticmethod
    def forget(
        session_ids: Sequence[int] | None = None,
        filter: FilterIn | Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> Call[ForgetOut]:
        """Deletes the episodes of these sessions (all the key sees when None) that
        `filter` keeps; `dry_run` only counts them. An empty filter is refused, not taken
        for none: one built up in an app that ends up empty must not forget whole sessions."""
        if filter is not None and checked_filter(filter).to_filter().is_empty():
            raise InvalidInputError(
                422, "filter: it is empty; leave filter out to forget the whole session"
            )
        params: dict[str, Any] = {
            "sessionIds": None if session_ids is None else ",".join(map(str, session_ids)),
            "dryRun": "true" if dry_run else None,
            **_filter_query(filter),
        }
        return Call("DELETE", "/episodes", _model(ForgetOut), params=params)

    @staticmethod
    def delete_episode(episode_id: int) -> Call[None]:
        return Call("DELETE", f"/episodes/{episode_id}", _nothing)

    @staticmethod
    def search(
        q: str,
        session_ids: Sequence[int] | None = None,
        limit: int = 20,
        budget: int = 0,
        explain: bool = False,
        filter: FilterIn | Mapping[str, Any] | None = None,
    ) -> Call[list[ScoredEpisodeOut]]:
        """`explain`: each result says where it matched (`matched_in`); `filter` (a
        `FilterIn` or its JSON) is applied inside the search."""
        scope = None if session_ids is None else ",".join(map(str, session_ids))
        params = {"q": q, "sessionIds": scope, "limit": limit, "budget": budget or None}
        params["explain"] = "true" if explain else None
        params |= _filter_query(filter)
        model = _model(list[ScoredEpisodeOut])
        return Call("GET", "/episodes/search", model, params=params, safe=True)

    @staticmethod
    def standing(
        session_ids: Sequence[int] | None = None,
        limit: int = 100,
        filter: FilterIn | Mapping[str, Any] | None = None,
    ) -> Call[list[MarkedEpisodeOut]]:
        scope = None if session_ids is None else ",".join(map(str, session_ids))
        params = {"sessionIds": scope, "limit": limit, **_filter_query(filter)}
        model = _model(list[MarkedEpisodeOut])
        return Call("GET", "/episodes/standing", model, params=params, safe=True)

    @staticmethod
    def context(
        session_id: int,
        message: str,
        explain: bool = False,
        legs: bool = False,
        settings: Mapping[str, float | str] | None = None,
        budget: int | None = None,
        filter: FilterIn | Mapping[str, Any] | None = None,
        now: datetime | str | None = None,
    ) -> Call[ContextOut]:
        """`legs`: both legs' full lists too; `settings`: for this turn only, not saved;
        `budget`: the memories' tokens at most (`contextBudget` for this turn); `filter`
        (a `FilterIn` or its JSON): only the episodes it keeps, chosen inside the search;
        `now`: the turn's own time, which a time the message names is read against
        (`timeAware`)."""
        body = turn_body(session_id, message, settings, budget, filter, now)
        body["explain"] = explain
        if legs:
            body["legs"] = True
        return Call("POST", "/context", _model(ContextOut), body, safe=True)

    @staticmethod
    def recall(
        session_id: int,
        query: str,
        k: int = 10,
        budget: int | None = None,
        filter: FilterIn | Mapping[str, Any] | None = None,
        recent: int = 0,
        standing: bool = True,
    ) -> Call[list[RecalledOut]]:
        """A search of the session's memory, not a chat turn: its latest messages are
        searched too (but its latest `recent`, the turn the caller is in), the `k` best
        matches; with a `budget`, what fits that many tokens, at most `k` (long ones as
        excerpts); with a `filter`, only what it keeps. The turn's standing memories
        (pinned, the user's rules and preferences) come after the `k` best, each marked
        (`standing`), never in their place; `standing=False` leaves them out, and ranks a
        rule as any other episode (a store's search)."""
        if not 1 <= k <= 100:
            raise InvalidInputError(422, f"k: give a whole number from 1 to 100, not {k}")
        settings: dict[str, float] = {"recentLimit": recent, "semanticLimit": k}
        if budget is not None:
            settings["contextBudget"] = budget
        if not standing:
            settings["standingLimit"] = 0
        turn = Endpoints.context(session_id, query, True, settings=settings, filter=filter)

        def parse(answer: Any) -> list[RecalledOut]:
            return _recalled(turn.parse(answer), k, standing)

        return Call(turn.method, turn.path, parse, turn.json, safe=True)

    @staticmethod
    def chat(
        session_id: int,
        message: str,
        idempotency_key: str | None = None,
        settings: Mapping[str, float | str] | None = None,
        budget: int | None = None,
        filter: FilterIn | Mapping[str, Any] | None = None,
        now: datetime | str | None = None,
    ) -> Call[ChatOut]:
        """One turn. The same message sent again while its turn runs, or after it when the
        answer was lost to a time-out, is answered once; said again after its answer, it is
        a new turn. An `idempotency_key` says which calls are the same turn instead.
        `settings`, `budget`, `filter` and `now` as `context` takes them."""
        body = turn_body(session_id, message, settings, budget, filter, now)
        return Call("POST", "/chat", _model(ChatOut), body, once=True, key=idempotency_key)

    @staticmethod
    def get_settings() -> Call[Settings]:
        """Weights as floats, limits as ints, as the API answers them."""
        return Call("GET", "/settings", _model(Settings), safe=True)

    @staticmethod
    def update_settings(**changes: float | str) -> Call[Settings]:
        """`semanticWeight=0.5`, `fusion="learned"`, ... as the API names them."""
        return Call("PATCH", "/settings", _model(Settings), changes)

    @staticmethod
    def entities(
        session_id: int, q: str | None = None, prefix: str | None = None, limit: int = 20
    ) -> Call[list[EntityOut]]:
        params = {"sessionId": session_id, "q": q, "prefix": prefix, "limit": limit}
        return Call("GET", "/entities", _model(list[EntityOut]), params=params, safe=True)

    # -- what the orchestration service asks the memory service (the legs of a turn) --

    @staticmethod
    def health() -> Call[Health]:
        return Call("GET", "/health", _model(Health), safe=True)

    @staticmethod
    def scope(session_id: int) -> Call[ScopeOut]:
        return Call("GET", f"/sessions/{session_id}/scope", _model(ScopeOut), safe=True)

    @staticmethod
    def recent(session_id: int, limit: int) -> Call[list[EpisodeOut]]:
        path = f"/sessions/{session_id}/recent"
        return Call("GET", path, _model(list[EpisodeOut]), params={"limit": limit}, safe=True)

    @staticmethod
    def vector_episodes(
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
        filter: FilterIn | None = None,
    ) -> Call[list[ScoredEpisodeOut]]:
        body = {
            "vector": list(vector),
            "sessionIds": None if session_ids is None else list(session_ids),
            "excludeIds": list(exclude_ids),
            "limit": limit,
            **({} if filter is None else {"filter": _filter_body(filter)}),
        }
        parse = _model(list[ScoredEpisodeOut])
        return Call("POST", "/vectors/search/episodes", parse, body, safe=True)

    @staticmethod
    def entity_search(
        vector: Sequence[float], session_ids: Sequence[int], limit: int
    ) -> Call[list[EntityOut]]:
        body = {"vector": list(vector), "sessionIds": list(session_ids), "limit": limit}
        return Call("POST", "/entities/search", _model(list[EntityOut]), body, safe=True)

    @staticmethod
    def entity(entity_id: int, limit: int = 20, offset: int = 0) -> Call[EntityDetail]:
        params = {"limit": limit, "offset": offset}
        return Call("GET", f"/entities/{entity_id}", _model(EntityDetail), params=params, safe=True)


@dataclass(frozen=True)
class ChatEvent:
    """One server-sent event of a streamed chat turn: a `ContextEvent`, `DeltaEvent`s, then
    a `DoneEvent` or an `ErrorEvent`; `data` is the event's JSON as sent."""

    event: str
    data: dict[str, Any]


@dataclass(frozen=True)
class ContextEvent(ChatEvent):
    """What the turn gave the LLM, before it answers."""

    context: ContextOut


@dataclass(frozen=True)
class DeltaEvent(ChatEvent):
    """The next piece of the reply."""

    text: str


@dataclass(frozen=True)
class DoneEvent(ChatEvent):
    """The whole reply, and the episodes both messages are stored as."""

    reply: str
    user_episode_id: int
    assistant_episode_id: int | None


@dataclass(frozen=True)
class ErrorEvent(ChatEvent):
    """The LLM failed; the user's message is stored (`user_episode_id`)."""

    detail: str
    user_episode_id: int | None


def turn_body(
    session_id: int,
    message: str,
    settings: Mapping[str, float | str] | None = None,
    budget: int | None = None,
    filter: FilterIn | Mapping[str, Any] | None = None,
    now: datetime | str | None = None,
) -> dict[str, Any]:
    """What `/context` and `/chat` both take: the session, the message, this turn's own
    settings (`budget` is its contextBudget), its filter and its time (a datetime, or ISO
    8601 text, checked here)."""
    body: dict[str, Any] = {"sessionId": session_id, "message": message}
    if now is not None:
        try:
            body["now"] = parse_time(now).isoformat()
        except ValueError as exc:
            raise InvalidInputError(422, f"now: {exc}") from None
    if filter is not None:
        body["filter"] = _filter_body(filter)
    chosen = {**(settings or {}), **({} if budget is None else {"contextBudget": budget})}
    if chosen:
        body["settings"] = chosen
    return body


def chat_event(event: str, data: dict[str, Any]) -> ChatEvent:
    """The typed event for a server-sent event's name and JSON."""
    if event == "context":
        return ContextEvent(event, data, ContextOut.model_validate(data))
    if event == "delta":
        return DeltaEvent(event, data, str(data["text"]))
    if event == "done":
        reply = str(data.get("reply") or "")
        return DoneEvent(event, data, reply, data["userEpisodeId"], data.get("assistantEpisodeId"))
    if event == "error":
        return ErrorEvent(event, data, str(data.get("detail")), data.get("userEpisodeId"))
    return ChatEvent(event, data)


def default_url() -> str:
    """Where a service on this machine listens when NEXUS_URL is not set: loopback, on
    NEXUS_PORT when that is a port (as `nexus serve` reads it), else 4000."""
    port = os.environ.get("NEXUS_PORT", "").strip()
    if port.isdigit() and 1 <= int(port) <= 65535:
        return f"http://127.0.0.1:{int(port)}"
    return DEFAULT_URL


def _settings(base_url: str | None, api_key: str | None) -> tuple[str, dict[str, str]]:
    url = (base_url or os.environ.get("NEXUS_URL") or default_url()).rstrip("/")
    key = api_key or os.environ.get("NEXUS_API_KEY", "").split(",")[0].strip()
    return url, ({"Authorization": f"Bearer {key}"} if key else {})


def _checked(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            detail = str(response.json()["detail"])
        except (ValueError, KeyError, TypeError):
            detail = response.text[:300]
        raise _ERRORS.get(response.status_code, NexusAPIError)(response.status_code, detail)
    if response.headers.get("content-type", "").startswith("application/x-ndjson"):
        return response.text  # an export: JSON lines, given as they came
    return response.json() if response.content else None


def _import_params(format: str, project: str | None) -> dict[str, str]:
    return {"format": format, **({"project": project} if project else {})}


def _counted(stream: IO[bytes], progress: Callable[[int], None] | None) -> Iterator[bytes]:
    """The file in 64 KiB pieces; `progress` is told the bytes sent so far."""
    sent = 0
    while chunk := stream.read(1 << 16):
        sent += len(chunk)
        if progress:
            progress(sent)
        yield chunk


def _unreachable(url: str, exc: Exception) -> UnavailableError:
    reason = type(exc).__name__
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        detail = f"no nexusai service answers at {url} ({reason})"
    elif isinstance(exc, httpx.TimeoutException):
        detail = (
            f"the request to {url} timed out ({reason}): the service may have applied it."
            " Chat turns and episode batches are answered once, so sending the same call"
            " again is safe; raise the client's timeout for long LLM answers"
        )
    else:
        detail = f"the connection to {url} failed ({reason}): the request may have been applied"
    error = UnavailableError(0, detail)
    error.timed_out = isinstance(exc, httpx.TimeoutException)
    error.reason = type(exc).__name__
    return error


class _Events:
    """Server-sent events read line by line, as they arrive (both clients feed it)."""

    def __init__(self) -> None:
        self._event = ""

    def feed(self, line: str) -> ChatEvent | None:
        if line.startswith("event: "):
            self._event = line[7:]
        elif line.startswith("data: "):
            return chat_event(self._event, json.loads(line[6:]))
        return None


def _blocking(build: Callable[P, Call[T]]) -> Callable[Concatenate[Client, P], T]:
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.send(build(*args, **kwargs))

    return _described(method, build)


def _awaiting(build: Callable[P, Call[T]]) -> Callable[Concatenate[AsyncClient, P], Awaitable[T]]:
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.send(build(*args, **kwargs))

    return _described(method, build)


M = TypeVar("M", bound=Callable[..., Any])


def _described(method: M, build: Callable[..., Any]) -> M:
    """The method shows the endpoint's own name, parameters, answer and doc (for help(),
    IDEs and the docs), not `(*args, **kwargs)`."""
    signature = inspect.signature(build)
    answer = str(signature.return_annotation)
    if answer.startswith("Call[") and answer.endswith("]"):
        answer = answer[5:-1]  # what the method returns: what the call reads
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self_param, *signature.parameters.values()], return_annotation=answer
    )
    method.__name__ = method.__qualname__ = build.__name__
    method.__doc__ = build.__doc__
    return method


def _recalled(turn: ContextOut, k: int, standing: bool) -> list[RecalledOut]:
    """The turn's `k` best memories in their order (one also standing, without a budget,
    keeps its place and is marked), then, with `standing`, the standing ones not among
    them."""
    marks = {kept.id: "pinned" if kept.pinned else kept.standing for kept in turn.standing or []}
    best = [
        RecalledOut.model_validate({**m.model_dump(), "standing": marks.get(m.id)})
        for m in turn.memories[:k]
    ]
    if not standing:
        return best
    shown = {m.id for m in best}
    after = [
        RecalledOut.model_validate(
            {**kept.model_dump(exclude={"pinned", "similarity"}), "standing": marks[kept.id]}
        )
        for kept in turn.standing or []
        if kept.id not in shown
    ]
    return best + after


class BaseClient:
    """What the blocking and the async client share, as httpx's two clients do: where the
    service is, its key, and when a call that could not reach it is tried again."""

    def __init__(self, base_url: str | None, api_key: str | None, retries: int) -> None:
        self.url, self.headers = _settings(base_url, api_key)
        self.retries = retries

    def attempts(self, call: Call[Any]) -> range:
        """The tries a call gets: a write that is not known to be safe to repeat gets one."""
        return range(call.tries(self.retries))

    def unreachable(self, call: Call[Any], attempt: int, exc: httpx.TransportError) -> None:
        """Raises UnavailableError after a call's last try; after any other, returns."""
        if attempt == call.tries(self.retries) - 1:
            raise _unreachable(self.url, exc) from None


class Client(BaseClient):
    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, retries)
        self._http = httpx.Client(
            base_url=self.url, headers=self.headers, timeout=timeout, transport=transport
        )

    def send(self, call: Call[T]) -> T:
        for attempt in self.attempts(call):
            try:
                return call.parse(_checked(self._http.send(call.request(self._http))))
            except httpx.TransportError as exc:
                self.unreachable(call, attempt, exc)
        raise AssertionError("unreachable")

    def chat_stream(self, session_id: int, message: str, **turn: Any) -> Iterator[ChatEvent]:
        """The turn as it is made: `context`, then `delta`s, then `done` (or `error`);
        `settings`, `budget`, `filter` and `now` as `chat` takes them."""
        body = {**turn_body(session_id, message, **turn), "stream": True}
        try:
            with self._http.stream("POST", "/chat", json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    _checked(response)
                events = _Events()
                for line in response.iter_lines():
                    if (event := events.feed(line)) is not None:
                        yield event
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from None

    def import_file(
        self,
        stream: IO[bytes],
        format: str,
        project: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> ImportOut:
        """Streams a file to `POST /import`; `progress` is told the bytes sent so far."""

        params = _import_params(format, project)
        try:
            response = self._http.post("/import", params=params, content=_counted(stream, progress))
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from None
        return ImportOut.model_validate(_checked(response))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    create_project = _blocking(Endpoints.create_project)
    list_projects = _blocking(Endpoints.list_projects)
    get_project = _blocking(Endpoints.get_project)
    delete_project = _blocking(Endpoints.delete_project)
    set_retention = _blocking(Endpoints.set_retention)
    export_project = _blocking(Endpoints.export_project)
    create_session = _blocking(Endpoints.create_session)
    list_sessions = _blocking(Endpoints.list_sessions)
    get_session = _blocking(Endpoints.get_session)
    update_session = _blocking(Endpoints.update_session)
    resolve_session = _blocking(Endpoints.resolve_session)
    delete_session = _blocking(Endpoints.delete_session)
    add_episodes = _blocking(Endpoints.add_episodes)
    add_episodes_named = _blocking(Endpoints.add_episodes_named)
    list_episodes = _blocking(Endpoints.list_episodes)
    get_episode = _blocking(Endpoints.get_episode)
    update_episode = _blocking(Endpoints.update_episode)
    pin = _blocking(Endpoints.pin)
    forget = _blocking(Endpoints.forget)
    delete_episode = _blocking(Endpoints.delete_episode)
    standing = _blocking(Endpoints.standing)
    search = _blocking(Endpoints.search)
    context = _blocking(Endpoints.context)
    recall = _blocking(Endpoints.recall)
    chat = _blocking(Endpoints.chat)
    get_settings = _blocking(Endpoints.get_settings)
    update_settings = _blocking(Endpoints.update_settings)
    entities = _blocking(Endpoints.entities)
    entity = _blocking(Endpoints.entity)


class AsyncClient(BaseClient):
    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, retries)
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=self.headers, timeout=timeout, transport=transport
        )

    async def send(self, call: Call[T]) -> T:
        for attempt in self.attempts(call):
            try:
                return call.parse(_checked(await self._http.send(call.request(self._http))))
            except httpx.TransportError as exc:
                self.unreachable(call, attempt, exc)
        raise AssertionError("unreachable")

    async def chat_stream(
        self, session_id: int, message: str, **turn: Any
    ) -> AsyncIterator[ChatEvent]:
        body = {**turn_body(session_id, message, **turn), "stream": True}
        try:
            async with self._http.stream("POST", "/chat", json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    _checked(response)
                events = _Events()
                async for line in response.aiter_lines():
                    if (event := events.feed(line)) is not None:
                        yield event
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from None

    async def import_file(
        self,
        stream: IO[bytes],
        format: str,
        project: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> ImportOut:
        """Streams a file to `POST /import`; `progress` is told the bytes sent so far."""

        async def chunks() -> AsyncIterator[bytes]:  # httpx's async client wants an async body
            for chunk in _counted(stream, progress):
                yield chunk

        params = _import_params(format, project)
        try:
            response = await self._http.post("/import", params=params, content=chunks())
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from None
        return ImportOut.model_validate(_checked(response))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    create_project = _awaiting(Endpoints.create_project)
    list_projects = _awaiting(Endpoints.list_projects)
    get_project = _awaiting(Endpoints.get_project)
    delete_project = _awaiting(Endpoints.delete_project)
    set_retention = _awaiting(Endpoints.set_retention)
    export_project = _awaiting(Endpoints.export_project)
    create_session = _awaiting(Endpoints.create_session)
    list_sessions = _awaiting(Endpoints.list_sessions)
    get_session = _awaiting(Endpoints.get_session)
    update_session = _awaiting(Endpoints.update_session)
    resolve_session = _awaiting(Endpoints.resolve_session)
    delete_session = _awaiting(Endpoints.delete_session)
    add_episodes = _awaiting(Endpoints.add_episodes)
    add_episodes_named = _awaiting(Endpoints.add_episodes_named)
    list_episodes = _awaiting(Endpoints.list_episodes)
    get_episode = _awaiting(Endpoints.get_episode)
    update_episode = _awaiting(Endpoints.update_episode)
    pin = _awaiting(Endpoints.pin)
    forget = _awaiting(Endpoints.forget)
    delete_episode = _awaiting(Endpoints.delete_episode)
    standing = _awaiting(Endpoints.standing)
    search = _awaiting(Endpoints.search)
    context = _awaiting(Endpoints.context)
    recall = _awaiting(Endpoints.recall)
    chat = _awaiting(Endpoints.chat)
    get_settings = _awaiting(Endpoints.get_settings)
    update_settings = _awaiting(Endpoints.update_settings)
    entities = _awaiting(Endpoints.entities)
    entity = _awaiting(Endpoints.entity)
