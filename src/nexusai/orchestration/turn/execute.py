"""The one executor of a turn's plan, and the only place a turn runs things at the same
time: the scope, the recent turns and the early sources while the message is embedded,
then the sources that need its vector; fusion, packing and the entities after."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from nexusai.embedders import Embedder, Vector
from nexusai.models import Episode, Scope
from nexusai.observability import EMBED_SECONDS, stopwatch, timed
from nexusai.orchestration.context import Context
from nexusai.orchestration.memory_client import MemoryClient
from nexusai.orchestration.modes import fusion_mode
from nexusai.orchestration.retrieval import LegQuery, Legs
from nexusai.orchestration.settings import RuntimeSettings
from nexusai.orchestration.standing import standing_candidates
from nexusai.orchestration.turn.pack import pack
from nexusai.orchestration.turn.plan import TurnPlan, plan
from nexusai.orchestration.turn.request import TurnRequest
from nexusai.orchestration.turn.sources import SOURCES, Source
from nexusai.ranking.model import Ranker

log = logging.getLogger("nexusai.context")

# Work that waits on I/O (SQLite, Qdrant, or the memory service over HTTP) runs beside
# other work of the same turn, so a turn costs the slower of the two, not the sum.
POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="nexus-turn")


def run_turn(
    memory: MemoryClient,
    embedder: Embedder,
    settings: RuntimeSettings,
    request: TurnRequest,
    ranker: Ranker | None = None,
) -> Context:
    """The turn these settings give: its plan under the mode `fusion` names (`ranker` the
    learned mode's, the shipped one when None), executed."""
    return execute(plan(settings, request, fusion_mode(settings, ranker)), memory, embedder)


def execute(turn: TurnPlan, memory: MemoryClient, embedder: Embedder) -> Context:
    """The context the plan asks for: what each source found, without the recent turns the
    prompt holds, fused by the plan's mode and packed into its budget."""
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
    wanted = [source for source in SOURCES if source.wanted(turn)]
    early = {
        s.name: _started(s, lambda: turn.leg_query(memory, scope_call.result()), timings)
        for s in wanted
        if s.early
    }
    warnings = turn.warnings(embedder)
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
    asked = turn.leg_query(memory, scope, vector, [episode.id for episode in recent])
    late = {s.name: _clocked(s, asked, timings) for s in wanted if not s.early}
    found = _without_recent({**{n: f.result() for n, f in early.items()}, **late}, recent)
    return _assembled(turn, embedder, Gathered(asked, vector, recent, found, warnings, timings))


@dataclass(frozen=True)
class Gathered:
    """What a turn's I/O before fusion gave: how its sources were asked (the scope, the
    vector), the recent turns, each source's candidates without them, and what it said."""

    asked: LegQuery
    vector: Vector | None
    recent: list[Episode]
    found: dict[str, list[Episode]]
    warnings: list[str]
    timings: dict[str, float]


def _assembled(turn: TurnPlan, embedder: Embedder, gathered: Gathered) -> Context:
    settings, found, timings = turn.settings, gathered.found, gathered.timings
    asked, vector = gathered.asked, gathered.vector
    legs = Legs(found.get("semantic", []), found.get("keyword", []))
    with stopwatch(timings, "standing"):
        standing = standing_candidates(
            found.get("standing", []),
            embedder,
            vector,
            settings.standing_limit,
            settings.standing_floor,
        )
    with stopwatch(timings, "fuse"):
        fused = turn.mode.fuse(turn.message, legs, settings, turn.fused, turn.request.explain)
    with stopwatch(timings, "pack"):
        kept, memories, left_out = pack(turn, fused, standing)
    with stopwatch(timings, "entities"):
        entities = (
            asked.memory.search_entities(vector, asked.session_ids, settings.entity_limit)
            if settings.entity_limit > 0
            else []
        )
    return Context(
        turn.request.session_id,
        turn.message,
        gathered.recent,
        memories,
        entities,
        kept,
        gathered.warnings + left_out,
        legs if turn.keeps_legs else None,
        timings,
        settings.context_budget,
        turn.window,
        fused,
        standing,
    )


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


def _clocked(source: Source, asked: LegQuery, timings: dict[str, float]) -> list[Episode]:
    with stopwatch(timings, source.step):
        return source.find(asked)


def _without_recent(
    found: dict[str, list[Episode]], recent: list[Episode]
) -> dict[str, list[Episode]]:
    """Every source's candidates without the turns the prompt holds: the one place they
    are dropped (the semantic leg left them out inside its query too, to fill its depth)."""
    held = {episode.id for episode in recent}
    return {name: [e for e in rows if e.id not in held] for name, rows in found.items()}


def _known(scope: Scope) -> Future[Scope]:
    known: Future[Scope] = Future()
    known.set_result(scope)
    return known
