"""What every route of memory's HTTP API shares: memory and the caller's view of it as
dependencies, the door's check, paging, and the vector check."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query, Request, Response

from nexusai.access import principal_of
from nexusai.errors import InvalidInput
from nexusai.guard import is_open
from nexusai.memory.service import Memory
from nexusai.memory.tenancy import Tenancy
from nexusai.schemas import MAX_ID

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


def check_dimension(memory: Memory, vector: list[float]) -> None:
    dimension = memory.embedder.dimension
    if len(vector) != dimension:
        raise InvalidInput(
            f"vector has {len(vector)} dimensions; this store's embedder makes {dimension}"
        )
