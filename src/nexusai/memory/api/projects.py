"""Projects: made, listed, read and deleted (with everything in them)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
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
from nexusai.memory.export import as_jsonl, project_lines
from nexusai.memory.repositories.validation import MAX_RETENTION_DAYS
from nexusai.schemas import (
    ProjectOut,
    StrictCamelModel,
)

router = APIRouter(route_class=StrictJSONRoute)


RetentionDays = Annotated[
    int | None,
    Field(
        ge=1,
        le=MAX_RETENTION_DAYS,
        description="Keep each episode this many days after it was said, then forget it"
        " (null: as long as its own expiresAt says)",
    ),
]


class ProjectIn(StrictCamelModel):
    name: str = Field(min_length=1, max_length=200)
    retention_days: RetentionDays = None


class ProjectPatch(StrictCamelModel):
    retention_days: RetentionDays


@router.post("/projects", status_code=201, tags=["projects"], responses=errors(409, 415, 422))
def create_project(memory: MemoryHandle, body: ProjectIn) -> ProjectOut:
    """A project groups sessions: its sessions share their memories. `retentionDays`
    (null: none) keeps each episode that many days after it was said."""
    return ProjectOut.model_validate(memory.store.projects.create(body.name, body.retention_days))


@router.patch("/projects/{project_id}", tags=["projects"], responses=errors(404, 415, 422))
def update_project(
    memory: MemoryHandle, tenancy: TenancyHandle, project_id: PathId, body: ProjectPatch
) -> ProjectOut:
    """Sets the project's retention: every episode's deadline is set anew at once (one said
    longer ago than the new period is no longer returned, and the upkeep deletes it)."""
    tenancy.project(project_id)
    return ProjectOut.model_validate(
        memory.store.projects.set_retention(project_id, body.retention_days)
    )


@router.get("/projects", tags=["projects"], responses=errors(422), openapi_extra=PAGED)
def list_projects(
    request: Request,
    memory: MemoryHandle,
    tenancy: TenancyHandle,
    response: Response,
    limit: Limit = 100,
    offset: Offset = 0,
) -> list[ProjectOut]:
    """Projects, a page at a time (a project key sees its own)."""
    store = memory.store
    own = tenancy.project_filter(None)
    if own is not None:  # a project key lists its own project
        page(request, response, 1, limit, offset)
        return [ProjectOut.model_validate(store.projects.get(own))][offset : offset + limit]
    page(request, response, store.projects.count(), limit, offset)
    return [ProjectOut.model_validate(p) for p in store.projects.page(limit, offset)]


@router.get("/projects/{project_id}", tags=["projects"], responses=errors(404, 422))
def get_project(memory: MemoryHandle, tenancy: TenancyHandle, project_id: PathId) -> ProjectOut:
    """One project."""
    tenancy.project(project_id)
    return ProjectOut.model_validate(memory.store.projects.get(project_id))


@router.get(
    "/projects/{project_id}/export",
    tags=["projects"],
    responses={**errors(404, 422), 200: {"content": {"application/x-ndjson": {}}}},
    response_class=StreamingResponse,
)
def export_project(memory: MemoryHandle, tenancy: TenancyHandle, project_id: PathId) -> Any:
    """The project as JSONL, streamed: what `nexus export` writes and `nexus import` (or
    POST /import) reads, its first line the project's name and retention."""
    tenancy.project(project_id)
    project = memory.store.projects.get(project_id)
    lines = (as_jsonl(line) for line in project_lines(memory.store, project))
    return StreamingResponse(lines, media_type="application/x-ndjson")


@router.delete(
    "/projects/{project_id}", status_code=204, tags=["projects"], responses=errors(404, 422)
)
def delete_project(memory: MemoryHandle, project_id: PathId) -> Response:
    """Deletes the project, its sessions and their episodes from every index; ids are
    never handed out again."""
    memory.delete_project(project_id)
    return Response(status_code=204)
