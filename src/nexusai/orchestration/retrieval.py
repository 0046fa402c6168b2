"""The two retrieval legs and their fusion. Both legs return full episode rows, already
filtered against the turns the prompt holds (`recent_ids`)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from nexusai.models import Episode
from nexusai.observability import RETRIEVAL_SECONDS, timed
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
    """One vector query in the scope, recent ids excluded inside it; rows in rank order (an
    id whose row is gone is skipped)."""
    if query_vector is None or limit <= 0:
        return []
    with timed(RETRIEVAL_SECONDS, leg="semantic"):
        return memory.vector_episodes(query_vector, session_ids, recent_ids, limit)


def get_fts_results(
    memory: MemoryClient,
    query: str,
    session_ids: Sequence[int],
    recent_ids: Sequence[int],
    limit: int,
) -> list[Episode]:
    """Keyword leg: asks for twice `limit` so that dropping recent turns still leaves enough."""
    with timed(RETRIEVAL_SECONDS, leg="keyword"):
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
    """Both legs in the same scope, at the same time, fused; a leg whose weight is 0 is not
    even asked."""
    limit = settings.semantic_limit
    keyword: Future[list[Episode]] | None = None
    if settings.keyword_weight > 0:
        keyword = POOL.submit(get_fts_results, memory, query, session_ids, recent_ids, limit)
    semantic = (
        get_semantic_episodes(memory, query_vector, session_ids, recent_ids, limit)
        if settings.semantic_weight > 0
        else []
    )
    found = keyword.result() if keyword else []
    return fuse_ranked(semantic, found, settings.semantic_weight, settings.keyword_weight, limit)


# Work that waits on I/O (SQLite, Qdrant, or the memory service over HTTP) runs beside
# other work of the same turn, so a turn costs the slower of the two, not the sum.
POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="nexus-turn")
