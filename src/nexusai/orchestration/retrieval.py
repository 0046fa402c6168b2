"""The two retrieval legs and their fusion. Both legs return full episode rows, already
filtered against the turns the prompt holds (`recent_ids`)."""

from __future__ import annotations

from collections.abc import Sequence

from nexusai.memory.models import Episode
from nexusai.orchestration.fusion import FusedEpisode, fuse_ranked
from nexusai.orchestration.memory_client import MemoryClient
from nexusai.orchestration.settings import RuntimeSettings


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


def get_fts_results(
    memory: MemoryClient,
    query: str,
    session_ids: Sequence[int],
    recent_ids: Sequence[int],
    limit: int,
) -> list[Episode]:
    """Keyword leg: asks for twice `limit` so that dropping recent turns still leaves enough."""
    rows = memory.search_keyword(query, limit * 2, session_ids)
    recent = set(recent_ids)
    return [episode for episode in rows if episode.id not in recent]


def get_fused_episodes(
    memory: MemoryClient,
    query: str,
    query_vector: Sequence[float] | None,
    session_ids: Sequence[int],
    recent_ids: Sequence[int],
    settings: RuntimeSettings,
) -> list[FusedEpisode]:
    """Both legs in the same scope, fused; a leg whose weight is 0 is not even asked."""
    limit = settings.semantic_limit
    semantic = (
        get_semantic_episodes(memory, query_vector, session_ids, recent_ids, limit)
        if settings.semantic_weight > 0
        else []
    )
    keyword = (
        get_fts_results(memory, query, session_ids, recent_ids, limit)
        if settings.keyword_weight > 0
        else []
    )
    return fuse_ranked(semantic, keyword, settings.semantic_weight, settings.keyword_weight, limit)
