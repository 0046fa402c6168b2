"""Entities: found by meaning or by name, and read with their mentions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from pydantic import Field

from nexusai.errors import InvalidInput, NotFound
from nexusai.http import PathId, StrictJSONRoute, errors
from nexusai.memory.api.common import (
    Limit,
    MemoryHandle,
    Offset,
    TenancyHandle,
    check_dimension,
)
from nexusai.schemas import (
    MAX_ID,
    EntityDetail,
    EntityOut,
    EpisodeOut,
    Id,
    StrictCamelModel,
)

router = APIRouter(route_class=StrictJSONRoute)


class EntitySearchIn(StrictCamelModel):
    vector: list[float]
    session_ids: list[Id]
    limit: int = Field(default=10, ge=1, le=200)


@router.post("/entities/search", tags=["entities"], responses=errors(415, 422))
def entity_search(
    request: Request, memory: MemoryHandle, tenancy: TenancyHandle, body: EntitySearchIn
) -> list[EntityOut]:
    """The entity leg of a turn: nearest entities of the scope to the turn's query vector."""
    check_dimension(memory, body.vector)
    body.session_ids = tenancy.scope(body.session_ids) or []
    return [
        EntityOut.model_validate(e)
        for e in memory.search_entities(body.vector, body.session_ids, body.limit)
    ]


PENDING_HEADER = "X-Entities-Pending"


@router.get("/entities", tags=["entities"], responses=errors(404, 422, 503))
def list_entities(
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    response: Response,
    session_id: Annotated[
        int, Query(alias="sessionId", ge=1, le=MAX_ID, description="Whose scope to search")
    ],
    q: Annotated[str | None, Query(description="Semantic search for this text")] = None,
    prefix: Annotated[str | None, Query(description="Names starting with this")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
) -> list[EntityOut]:
    """Entities a session can see: by meaning (`q`), by name (`prefix`), or most mentioned.
    Entities are extracted behind the writes: the `X-Entities-Pending` header says how many
    stored episodes are still to be read for them (0: the list is whole)."""
    if q is not None and prefix is not None:
        raise InvalidInput("give q (search by meaning) or prefix (by name), not both")
    tenancy.session(session_id)
    scope = memory.store.sessions.scope(session_id).session_ids
    if q:
        found = memory.search_entities(memory.embedder.embed_query(q), scope, limit)
    else:
        found = memory.entities.by_prefix(prefix or "", scope, limit)
    response.headers[PENDING_HEADER] = str(memory.entities_pending())
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
