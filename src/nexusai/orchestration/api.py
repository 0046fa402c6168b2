"""The orchestration service's HTTP API: settings, context and chat."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import Field, create_model

from nexusai.access import check_project, principal_of
from nexusai.config import RETRIEVAL
from nexusai.errors import InvalidInput
from nexusai.http import StrictJSONRoute, errors
from nexusai.idempotency import answered_once
from nexusai.keywords import query_terms
from nexusai.models import Episode, Scope
from nexusai.orchestration.chat import (
    ChatFailed,
    chat_events,
    chat_turn,
    last_stored,
    require_llm,
)
from nexusai.orchestration.context import Context
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.layout import memory_block, memory_tokens
from nexusai.orchestration.service import Orchestration
from nexusai.orchestration.settings import SETTINGS, Value
from nexusai.orchestration.turn import TurnRequest
from nexusai.orchestration.turn.sources import SOURCES
from nexusai.ranking.model import probability
from nexusai.schemas import (
    ChatOut,
    ContextOut,
    EntityOut,
    EpisodeOut,
    ExcerptOut,
    FilterIn,
    Id,
    IsoTime,
    LegsOut,
    MarkedEpisodeOut,
    MemoryOut,
    MovedOut,
    StandingOut,
    StrictCamelModel,
    TimeWindowOut,
)

router = APIRouter(route_class=StrictJSONRoute)

_SETTING_FIELDS: dict[str, Any] = {
    s.name: (
        Literal[s.choices] if s.choices else s.kind,
        Field(description=f"{s.description} ({s.allowed})"),
    )
    for s in SETTINGS
}
SettingsOut: Any = create_model("Settings", **_SETTING_FIELDS)  # from the one SETTINGS table


def orchestration_of(request: Request) -> Orchestration:
    orchestration: Orchestration = request.app.state.orchestration
    return orchestration


def visible_session(request: Request, session_id: int) -> Scope | None:
    """The session's scope, read to check that the caller's key sees it (the same 404 as a
    missing one if not), for its turn to use; None for the admin, who sees every session:
    its turn reads the scope beside its other work."""
    principal = principal_of(request)
    if principal.admin:
        return None
    scope = orchestration_of(request).memory.scope(session_id)
    check_project(principal, scope.project_id, f"session {session_id}")
    return scope


class TurnIn(StrictCamelModel):
    session_id: Id
    message: str = Field(min_length=1, examples=["What did I name my dog?"])
    filter: FilterIn | None = Field(
        default=None,
        description="Only the episodes it keeps are memories or standing ones this turn,"
        " chosen inside both searches: semanticLimit come back whenever that many match",
        examples=[{"after": "2026-03-01T00:00:00Z", "speaker": ["user"]}],
    )

    now: IsoTime | None = Field(
        default=None,
        strict=False,
        description="The turn's own time (ISO 8601), which a time the message names is read"
        " against (timeAware); for replaying an old chat. Now when left out",
    )
    settings: dict[str, Any] | None = Field(
        default=None,
        description="Settings for this turn only, any of GET /settings' names; checked like"
        " PATCH /settings, never saved",
        examples=[{"contextBudget": 1000, "fusion": "learned"}],
    )

    def turn(self, scope: Scope | None, explain: bool = False, legs: bool = False) -> TurnRequest:
        """The turn this body asks for (`checked` first), in the session's `scope` when the
        key's check read it."""
        rule = None if self.filter is None else self.filter.to_filter()
        return TurnRequest(
            self.session_id,
            self.message,
            rule=rule,
            now=self.now,
            explain=explain,
            legs=legs,
            scope=scope,
        )

    def checked(self, request: Request) -> Scope | None:
        """The session's scope when the key's check read it, once the message is checked."""
        scope = visible_session(request, self.session_id)
        check_message(request, self.message, "message")
        return scope


def check_message(request: Request, message: str, field: str) -> None:
    """A turn's message: some text, within NEXUS_MAX_QUERY_CHARS, on every face."""
    limit = request.app.state.config.max_query_chars
    if not message.strip():
        raise InvalidInput(f"{field} must not be empty or only whitespace")
    if len(message) > limit:
        raise InvalidInput(
            f"{field} is {len(message)} characters; the limit is {limit}"
            " (NEXUS_MAX_QUERY_CHARS): send a shorter message, or raise the limit"
        )


class ContextIn(TurnIn):
    explain: bool = Field(
        default=False,
        description="Add score and both ranks to each memory (and, at fusion learned, the"
        " three features that moved it most)",
    )
    legs: bool = Field(
        default=False,
        description="Add both legs' full ranked lists (asked whatever their weights) and the"
        " message's keyword terms, to re-fuse at other weights without asking again",
    )


class ChatIn(TurnIn):
    stream: bool = Field(default=False, description="Stream the reply as server-sent events")


def legs_out(message: str, lists: Mapping[str, list[Episode]]) -> LegsOut:
    episodes = {episode.id: episode for found in lists.values() for episode in found}
    ids = {name: [episode.id for episode in found] for name, found in lists.items()}
    return LegsOut(
        semantic=ids.get("semantic", []),
        keyword=ids.get("keyword", []),
        lists=ids,
        terms=query_terms(message),
        rrf_k=RETRIEVAL.RRF_K,
        episodes=[EpisodeOut.model_validate(e) for e in episodes.values()],
    )


def context_out(context: Context, explain: bool) -> ContextOut:
    out = ContextOut(
        session_id=context.session_id,
        recent=[EpisodeOut.model_validate(e) for e in context.recent],
        memories=[_memory(fused, context.budget, explain) for fused in context.memories],
        entities=[EntityOut.model_validate(e) for e in context.entities],
        warnings=context.warnings,
        prompt=memory_block(context),
    )
    if context.lists is not None:
        out.legs = legs_out(context.message, context.lists)
    if context.standing:
        out.standing = [_standing(fused) for fused in context.standing]
    if context.window is not None:
        window = context.window
        out.time_window = TimeWindowOut(after=window.start, before=window.end, said=window.said)
    if context.budget:
        out.tokens = memory_tokens(context)
        out.budget = context.budget
    return out


_EPISODE = tuple(EpisodeOut.model_fields)  # what a memory says of its episode


def _memory(fused: FusedEpisode, budget: int, explain: bool) -> MemoryOut:
    # Only the episode's own fields, so that the leg's score never shows as the memory's;
    # from a dict, since validating from another model's attributes cost 0.07 ms a memory.
    memory = MemoryOut.model_validate({name: getattr(fused.episode, name) for name in _EPISODE})
    if budget:  # only then: a turn without a budget is the spec's, byte for byte
        _packed(memory, fused)
    if explain:
        memory.score = fused.score
        memory.ranks = dict(fused.ranks)
        memory.semantic_rank = fused.ranks.get("semantic")  # the spec's two, by their names
        memory.keyword_rank = fused.ranks.get("keyword")
        if fused.moved:
            memory.features = [MovedOut.model_validate(m) for m in fused.moved]
        if fused.placed_by:  # set only when there is one: RRF turns show no null
            memory.placed_by = fused.placed_by
            memory.probability = probability(fused.score)
    return memory


def _standing(fused: FusedEpisode) -> StandingOut:
    marked = MarkedEpisodeOut.model_validate(fused.episode).model_dump()
    memory = StandingOut(**marked, tokens=fused.tokens)
    memory.similarity = None if fused.episode.pinned else fused.score  # set: null is said
    return memory


def _packed(memory: MemoryOut, fused: FusedEpisode) -> None:
    """What packing made of a memory: its cost, and the passage given of a long one."""
    memory.tokens = fused.tokens
    if fused.excerpt is not None:
        start, end = fused.excerpt
        memory.content = fused.content
        memory.excerpt = ExcerptOut(start=start, end=end, length=len(fused.episode.content))


@router.get("/settings", tags=["settings"], response_model=SettingsOut, responses=errors())
def get_settings(request: Request) -> dict[str, Value]:
    """The runtime retrieval settings (docs/retrieval.md), read fresh by every turn."""
    return orchestration_of(request).settings.get().to_values()


@router.patch(
    "/settings", tags=["settings"], response_model=SettingsOut, responses=errors(415, 422)
)
def patch_settings(
    request: Request,
    changes: Annotated[
        dict[str, Any],
        Body(
            description="Any of the settings; the rest keep their values",
            examples=[{"keywordWeight": 1.0}, {"semanticWeight": 0.5, "keywordWeight": 2.0}],
        ),
    ],
) -> dict[str, Value]:
    """Changes any of the settings, each checked against its range (one bad value and
    nothing changes); they apply from the next turn, and are kept in the store."""
    return orchestration_of(request).settings.update(changes).to_values()


@router.post(
    "/context",
    tags=["context"],
    response_model=ContextOut,
    response_model_exclude_unset=True,
    responses=errors(404, 415, 422, 503),
)
def post_context(request: Request, response: Response, body: ContextIn) -> ContextOut:
    """Exactly what chat would give the LLM (recent turns, standing memories, memories,
    entities), without calling it: for agent frameworks that call their own LLM. `explain`
    adds each memory's score and both ranks (at `fusion: "learned"` also `features` and
    `placedBy`); `legs` both legs' full lists, to re-fuse at other weights; `settings`
    apply to this turn only; with a `contextBudget` each memory has `tokens` (and, when
    cut, `excerpt`) and the context `tokens` and `budget`; `filter` keeps the turn to the
    episodes it keeps, inside both searches; `now` is the turn's own time (`timeAware`).
    The `Server-Timing` header says where the turn's time went (ms): embed, each source's
    search (semantic, keyword, standing-read: they run at the same time, beside the entity
    search), standing (ranking the standing ones), fuse, pack, shape."""
    started = time.perf_counter()
    scope = body.checked(request)
    context = orchestration_of(request).context(
        body.turn(scope, body.explain, body.legs), body.settings
    )
    shaped = time.perf_counter()
    out = context_out(context, body.explain)
    timings = {**context.timings, "shape": (time.perf_counter() - shaped) * 1000}
    timings["total"] = (time.perf_counter() - started) * 1000
    response.headers["Server-Timing"] = ", ".join(
        f"{name};dur={timings[name]:.2f}" for name in TIMED_STEPS if name in timings
    )
    return out


# Server-Timing's steps, in the order a turn takes them: each source's comes from the source.
TIMED_STEPS = (
    "embed",
    *(source.step for source in SOURCES),
    "entities",
    "standing",
    "fuse",
    "pack",
    "shape",
    "total",
)


@router.post(
    "/chat",
    tags=["chat"],
    response_model=ChatOut,
    response_model_exclude_unset=True,
    responses=errors(404, 409, 415, 422, 502, 503),
)
def post_chat(request: Request, response: Response, body: ChatIn) -> Any:
    """One chat turn: the context (`settings`, `filter` and `now` as `POST /context` takes
    them), the LLM's answer, both turns stored; `stream: true` sends server-sent events
    (`context`, `delta`..., `done` or `error`). Without an LLM it is a 503 and nothing is
    stored (`POST /context` serves that case). A retry is answered once: a request with an
    `Idempotency-Key` sent before, or the same body while its first try runs or when that
    try's answer never reached its client. The same message said again after its answer
    ("ok", "sure") is a turn of its own."""
    orchestration = orchestration_of(request)
    scope = body.checked(request)
    if body.stream:
        context = orchestration.chat_context(body.turn(scope), body.settings)
        llm = require_llm(orchestration.llm)  # after the input's own 4xx, before any write
        events = chat_events(orchestration.memory, llm, context)
        return StreamingResponse(_sse(context, events), media_type="text/event-stream")

    def turn() -> ChatOut:
        context = orchestration.chat_context(body.turn(scope), body.settings)
        result = chat_turn(orchestration.memory, require_llm(orchestration.llm), context)
        return ChatOut(
            reply=result.reply,
            user_episode_id=result.user_episode.id,
            assistant_episode_id=result.assistant_episode.id if result.assistant_episode else None,
            context=context_out(context, explain=False),
        )

    try:
        last = partial(last_stored, orchestration.memory, body.session_id)
        return answered_once(request, response, body.model_dump(mode="json"), turn, by_digest=last)
    except ChatFailed as exc:
        return JSONResponse({"detail": str(exc), "userEpisodeId": exc.user_episode_id}, 502)


def _sse(context: Context, events: Iterator[tuple[str, dict[str, Any]]]) -> Iterator[str]:
    first = context_out(context, explain=False).model_dump(
        mode="json", by_alias=True, exclude_unset=True
    )
    yield f"event: context\ndata: {json.dumps(first)}\n\n"
    for event, data in events:
        yield f"event: {event}\ndata: {json.dumps(data)}\n\n"
