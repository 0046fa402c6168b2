"""The whole interface orchestration has to the memory service: nothing else of memory is
imported by orchestration (a lint contract checks it; see docs/ARCHITECTURE.md).

`nexusai.memory.service.Memory` implements it in-process; `HttpMemoryClient` over the
memory service's public API, so that the two services can run as separate processes. Both
pass one contract test suite (tests/test_memory_client.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from nexusai.models import Entity, Episode, EpisodeFilter, NewEpisode, Scope


class MemoryClient(Protocol):
    def scope(self, session_id: int) -> Scope:
        """The session's project's sessions, or just the session; and whether that is
        every session in the store."""
        ...

    def vectors_rebuilding(self) -> int:
        """Episodes waiting for a vector the index lost (0 normally); a turn warns of it."""
        ...

    def resolve_session(self, project: str | None, title: str) -> int:
        """The id of the session with this title in the named project (or in none),
        created, with the project, when missing."""
        ...

    def recent_episodes(self, session_id: int, limit: int) -> list[Episode]: ...

    def vector_episodes(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
        rule: EpisodeFilter | None = None,
    ) -> list[Episode]:
        """The nearest episodes in the scope, `exclude_ids` left out inside the vector
        query, as full rows in rank order (one round trip); only those `rule` keeps,
        chosen inside the query."""
        ...

    def search_keyword(
        self,
        query: str,
        limit: int,
        session_ids: Sequence[int] | None,
        budget: int = 0,
        rule: EpisodeFilter | None = None,
    ) -> list[Episode]:
        """Best BM25 first; with a `budget`, the commonest terms left out past it; only
        those `rule` keeps, chosen inside the search."""
        ...

    def standing_episodes(
        self, session_ids: Sequence[int] | None, limit: int, rule: EpisodeFilter | None = None
    ) -> list[Episode]:
        """The pinned and standing episodes of the scope that `rule` keeps, pinned first,
        then the newest."""
        ...

    def add_episodes(self, session_id: int, episodes: Sequence[NewEpisode]) -> list[Episode]: ...

    def search_entities(
        self, vector: Sequence[float] | None, session_ids: Sequence[int], limit: int
    ) -> list[Entity]:
        """The entities of the scope nearest the query vector; [] without a vector."""
        ...
