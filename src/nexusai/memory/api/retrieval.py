"""What a turn asks of memory: a session's scope and recent turns, episodes by id, the
vector and keyword legs, and the standing episodes."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import Field

from nexusai import keywords
from nexusai.errors import InvalidInput
from nexusai.http import PathId, StrictJSONRoute, errors, parse_id_list
from nexusai.memory.api.common import (
    MemoryHandle,
    TenancyHandle,
    check_dimension,
)
from nexusai.memory.api.filters import episode_filter
from nexusai.memory.service import Memory
from nexusai.memory.tenancy import Tenancy
from nexusai.models import EpisodeFilter
from nexusai.schemas import (
    EpisodeOut,
    FilterIn,
    Id,
    MarkedEpisodeOut,
    ScopeOut,
    ScoredEpisodeOut,
    StrictCamelModel,
    VectorHit,
)

router = APIRouter(route_class=StrictJSONRoute)


@router.get("/sessions/{session_id}/scope", tags=["retrieval"], responses=errors(404, 422))
def session_scope(memory: MemoryHandle, tenancy: TenancyHandle, session_id: PathId) -> ScopeOut:
    """The sessions a search from this session sees: its project's, or just itself."""
    session = tenancy.session(session_id)
    scope = memory.store.sessions.scope(session_id)
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
    return [EpisodeOut.model_validate(e) for e in store.episodes.recent(session_id, limit)]


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
    found = tenancy.visible_episodes(memory.store.episodes.get_many(wanted))
    return [EpisodeOut.model_validate(e) for e in found]


class VectorSearchIn(StrictCamelModel):
    vector: list[float] = Field(description="The query vector, from the same embedder")
    session_ids: list[Id] | None = Field(default=None, description="Scope; null: everywhere")
    exclude_ids: list[Id] = Field(default_factory=list, description="Episodes to leave out")
    limit: int = Field(default=10, ge=1, le=1000)
    filter: FilterIn | None = Field(
        default=None,
        description="Only the episodes it keeps are searched (see GET /episodes/search)",
    )

    def rule(self) -> EpisodeFilter | None:
        return None if self.filter is None else self.filter.to_filter()


@router.post("/vectors/search", tags=["retrieval"], responses=errors(415, 422))
def vector_search(
    memory: MemoryHandle, tenancy: TenancyHandle, body: VectorSearchIn
) -> list[VectorHit]:
    """The semantic leg: nearest episodes to a query vector, filtered inside the query."""
    _checked_vector(memory, tenancy, body)
    hits = memory.search_vectors(
        body.vector, body.session_ids, body.exclude_ids, body.limit, body.rule()
    )
    # Only episodes a read may return: not expired, and still there.
    live = {e.id for e in memory.store.episodes.get_many([i for i, _ in hits])}
    return [VectorHit(id=i, score=score) for i, score in hits if i in live]


@router.post("/vectors/search/episodes", tags=["retrieval"], responses=errors(415, 422))
def vector_search_episodes(
    memory: MemoryHandle, tenancy: TenancyHandle, body: VectorSearchIn
) -> list[ScoredEpisodeOut]:
    """The semantic leg in one round trip: the nearest episodes' full rows, in rank order."""
    _checked_vector(memory, tenancy, body)
    episodes = memory.vector_episodes(
        body.vector, body.session_ids, body.exclude_ids, body.limit, body.rule()
    )
    return [ScoredEpisodeOut.model_validate(e) for e in episodes]


def _checked_vector(memory: Memory, tenancy: Tenancy, body: VectorSearchIn) -> None:
    check_dimension(memory, body.vector)
    body.session_ids = tenancy.scope(body.session_ids)


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
    rule: Annotated[EpisodeFilter, Depends(episode_filter)],
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
    """Keyword (BM25) search. `after`, `before`, `speaker` and `metadata.KEY` filter inside
    the search: `limit` episodes the filter keeps come back whenever that many match."""
    max_chars = request.app.state.config.max_query_chars
    if len(q) > max_chars:
        raise InvalidInput(
            f"q is {len(q)} characters; the limit is {max_chars} (NEXUS_MAX_QUERY_CHARS)"
        )
    scope = tenancy.scope(parse_id_list("sessionIds", session_ids))
    episodes = memory.search_keyword(q, limit, scope, budget, rule)
    # The words searched for, as the index got them (to mark them), percent-encoded.
    response.headers["X-Search-Terms"] = quote(",".join(keywords.query_terms(q)))
    found = [ScoredEpisodeOut.model_validate(e) for e in episodes]
    if explain:
        own = memory.store.keywords.own_text_matches(q, [e.id for e in episodes])
        for episode in found:
            episode.matched_in = "message" if episode.id in own else "turnBefore"
    return found


@router.get("/episodes/standing", tags=["episodes"], responses=errors(422))
def standing_episodes(
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    rule: Annotated[EpisodeFilter, Depends(episode_filter)],
    session_ids: Annotated[
        str | None, Query(alias="sessionIds", description="Comma-separated session ids")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[MarkedEpisodeOut]:
    """The pinned episodes and the standing ones (a rule the user set, a lasting
    preference) in these sessions (all a key sees when none are given) that the filter
    keeps: pinned first, then the newest. A turn chooses from them what it carries under
    `standing`."""
    scope = tenancy.scope(parse_id_list("sessionIds", session_ids))
    found = memory.standing_episodes(scope, limit, rule)
    return [MarkedEpisodeOut.model_validate(e) for e in found]
