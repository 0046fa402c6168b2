"""The vector index contract: one protocol, a point, and what every engine shares."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

SCOPE_KEY = "session_id"
Condition = TypeVar("Condition")


def qdrant_conditions(
    session_ids: Sequence[int] | None,
    exclude_ids: Sequence[int],
    only_ids: Sequence[int] | None,
    in_sessions: Callable[[list[int]], Condition],
    has_id: Callable[[list[int]], Condition],
) -> tuple[list[Condition], list[Condition]]:
    """A search's filter as Qdrant's (must, must_not), in either Qdrant library's own
    condition types (`in_sessions`: the scope key is one of these; `has_id`: the point is
    one of these): the scope, the ids it is kept to, and the ids it leaves out."""
    must = []
    if session_ids is not None:
        must.append(in_sessions([*map(int, session_ids)]))
    if only_ids is not None:
        must.append(has_id([*map(int, only_ids)]))
    must_not = [has_id([*map(int, exclude_ids)])] if exclude_ids else []
    return must, must_not


@dataclass(frozen=True)
class VectorPoint:
    id: int
    vector: Sequence[float]
    scope: int | Sequence[int]


class VectorIndex(Protocol):
    dimension: int
    # Why the index found where it lives was set aside and a new one begun (damaged, or of
    # another shape), for the start-up to say; None when it opened as it was.
    damaged: str | None

    @property
    def optimizing(self) -> bool:
        """The index is being optimized behind itself (see `optimize_behind`)."""
        ...

    def upsert(self, points: Sequence[VectorPoint]) -> None: ...

    def delete(self, ids: Sequence[int]) -> None: ...

    def search(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
        only_ids: Sequence[int] | None = None,
    ) -> list[tuple[int, float]]:
        """Nearest points by cosine similarity, best first, within the sessions given (all
        when None), never one of `exclude_ids`, and only among `only_ids` when given (a
        filter the store answered: the engine searches those points, so `limit` come back
        whenever that many are there)."""
        ...

    def count(self) -> int: ...

    def ids(self) -> set[int]:
        """Every point id in the index (for `nexus doctor`)."""
        ...

    def reset(self, dimension: int) -> None:
        """Drop every vector and start empty with this dimension (for a rebuild)."""
        ...

    def optimize(self) -> None:
        """Build search indexes now (slow, blocks the process: `nexus reindex` only)."""
        ...

    def flush(self) -> None:
        """Write what is buffered to disk, so the write-ahead log can be cut short."""
        ...

    def optimize_behind(self) -> bool:
        """When due, start building search graphs and reclaiming deleted points' memory
        without holding up searches; True if it started (engines that do this by
        themselves always say False)."""
        ...

    def close(self) -> None: ...


def int_id(point_id: object) -> int:
    assert isinstance(point_id, int)  # nexusai only ever writes integer ids
    return point_id


def scope_payload(scope: int | Sequence[int]) -> int | list[int]:
    return int(scope) if isinstance(scope, int) else [int(s) for s in scope]
