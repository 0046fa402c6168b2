"""Every endpoint, once, as a `Call`: what to send and how to read the answer. The two
clients only send calls, so they cannot drift apart."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from nexusai.client.errors import InvalidInputError
from nexusai.models import parse_time
from nexusai.refusals import refusal
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
    MarkedEpisodeOut,
    ProjectOut,
    RecalledOut,
    ScopeOut,
    ScoredEpisodeOut,
    SessionOut,
    StoredEpisodeOut,
)

T = TypeVar("T")


Settings = dict[str, int | float | str]  # GET /settings' names; an int stays an int


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
            return recalled(turn.parse(answer), k, standing)

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


def import_params(format: str, project: str | None) -> dict[str, str]:
    return {"format": format, **({"project": project} if project else {})}


def recalled(turn: ContextOut, k: int, standing: bool) -> list[RecalledOut]:
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
