"""Importing a file sent as the request body."""

from __future__ import annotations

import tempfile
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from nexusai.http import StrictJSONRoute, errors
from nexusai.memory.api.common import (
    MemoryHandle,
    TenancyHandle,
)
from nexusai.memory.importing import import_stream
from nexusai.schemas import (
    ImportOut,
)

router = APIRouter(route_class=StrictJSONRoute)


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
