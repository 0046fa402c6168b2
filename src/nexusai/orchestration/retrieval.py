"""The two retrieval legs and their fusion. Both legs return full episode rows, already
filtered against the turns the prompt holds (`recent_ids`)."""

from __future__ import annotations

from collections.abc import Sequence

from nexusai.memory.models import Episode
from nexusai.orchestration.memory_client import MemoryClient


def get_semantic_episodes(
    memory: MemoryClient,
    query_vector: Sequence[float] | None,
    session_ids: Sequence[int],
    recent_ids: Sequence[int],
    limit: int,
) -> list[Episode]:
    """One vector query in the scope, recent ids excluded inside it; rows in rank order."""
    if query_vector is None or limit <= 0:
        return []
    hits = memory.search_vectors(query_vector, session_ids, recent_ids, limit)
    return memory.get_episodes([episode_id for episode_id, _ in hits])
