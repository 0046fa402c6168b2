"""Context assembly: what the LLM sees for one turn. The query is embedded once, here, and
that one vector serves both fused episode search and entity search."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime

from nexusai.embedders import Embedder, Vector
from nexusai.models import Entity, Episode, EpisodeFilter, Scope
from nexusai.observability import EMBED_SECONDS, stopwatch, timed
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.memory_client import MemoryClient
from nexusai.orchestration.modes import Learned, fuse_and_pack, fusion_mode
from nexusai.orchestration.retrieval import (
    POOL,
    LegQuery,
    Legs,
    get_legs,
    start_keyword,
    wants_keyword,
    within_named_time,
)
from nexusai.orchestration.settings import RuntimeSettings
from nexusai.orchestration.standing import standing_candidates, standing_of
from nexusai.ranking.model import Ranker
from nexusai.timewords import TimeWindow

log = logging.getLogger("nexusai.context")


@dataclass(frozen=True)
class Context:
    session_id: int
    message: str
    recent: list[Episode]
    memories: list[FusedEpisode]
    entities: list[Entity] = field(default_factory=list)
    # Pinned episodes and the user's rules and preferences (`orchestration/standing.py`).
    standing: list[FusedEpisode] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    legs: Legs | None = None  # both legs' full lists, when asked for
    timings: dict[str, float] = field(default_factory=dict)  # ms per step, for Server-Timing
    budget: int = 0  # the contextBudget the memories were packed into (0: none)
    window: TimeWindow | None = None  # the time the message named, searched within (timeAware)


def embed_query(embedder: Embedder, text: str) -> Vector | None:
    """The query vector, or None when the embedder fails: the turn goes on without it."""
    try:
        with timed(EMBED_SECONDS):
            return embedder.embed_query(text)
    except Exception as exc:
        log.warning("embedding the query failed, semantic and entity search sit out: %s", exc)
        return None


@dataclass(frozen=True)
class _Asking:
    """What both legs of a turn are asked, before its scope, vector and recent turns are
    known."""

    memory: MemoryClient
    message: str
    depth: int
    budget: int
    # The ranker reads each leg's first `depth` rows only, so the keyword leg needs past
    # them no more than the recent turns it drops; RRF's formula reads the whole list, and
    # the inspector re-fuses the legs a turn returns (None: the spec's headroom).
    headroom: int | None
    rule: EpisodeFilter | None

    def query(
        self, scope: Scope, vector: Vector | None = None, recent: list[int] | None = None
    ) -> LegQuery:
        return LegQuery(
            self.memory,
            self.message,
            vector,
            scope.session_ids,
            recent or [],
            self.depth,
            self.budget,
            scope.every_session,
            self.headroom,
            self.rule,
        )


def _warnings(settings: RuntimeSettings, learned: Ranker | None, embedder: Embedder) -> list[str]:
    """What a turn says of its settings before it searches."""
    warnings = []
    if learned and (trained := learned.trained_on.get("embedder", embedder.name)) != embedder.name:
        warnings.append(
            f"the learned ranker was trained on {trained}'s vectors and this service embeds"
            f" with {embedder.name}, so its order is not what was measured: train one for"
            " this embedder (nexus ranker train) and point NEXUS_RANKER at it"
        )
    if settings.semantic_weight == 0 and settings.keyword_weight == 0 and not learned:
        # Within the spec's ranges, so allowed; but a turn with no memories should say why.
        warnings.append(
            "semanticWeight and keywordWeight are both 0, so no memories are retrieved:"
            " set one above 0 (PATCH /settings)"
        )
    return warnings


def assemble_context(
    memory: MemoryClient,
    embedder: Embedder,
    settings: RuntimeSettings,
    session_id: int,
    message: str,
    legs: bool = False,
    explain: bool = False,
    ranker: Ranker | None = None,
    scope: Scope | None = None,
    rule: EpisodeFilter | None = None,
    now: datetime | None = None,
) -> Context:
    """The turn's context: the legs the fusion mode asks for, fused by it, then packed
    into the `contextBudget` (`modes`, `packing`). With `legs`, both legs are asked
    whatever their weights and their lists come back too (the inspector re-fuses them at
    other weights). With `explain`, at `fusion` "learned", each memory says which features
    moved it most; `ranker` is the learned mode's (the shipped one when None); `scope` the
    session's, when the caller read it already (a project key's check); `rule` which
    episodes the turn may see (both legs and the standing ones choose inside their
    searches; entities are not filtered); `now` the turn's own time, which a time the
    message names is read against (the clock's when None)."""
    rule, window = within_named_time(settings, message, now, rule)
    mode = fusion_mode(settings, ranker)
    learned = mode.ranker if isinstance(mode, Learned) else None
    asks = mode.asks(settings, legs)
    both = legs or asks.both
    asking = _Asking(memory, message, asks.depth, settings.keyword_budget, asks.headroom, rule)
    timings: dict[str, float] = {}
    # The scope and the recent turns are fetched, and the keyword leg searched, while the
    # message is embedded. The keyword leg waits in the pool for the scope, which was
    # submitted first, so already has a thread.
    scope_call = _known(scope) if scope is not None else POOL.submit(memory.scope, session_id)
    recent_call = (
        POOL.submit(memory.recent_episodes, session_id, settings.recent_limit)
        if settings.recent_limit
        else None
    )
    keyword = (
        start_keyword(lambda: asking.query(scope_call.result()), timings)
        if wants_keyword(settings, both)
        else None
    )
    standing_call = POOL.submit(lambda: standing_of(memory, scope_call.result(), rule))
    wants_entities = settings.entity_limit > 0
    warnings = _warnings(settings, learned, embedder)
    vector = None
    if settings.semantic_weight > 0 or wants_entities or both:
        with stopwatch(timings, "embed"):
            vector = embed_query(embedder, message)
        if vector is None:
            warnings.append("the embedder failed: only keyword memories this turn")
    scope = scope_call.result()  # NotFound for an unknown session
    if rebuilding := memory.vectors_rebuilding():
        warnings.append(
            f"the vector index is being rebuilt: {rebuilding} episodes are found by keyword"
            " only until it ends"
        )
    recent = recent_call.result() if recent_call else []
    asked = asking.query(scope, vector, [episode.id for episode in recent])
    found = get_legs(asked, settings, both, timings, keyword)
    with stopwatch(timings, "standing"):
        standing = _standing(standing_call.result(), embedder, vector, settings, asked)
    turn = fuse_and_pack(mode, message, found, settings, explain, timings, standing)
    warnings += turn.warnings
    with stopwatch(timings, "entities"):
        entities = (
            memory.search_entities(vector, scope.session_ids, settings.entity_limit)
            if wants_entities
            else []
        )
    kept = found if legs else None
    return Context(
        session_id,
        message,
        recent,
        turn.memories,
        entities,
        turn.standing,
        warnings,
        kept,
        timings,
        settings.context_budget,
        window,
    )


def _known(scope: Scope) -> Future[Scope]:
    known: Future[Scope] = Future()
    known.set_result(scope)
    return known


def _standing(
    found: list[Episode],
    embedder: Embedder,
    vector: Vector | None,
    settings: RuntimeSettings,
    asked: LegQuery,
) -> list[FusedEpisode]:
    """The standing candidates of the scope, but the recent turns the prompt holds."""
    recent = set(asked.recent_ids)
    found = asked.within([e for e in found if e.id not in recent])
    return standing_candidates(found, embedder, vector, settings.standing_limit)
