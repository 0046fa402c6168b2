"""Projects: made, listed, read and deleted (with everything in them)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from pydantic import Field

from nexusai.http import PathId, errors
from nexusai.memory.api.common import (
    PAGED,
    Limit,
    MemoryHandle,
    Offset,
    TenancyHandle,
    page,
)
from nexusai.schemas import (
    ProjectOut,
    StrictCamelModel,
)

router = APIRouter()


class ProjectIn(StrictCamelModel):
    name: str = Field(min_length=1, max_length=200)


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
