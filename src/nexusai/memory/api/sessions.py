"""Sessions: made (or found by name), listed, read, moved, renamed and deleted."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import Field

from nexusai.http import PathId, StrictJSONRoute, errors
from nexusai.memory.api.common import (
    PAGED,
    Limit,
    MemoryHandle,
    Offset,
    TenancyHandle,
    page,
)
from nexusai.memory.repositories.validation import UNSET
from nexusai.schemas import (
    MAX_ID,
    Id,
    SessionOut,
    StrictCamelModel,
)

router = APIRouter(route_class=StrictJSONRoute)


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


@router.post("/sessions", status_code=201, tags=["sessions"], responses=errors(404, 415, 422))
def create_session(
    memory: MemoryHandle, tenancy: TenancyHandle, body: SessionIn | None = None
) -> SessionOut:
    """A session: one conversation, in a project (whose sessions share memories) or alone."""
    body = body or SessionIn()
    project_id = tenancy.new_session_project(body.project_id or tenancy.principal.project_id)
    session = memory.store.sessions.create(project_id, body.title)
    return SessionOut.model_validate(session)


@router.post("/sessions/resolve", tags=["sessions"], responses=errors(409, 415, 422))
def resolve_session(
    memory: MemoryHandle, tenancy: TenancyHandle, body: SessionResolveIn
) -> SessionOut:
    """The session with this title in the project of this name (or in no project),
    created, with the project, when missing."""
    project = tenancy.project_name(body.project)
    session = memory.store.sessions.resolve(project, body.title)
    return SessionOut.model_validate(session)


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
    """Sessions, a page at a time (`X-Total-Count`, and a `Link` header while there are
    more): all, or a project's (`projectId`)."""
    store = memory.store
    project_id = tenancy.project_filter(project_id)
    page(request, response, store.sessions.count(project_id), limit, offset)
    found = store.sessions.page(project_id, limit, offset, order)
    return [SessionOut.model_validate(s) for s in found]


@router.get("/sessions/{session_id}", tags=["sessions"], responses=errors(404, 422))
def get_session(tenancy: TenancyHandle, session_id: PathId) -> SessionOut:
    """One session, with when its conversation began (its earliest episode's time)."""
    return SessionOut.model_validate(tenancy.session(session_id))


@router.patch("/sessions/{session_id}", tags=["sessions"], responses=errors(404, 415, 422))
def update_session(
    memory: MemoryHandle, tenancy: TenancyHandle, session_id: PathId, body: SessionPatch
) -> SessionOut:
    """Renames a session, or moves it into (`projectId: 3`) or out of (`projectId: null`) a
    project."""
    given = body.model_fields_set
    tenancy.session(session_id)
    session = memory.store.sessions.update(
        session_id,
        title=body.title if "title" in given else UNSET,
        project_id=tenancy.new_session_project(body.project_id) if "project_id" in given else UNSET,
    )
    return SessionOut.model_validate(session)


@router.delete(
    "/sessions/{session_id}", status_code=204, tags=["sessions"], responses=errors(404, 422)
)
def delete_session(memory: MemoryHandle, tenancy: TenancyHandle, session_id: PathId) -> Response:
    """Deletes the session and its episodes from every index."""
    tenancy.session(session_id)
    memory.delete_session(session_id)
    return Response(status_code=204)
