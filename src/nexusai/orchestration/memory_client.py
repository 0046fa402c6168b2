"""The one narrow interface through which orchestration reaches the memory service.

`nexusai.memory.service.Memory` implements it in-process; an HTTP implementation lets the
two services run as separate processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from nexusai.memory.models import Episode, NewEpisode


class MemoryClient(Protocol):
    def scope_session_ids(self, session_id: int) -> list[int]:
        """The session's project's sessions, or just the session."""
        ...

    def recent_episodes(self, session_id: int, limit: int) -> list[Episode]: ...

    def vector_episodes(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
    ) -> list[Episode]:
        """The nearest episodes in the scope, `exclude_ids` left out inside the vector
        query, as full rows in rank order (one round trip)."""
        ...

    def search_keyword(
        self, query: str, limit: int, session_ids: Sequence[int] | None
    ) -> list[Episode]: ...

    def add_episodes(self, session_id: int, episodes: Sequence[NewEpisode]) -> list[Episode]: ...
