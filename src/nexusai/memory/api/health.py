"""Memory's health: open to anyone, for load balancers and `nexus` itself."""

from __future__ import annotations

from fastapi import APIRouter

from nexusai.http import StrictJSONRoute, errors
from nexusai.memory.api.common import (
    MemoryHandle,
)
from nexusai.schemas import (
    Health,
)

router = APIRouter(route_class=StrictJSONRoute)


@router.get("/health", tags=["service"], responses=errors(open_route=True))
def health(memory: MemoryHandle) -> Health:
    """Liveness, the number of episodes a read can return, and the work behind: vectors
    being rebuilt, entities still to extract, the vector index being optimized."""
    return Health(
        status="ok",
        episodes=memory.store.episodes.count(),
        vectors_rebuilding=memory.vectors_rebuilding(),
        entities_pending=memory.entities_pending(),
        vector_index_optimizing=memory.vectors.index.optimizing,
    )
