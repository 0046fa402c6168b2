"""The two retrieval legs and their fusion. Both legs return full episode rows, already
filtered against the turns the prompt holds (`recent_ids`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from nexusai.models import Episode
from nexusai.observability import RETRIEVAL_SECONDS, stopwatch, timed
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


@dataclass(frozen=True)
class Legs:
    """Each leg's ranked list exactly as fusion takes it (recent turns already left out)."""

    semantic: list[Episode]
    keyword: list[Episode]


def get_legs(
    memory: MemoryClient,
    query: str,
    query_vector: Sequence[float] | None,
    session_ids: Sequence[int],
    recent_ids: Sequence[int],
    settings: RuntimeSettings,
    every_leg: bool = False,
    timings: dict[str, float] | None = None,
) -> Legs:
    """Both legs in the same scope, at the same time. A leg whose weight is 0 is not even
    asked, unless `every_leg` (a client that re-fuses at other weights needs both). Each
    leg's own duration goes into `timings` (ms) when given."""
    limit = settings.semantic_limit
    spent = timings if timings is not None else {}
    keyword: Future[list[Episode]] | None = None
    if every_leg or settings.keyword_weight > 0:
        keyword = POOL.submit(
            _clocked,
            spent,
            "keyword",
            get_fts_results,
            memory,
            query,
            session_ids,
            recent_ids,
            limit,
        )
    semantic = (
        _clocked(
            spent,
            "semantic",
            get_semantic_episodes,
            memory,
            query_vector,
            session_ids,
            recent_ids,
            limit,
        )
        if every_leg or settings.semantic_weight > 0
        else []
    )
    return Legs(semantic, keyword.result() if keyword else [])


def _clocked(
    timings: dict[str, float], name: str, leg: Callable[..., list[Episode]], *args: Any
) -> list[Episode]:
    with stopwatch(timings, name):
        return leg(*args)


def fuse_legs(legs: Legs, settings: RuntimeSettings) -> list[FusedEpisode]:
    return fuse_ranked(
        legs.semantic,
        legs.keyword,
        settings.semantic_weight,
        settings.keyword_weight,
        settings.semantic_limit,
    )


def get_fused_episodes(
    memory: MemoryClient,
    query: str,
    query_vector: Sequence[float] | None,
    session_ids: Sequence[int],
    recent_ids: Sequence[int],
    settings: RuntimeSettings,
) -> list[FusedEpisode]:
    legs = get_legs(memory, query, query_vector, session_ids, recent_ids, settings)
    return fuse_legs(legs, settings)


# Work that waits on I/O (SQLite, Qdrant, or the memory service over HTTP) runs beside
# other work of the same turn, so a turn costs the slower of the two, not the sum.
POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="nexus-turn")
