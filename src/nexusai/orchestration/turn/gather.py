"""The first half of a turn: all of its I/O, at once where it can be. The scope, the recent
turns and the sources that need no vector start while the message is embedded; then the
sources that search by the vector and the entity search run side by side. What they give
is a `Gathered`, which `assemble` turns into the context without touching a store, so that
the eval and the ranker's training gather a question once and assemble it many ways."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from nexusai.embedders import Embedder, Vector
from nexusai.models import Entity, Episode, Scope
from nexusai.observability import EMBED_SECONDS, stopwatch, timed
from nexusai.orchestration.memory_client import MemoryClient
from nexusai.orchestration.standing_vectors import ranked
from nexusai.orchestration.turn.gathered import Gathered
from nexusai.orchestration.turn.legs import LegQuery
from nexusai.orchestration.turn.plan import TurnPlan
from nexusai.orchestration.turn.sources import Source

log = logging.getLogger("nexusai.context")

# Work that waits on I/O (SQLite, Qdrant, or the memory service over HTTP) runs beside
# other work of the same turn, so a turn costs the slower of the two, not the sum.
POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="nexus-turn")


def gather(turn: TurnPlan, memory: MemoryClient, embedder: Embedder) -> Gathered:
    """Everything the plan asks to be read, each source's rows without the recent turns
    the prompt holds (the semantic leg leaves them out inside its query too, to fill its
    depth; here they leave every source's rows)."""
    timings: dict[str, float] = {}
    request, settings = turn.request, turn.settings
    scope_call = (
        _known(request.scope) if request.scope else POOL.submit(memory.scope, request.session_id)
    )
    recent_call = (
        POOL.submit(memory.recent_episodes, request.session_id, settings.recent_limit)
        if settings.recent_limit
        else None
    )
    sources = turn.sources
    early = {
        s.name: _started(s, lambda: leg_query(turn, memory, scope_call.result()), timings)
        for s in sources
        if s.early
    }
    warnings: list[str] = []
    vector = request.vector
    if turn.embed:
        with stopwatch(timings, "embed"):
            vector = embed_query(embedder, turn.message)
        if vector is None:
            warnings.append("the embedder failed: only keyword memories this turn")
    scope = scope_call.result()  # NotFound for an unknown session
    if rebuilding := memory.vectors_rebuilding():
        warnings.append(
            f"the vector index is being rebuilt: {rebuilding} episodes are found by keyword"
            " only until it ends"
        )
    recent = recent_call.result() if recent_call else []
    leg = leg_query(turn, memory, scope, vector, [episode.id for episode in recent])
    late = {s.name: POOL.submit(_clocked, s, leg, timings) for s in sources if not s.early}
    entities = _entities(turn, leg, timings)
    calls = {**early, **late}
    found, dropped = _without_recent({s.name: calls[s.name].result() for s in sources}, recent)
    with stopwatch(timings, "standing"):
        standing = ranked(found.pop("standing", []), embedder, vector)
    return Gathered(
        vector=vector,
        embedder=embedder.name,
        recent=recent,
        found=found,
        standing_candidates=standing,
        entities=entities.result() if entities else [],
        warnings=warnings,
        timings=timings,
        dropped=dropped,
    )


def leg_query(
    turn: TurnPlan,
    memory: MemoryClient,
    scope: Scope,
    vector: Vector | None = None,
    recent_ids: Sequence[int] = (),
) -> LegQuery:
    """What every source of the turn searches with: one scope, one filter, the recent
    turns left out."""
    return LegQuery(
        memory=memory,
        query=turn.message,
        query_vector=vector,
        session_ids=scope.session_ids,
        recent_ids=list(recent_ids),
        limit=turn.depth,
        keyword_budget=turn.settings.keyword_budget,
        every_session=scope.every_session,
        headroom=turn.headroom,
        rule=turn.rule,
    )


def _entities(
    turn: TurnPlan, leg: LegQuery, timings: dict[str, float]
) -> Future[list[Entity]] | None:
    """The entity search, beside the late sources: it needs only the vector and scope."""
    limit = turn.settings.entity_limit
    if limit <= 0:
        return None

    def search() -> list[Entity]:
        with stopwatch(timings, "entities"):
            return leg.memory.search_entities(leg.query_vector, leg.session_ids, limit)

    return POOL.submit(search)


def embed_query(embedder: Embedder, text: str) -> Vector | None:
    """The query vector, or None when the embedder fails: the turn goes on without it."""
    try:
        with timed(EMBED_SECONDS):
            return embedder.embed_query(text)
    except Exception as exc:
        log.warning("embedding the query failed, semantic and entity search sit out: %s", exc)
        return None


def _started(
    source: Source, query: Callable[[], LegQuery], timings: dict[str, float]
) -> Future[list[Episode]]:
    """An early source in the pool, for a query made there (it waits for the scope, which
    was submitted first, so already has a thread)."""
    return POOL.submit(lambda: _clocked(source, query(), timings))


def _clocked(source: Source, leg: LegQuery, timings: dict[str, float]) -> list[Episode]:
    with stopwatch(timings, source.step):
        return source.find(leg)


def _without_recent(
    found: dict[str, list[Episode]], recent: list[Episode]
) -> tuple[dict[str, list[Episode]], dict[str, tuple[int, ...]]]:
    """Every source's candidates without the turns the prompt holds (the semantic leg left
    them out inside its query too, to fill its depth), and where each dropped one was."""
    shown = {episode.id for episode in recent}
    kept = {name: [e for e in rows if e.id not in shown] for name, rows in found.items()}
    dropped = {
        name: tuple(at for at, e in enumerate(rows) if e.id in shown)
        for name, rows in found.items()
    }
    return kept, {name: at for name, at in dropped.items() if at}


def _known(scope: Scope) -> Future[Scope]:
    known: Future[Scope] = Future()
    known.set_result(scope)
    return known
