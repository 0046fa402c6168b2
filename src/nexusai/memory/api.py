"""The memory service's HTTP API: projects, sessions, episodes and keyword search."""

from __future__ import annotations

import tempfile
from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Body, Depends, Query, Request, Response
from pydantic import Discriminator, Field, Tag
from starlette.concurrency import run_in_threadpool

from nexusai import keywords
from nexusai.access import principal_of
from nexusai.errors import InvalidInput, NotFound, TooLarge
from nexusai.guard import is_open
from nexusai.http import PathId, errors, parse_id_list
from nexusai.idempotency import answered_once
from nexusai.memory.importing import import_stream
from nexusai.memory.service import Memory
from nexusai.memory.store import UNSET
from nexusai.memory.tenancy import Tenancy
from nexusai.models import NewEpisode
from nexusai.schemas import (
    MAX_ID,
    EntityDetail,
    EntityOut,
    EpisodeBatchOut,
    EpisodeDetailOut,
    EpisodeOut,
    Health,
    Id,
    ImportOut,
    MarkedEpisodeOut,
    ProjectOut,
    ScopeOut,
    ScoredEpisodeOut,
    SessionOut,
    StrictCamelModel,
    VectorHit,
)

Limit = Annotated[int, Query(ge=1, le=1000, description="Page size")]
Offset = Annotated[int, Query(ge=0, le=MAX_ID, description="Rows to skip")]


def memory_of(request: Request) -> Memory:
    """Every route reaches memory through this one object: writes that touch vectors go
    through its methods, plain reads through its `store`."""
    memory: Memory = request.app.state.memory
    return memory


def tenancy_of(request: Request) -> Tenancy:
    """What the caller's key may see of memory (the door has said who it is)."""
    return Tenancy.of(request)


# Every route gets memory and the caller's view of it as dependencies, never by hand.
MemoryHandle = Annotated[Memory, Depends(memory_of)]
TenancyHandle = Annotated[Tenancy, Depends(tenancy_of)]


def admitted(request: Request) -> None:
    """No route but the open ones runs for a request the door did not admit (who asks is
    then unknown, and `principal_of` refuses it rather than take it for the admin)."""
    if not is_open(request.url.path):
        principal_of(request)


router = APIRouter(dependencies=[Depends(admitted)])


# -- models ------------------------------------------------------------------------------


class ProjectIn(StrictCamelModel):
    name: str = Field(min_length=1, max_length=200)


class SessionIn(StrictCamelModel):
    project_id: Id | None = None
    title: str | None = Field(default=None, max_length=500)


class SessionResolveIn(StrictCamelModel):
    project: str | None = Field(default=None, max_length=200, description="A project's name")
    title: str = Field(min_length=1, max_length=500)


class SessionPatch(StrictCamelModel):
    project_id: Id | None = Field(
        default=None, description="Move into this project; null moves it out of any project"
    )
    title: str | None = Field(default=None, max_length=500)


class EpisodeIn(StrictCamelModel):
    speaker: str = Field(min_length=1, max_length=200, examples=["user"])
    content: str = Field(examples=["I adopted a puppy called Biscuit"])
    occurred_at: datetime | None = Field(
        default=None, strict=False, description="When it was said (ISO 8601); defaults to now"
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Yours, stored as given and never indexed"
    )
    image_caption: str | None = Field(
        default=None,
        max_length=2000,
        description="What an image shared in this turn shows; indexed with the text",
    )

    def to_new(self) -> NewEpisode:
        return NewEpisode(
            self.speaker, self.content, self.occurred_at, self.metadata, self.image_caption
        )


class EpisodeBatchIn(StrictCamelModel):
    episodes: list[EpisodeIn] = Field(min_length=1)


class EpisodePatch(StrictCamelModel):
    speaker: str | None = Field(default=None, min_length=1, max_length=200)
    content: str | None = None
    occurred_at: datetime | None = Field(
        default=None,
        strict=False,
        description="Move the turn in time (ISO 8601); the turns around it are re-indexed",
    )
    metadata: dict[str, Any] | None = Field(
        default=None,
        description="A JSON merge patch (RFC 7396) over the stored metadata: keys given are"
        " set, keys given as null are removed, the rest stay; null clears all of it",
    )
    image_caption: str | None = Field(
        default=None, max_length=2000, description="Set the image caption; null removes it"
    )
    pinned: bool | None = Field(
        default=None,
        description="true pins it: every turn of its scope carries it, under `standing`;"
        " false unpins it",
    )


def _episode_or_batch(body: Any) -> str:
    return "batch" if isinstance(body, dict) and "episodes" in body else "episode"


EpisodesBody = Annotated[
    Annotated[EpisodeIn, Tag("episode")] | Annotated[EpisodeBatchIn, Tag("batch")],
    Discriminator(_episode_or_batch),
    Body(description='One episode, or a batch as {"episodes": [...]}'),
]


# -- paging ------------------------------------------------------------------------------

_PAGE_HEADERS = {
    "X-Total-Count": {
        "description": "How many rows there are in all",
        "schema": {"type": "integer"},
    },
    "Link": {
        "description": 'The next page, as <url>; rel="next", while there is one',
        "schema": {"type": "string"},
    },
}
PAGED: dict[str, Any] = {"responses": {"200": {"headers": _PAGE_HEADERS}}}


def page(request: Request, response: Response, total: int, limit: int, offset: int) -> None:
    """A list answers with one page; its headers say how many rows there are and where the
    next page is (RFC 8288 `Link`), so a client never mistakes a page for the whole."""
    response.headers["X-Total-Count"] = str(total)
    if offset + limit < total:
        following = request.url.include_query_params(limit=limit, offset=offset + limit)
        response.headers["Link"] = f'<{following}>; rel="next"'


# -- routes ------------------------------------------------------------------------------


@router.get("/health", tags=["service"], responses=errors(open_route=True))
def health(memory: MemoryHandle) -> Health:
    return Health(
        status="ok",
        episodes=memory.store.count_episodes(),
        vectors_rebuilding=memory.vectors_rebuilding(),
        entities_pending=memory.entities_pending(),
        vector_index_optimizing=memory.vectors.index.optimizing,
    )


@router.post("/projects", status_code=201, tags=["projects"], responses=errors(409, 415, 422))
def create_project(memory: MemoryHandle, body: ProjectIn) -> ProjectOut:
    return ProjectOut.model_validate(memory.store.create_project(body.name))


@router.get("/projects", tags=["projects"], responses=errors(422), openapi_extra=PAGED)
def list_projects(
    request: Request,
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    response: Response,
    limit: Limit = 100,
    offset: Offset = 0,
) -> list[ProjectOut]:
    store = memory.store
    own = tenancy.project_filter(None)
    if own is not None:  # a project key lists its own project
        page(request, response, 1, limit, offset)
        return [ProjectOut.model_validate(store.get_project(own))][offset : offset + limit]
    page(request, response, store.count_projects(), limit, offset)
    return [ProjectOut.model_validate(p) for p in store.list_projects(limit, offset)]


@router.get("/projects/{project_id}", tags=["projects"], responses=errors(404, 422))
def get_project(memory: MemoryHandle, tenancy: TenancyHandle, project_id: PathId) -> ProjectOut:
    tenancy.project(project_id)
    return ProjectOut.model_validate(memory.store.get_project(project_id))


@router.delete(
    "/projects/{project_id}", status_code=204, tags=["projects"], responses=errors(404, 422)
)
def delete_project(memory: MemoryHandle, project_id: PathId) -> Response:
    memory.delete_project(project_id)
    return Response(status_code=204)


@router.post("/sessions", status_code=201, tags=["sessions"], responses=errors(404, 415, 422))
def create_session(
    memory: MemoryHandle, tenancy: TenancyHandle, body: SessionIn | None = None
) -> SessionOut:
    body = body or SessionIn()
    project_id = tenancy.new_session_project(body.project_id or tenancy.principal.project_id)
    session = memory.store.create_session(project_id, body.title)
    return SessionOut.model_validate(session)


@router.post("/sessions/resolve", tags=["sessions"], responses=errors(415, 422))
def resolve_session(
    memory: MemoryHandle, tenancy: TenancyHandle, body: SessionResolveIn
) -> SessionOut:
    """The session with this title in the project of this name (or in no project),
    created, with the project, when missing."""
    project = tenancy.project_name(body.project)
    session = memory.store.resolve_session(project, body.title)
    return SessionOut.model_validate(session)


class NamedEpisodesIn(SessionResolveIn):
    episodes: list[EpisodeIn] = Field(min_length=1)


@router.post(
    "/sessions/resolve/episodes",
    status_code=201,
    tags=["episodes"],
    responses=errors(409, 413, 415, 422, 507),
)
def add_episodes_named(
    request: Request,
    response: Response,
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    body: NamedEpisodesIn,
) -> EpisodeBatchOut:
    """A batch into the session with this title in the project of this name (or in no
    project), made with the project when missing, in the batch's own transaction: a batch
    that is refused makes nothing. `Idempotency-Key` as for a session's episodes."""
    project = tenancy.project_name(body.project)
    _check_batch_size(request, body.episodes)

    def store() -> EpisodeBatchOut:
        new = [i.to_new() for i in body.episodes]
        stored = memory.add_episodes_named(project, body.title, new)
        return EpisodeBatchOut(episodes=[EpisodeOut.model_validate(e) for e in stored])

    return answered_once(request, response, body.model_dump(mode="json"), False, store)


def _check_batch_size(request: Request, items: list[EpisodeIn]) -> None:
    limit = request.app.state.config.max_batch_size
    if len(items) > limit:
        raise TooLarge(f"a batch holds at most {limit} episodes (NEXUS_MAX_BATCH_SIZE)")


@router.get("/sessions", tags=["sessions"], responses=errors(404, 422), openapi_extra=PAGED)
def list_sessions(
    request: Request,
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    response: Response,
    project_id: Annotated[int | None, Query(alias="projectId", ge=1, le=MAX_ID)] = None,
    limit: Limit = 100,
    offset: Offset = 0,
    order: Annotated[
        Literal["id", "started"],
        Query(description="id: as made; started: by when each conversation began"),
    ] = "id",
) -> list[SessionOut]:
    store = memory.store
    project_id = tenancy.project_filter(project_id)
    page(request, response, store.count_sessions(project_id), limit, offset)
    found = store.list_sessions(project_id, limit, offset, order)
    return [SessionOut.model_validate(s) for s in found]


@router.get("/sessions/{session_id}", tags=["sessions"], responses=errors(404, 422))
def get_session(tenancy: TenancyHandle, session_id: PathId) -> SessionOut:
    return SessionOut.model_validate(tenancy.session(session_id))


@router.patch("/sessions/{session_id}", tags=["sessions"], responses=errors(404, 415, 422))
def update_session(
    memory: MemoryHandle, tenancy: TenancyHandle, session_id: PathId, body: SessionPatch
) -> SessionOut:
    given = body.model_fields_set
    tenancy.session(session_id)
    session = memory.store.update_session(
        session_id,
        title=body.title if "title" in given else UNSET,
        project_id=tenancy.new_session_project(body.project_id) if "project_id" in given else UNSET,
    )
    return SessionOut.model_validate(session)


@router.delete(
    "/sessions/{session_id}", status_code=204, tags=["sessions"], responses=errors(404, 422)
)
def delete_session(memory: MemoryHandle, tenancy: TenancyHandle, session_id: PathId) -> Response:
    tenancy.session(session_id)
    memory.delete_session(session_id)
    return Response(status_code=204)


@router.post(
    "/sessions/{session_id}/episodes",
    status_code=201,
    tags=["episodes"],
    responses=errors(404, 409, 413, 415, 422, 507),
)
def add_episodes(
    request: Request,
    response: Response,
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    session_id: PathId,
    body: EpisodesBody,
) -> EpisodeOut | EpisodeBatchOut:
    """One episode, or a batch stored all or nothing. With an `Idempotency-Key` header, the
    same request sent again within a day is stored once and answered as the first was."""
    tenancy.session(session_id)
    items = body.episodes if isinstance(body, EpisodeBatchIn) else [body]
    _check_batch_size(request, items)

    def store() -> EpisodeOut | EpisodeBatchOut:
        stored = memory.add_episodes(session_id, [i.to_new() for i in items])
        out = [EpisodeOut.model_validate(e) for e in stored]
        return EpisodeBatchOut(episodes=out) if isinstance(body, EpisodeBatchIn) else out[0]

    return answered_once(request, response, body.model_dump(mode="json"), False, store)


@router.get(
    "/sessions/{session_id}/episodes",
    tags=["episodes"],
    responses=errors(404, 422),
    openapi_extra=PAGED,
)
def list_episodes(
    request: Request,
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    response: Response,
    session_id: PathId,
    limit: Limit = 100,
    offset: Offset = 0,
    detail: Annotated[
        bool, Query(description="Add each episode's vector state and entity names")
    ] = False,
) -> list[EpisodeDetailOut] | list[EpisodeOut]:
    """A session's episodes in time order, a page at a time."""
    tenancy.session(session_id)
    episodes = memory.store.list_episodes(session_id, limit, offset)
    page(request, response, memory.store.count_episodes(session_id), limit, offset)
    if not detail:
        return [EpisodeOut.model_validate(e) for e in episodes]
    ids = [e.id for e in episodes]
    states, names = memory.vector_states(ids), memory.entities.names_by_episode(ids)
    return [
        EpisodeDetailOut(
            **MarkedEpisodeOut.model_validate(e).model_dump(),
            vector_state=states[e.id].value,
            entities=names.get(e.id, []),
        )
        for e in episodes
    ]


@router.get("/sessions/{session_id}/scope", tags=["retrieval"], responses=errors(404, 422))
def session_scope(memory: MemoryHandle, tenancy: TenancyHandle, session_id: PathId) -> ScopeOut:
    """The sessions a search from this session sees: its project's, or just itself."""
    session = tenancy.session(session_id)
    scope = memory.store.scope(session_id)
    return ScopeOut(
        session_ids=scope.session_ids,
        project_id=session.project_id,
        every_session=scope.every_session,
    )


@router.get("/sessions/{session_id}/recent", tags=["retrieval"], responses=errors(404, 422))
def recent_episodes(
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    session_id: PathId,
    limit: Annotated[int, Query(ge=0, le=1000)] = 10,
) -> list[EpisodeOut]:
    """The session's last `limit` episodes, oldest first (what a prompt holds as recent)."""
    store = memory.store
    tenancy.session(session_id)
    return [EpisodeOut.model_validate(e) for e in store.recent_episodes(session_id, limit)]


@router.get("/episodes", tags=["retrieval"], responses=errors(422))
def episodes_by_id(
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    ids: Annotated[str, Query(description="Comma-separated episode ids, e.g. 4,1,9")],
) -> list[EpisodeOut]:
    """Full rows in the order asked; an id with no row is left out."""
    wanted = parse_id_list("ids", ids) or []
    if len(wanted) > 1000:
        raise InvalidInput(f"ids holds {len(wanted)} ids; the limit is 1000")
    found = tenancy.visible_episodes(memory.store.get_episodes(wanted))
    return [EpisodeOut.model_validate(e) for e in found]


class VectorSearchIn(StrictCamelModel):
    vector: list[float] = Field(description="The query vector, from the same embedder")
    session_ids: list[Id] | None = Field(default=None, description="Scope; null: everywhere")
    exclude_ids: list[Id] = Field(default_factory=list, description="Episodes to leave out")
    limit: int = Field(default=10, ge=1, le=1000)


@router.post("/vectors/search", tags=["retrieval"], responses=errors(415, 422))
def vector_search(
    memory: MemoryHandle, tenancy: TenancyHandle, body: VectorSearchIn
) -> list[VectorHit]:
    """The semantic leg: nearest episodes to a query vector, filtered inside the query."""
    _checked_vector(memory, tenancy, body)
    hits = memory.search_vectors(body.vector, body.session_ids, body.exclude_ids, body.limit)
    return [VectorHit(id=i, score=score) for i, score in hits]


@router.post("/vectors/search/episodes", tags=["retrieval"], responses=errors(415, 422))
def vector_search_episodes(
    memory: MemoryHandle, tenancy: TenancyHandle, body: VectorSearchIn
) -> list[ScoredEpisodeOut]:
    """The semantic leg in one round trip: the nearest episodes' full rows, in rank order."""
    _checked_vector(memory, tenancy, body)
    episodes = memory.vector_episodes(body.vector, body.session_ids, body.exclude_ids, body.limit)
    return [ScoredEpisodeOut.model_validate(e) for e in episodes]


def _checked_vector(memory: Memory, tenancy: Tenancy, body: VectorSearchIn) -> None:
    _check_dimension(memory, body.vector)
    body.session_ids = tenancy.scope(body.session_ids)


def _check_dimension(memory: Memory, vector: list[float]) -> None:
    dimension = memory.embedder.dimension
    if len(vector) != dimension:
        raise InvalidInput(
            f"vector has {len(vector)} dimensions; this store's embedder makes {dimension}"
        )


class EntitySearchIn(StrictCamelModel):
    vector: list[float]
    session_ids: list[Id]
    limit: int = Field(default=10, ge=1, le=200)


@router.post("/entities/search", tags=["entities"], responses=errors(415, 422))
def entity_search(
    request: Request, memory: MemoryHandle, tenancy: TenancyHandle, body: EntitySearchIn
) -> list[EntityOut]:
    """The entity leg of a turn: nearest entities of the scope to the turn's query vector."""
    _check_dimension(memory, body.vector)
    body.session_ids = tenancy.scope(body.session_ids) or []
    return [
        EntityOut.model_validate(e)
        for e in memory.search_entities(body.vector, body.session_ids, body.limit)
    ]


@router.get("/entities", tags=["entities"], responses=errors(404, 422, 503))
def list_entities(
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    session_id: Annotated[
        int, Query(alias="sessionId", ge=1, le=MAX_ID, description="Whose scope to search")
    ],
    q: Annotated[str | None, Query(description="Semantic search for this text")] = None,
    prefix: Annotated[str | None, Query(description="Names starting with this")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
) -> list[EntityOut]:
    """Entities a session can see: by meaning (`q`), by name (`prefix`), or most mentioned."""
    if q is not None and prefix is not None:
        raise InvalidInput("give q (search by meaning) or prefix (by name), not both")
    tenancy.session(session_id)
    scope = memory.store.scope_session_ids(session_id)
    if q:
        found = memory.search_entities(memory.embedder.embed_query(q), scope, limit)
    else:
        found = memory.entities.by_prefix(prefix or "", scope, limit)
    return [EntityOut.model_validate(e) for e in found]


@router.get("/entities/{entity_id}", tags=["entities"], responses=errors(404, 422))
def get_entity(
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    entity_id: PathId,
    limit: Limit = 20,
    offset: Offset = 0,
) -> EntityDetail:
    """One entity with the episodes that mention it, newest first (paged)."""
    tenancy = tenancy
    tenancy.entity(entity_id)
    found = memory.entities.get([entity_id])
    if not found:
        raise NotFound(f"entity {entity_id} does not exist")
    mentions = memory.entities.mentions(entity_id, limit, offset)
    return EntityDetail(
        **EntityOut.model_validate(found[0]).model_dump(),
        mentions=[EpisodeOut.model_validate(e) for e in tenancy.visible_episodes(mentions)],
    )


@router.get(
    "/episodes/search",
    tags=["episodes"],
    responses=errors(422),
    response_model_exclude_unset=True,
)
def search_episodes(
    request: Request,
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    response: Response,
    q: Annotated[str, Query(description="The user's text; FTS5 syntax in it is searched for")],
    session_ids: Annotated[
        str | None, Query(alias="sessionIds", description="Comma-separated session ids")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
    budget: Annotated[
        int,
        Query(
            ge=0,
            le=10_000_000,
            description="Most index entries the query may read: past it its commonest words"
            " are left out, the rarest always kept (0: every word, the spec's query)",
        ),
    ] = 0,
    explain: Annotated[
        bool,
        Query(
            description="Add `matchedIn` to each: its own text, or only the end of the turn"
            " before it (indexed with each message)"
        ),
    ] = False,
) -> list[ScoredEpisodeOut]:
    max_chars = request.app.state.config.max_query_chars
    if len(q) > max_chars:
        raise InvalidInput(f"q is {len(q)} characters; the limit is {max_chars}")
    scope = tenancy.scope(parse_id_list("sessionIds", session_ids))
    episodes = memory.search_keyword(q, limit, scope, budget)
    # The words searched for, as the index got them (to mark them), percent-encoded.
    response.headers["X-Search-Terms"] = quote(",".join(keywords.query_terms(q)))
    found = [ScoredEpisodeOut.model_validate(e) for e in episodes]
    if explain:
        own = memory.store.own_text_matches(q, [e.id for e in episodes])
        for episode in found:
            episode.matched_in = "message" if episode.id in own else "turnBefore"
    return found


@router.get("/episodes/standing", tags=["episodes"], responses=errors(422))
def standing_episodes(
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    session_ids: Annotated[
        str | None, Query(alias="sessionIds", description="Comma-separated session ids")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[MarkedEpisodeOut]:
    """The pinned episodes and the standing ones (a rule the user set, a lasting
    preference) in these sessions (all a key sees when none are given): pinned first,
    then the newest. A turn chooses from them what it carries under `standing`."""
    scope = tenancy.scope(parse_id_list("sessionIds", session_ids))
    return [MarkedEpisodeOut.model_validate(e) for e in memory.standing_episodes(scope, limit)]


BINARY = {"schema": {"type": "string", "format": "binary"}}


@router.post(
    "/import",
    tags=["import"],
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        }
    },
    responses=errors(422, 507),
)
async def import_file(
    request: Request,
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    format: Annotated[Literal["locomo", "chatgpt", "jsonl"], Query(description="File format")],
    project: Annotated[str | None, Query(description="Put the sessions in this project")] = None,
) -> ImportOut:
    """Import a file sent as the raw request body. The body is spooled to disk as it
    arrives, so a large export never sits whole in memory."""
    project = tenancy.project_name(project)
    with tempfile.SpooledTemporaryFile(max_size=1024 * 1024) as spool:
        async for chunk in request.stream():
            spool.write(chunk)
        spool.seek(0)
        memory = memory
        summary = await run_in_threadpool(import_stream, memory, spool, format, project)
    return ImportOut.model_validate(summary)


@router.get("/episodes/{episode_id}", tags=["episodes"], responses=errors(404, 422))
def get_episode(tenancy: TenancyHandle, episode_id: PathId) -> MarkedEpisodeOut:
    return MarkedEpisodeOut.model_validate(tenancy.episode(episode_id))


@router.patch(
    "/episodes/{episode_id}", tags=["episodes"], responses=errors(404, 413, 415, 422, 507)
)
def update_episode(
    memory: MemoryHandle, tenancy: TenancyHandle, episode_id: PathId, body: EpisodePatch
) -> MarkedEpisodeOut:
    """Change a turn. Fields left out keep their values; `metadata` merges (RFC 7396).
    `pinned` true makes every turn of its scope carry it (under `standing`)."""
    given = body.model_fields_set
    if "content" in given and body.content is None:
        raise InvalidInput("content: give new text, or leave content out to keep it")
    tenancy.episode(episode_id)
    episode = memory.update_episode(
        episode_id,
        content=body.content,
        speaker=body.speaker,
        metadata=body.metadata if "metadata" in given else UNSET,
        image_caption=body.image_caption if "image_caption" in given else UNSET,
        occurred_at=body.occurred_at,
        pinned=body.pinned,
    )
    return MarkedEpisodeOut.model_validate(episode)


@router.delete(
    "/episodes/{episode_id}", status_code=204, tags=["episodes"], responses=errors(404, 422)
)
def delete_episode(memory: MemoryHandle, tenancy: TenancyHandle, episode_id: PathId) -> Response:
    tenancy.episode(episode_id)
    memory.delete_episode(episode_id)
    return Response(status_code=204)
