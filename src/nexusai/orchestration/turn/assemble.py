"""The second half of a turn: what `gather` read, as the context the LLM gets. Pure: no
store, no model, no clock but the steps' timings. The standing memories the settings
carry, fusion of the sources the plan weighs (by name), packing into the budget, the order
and what a budget too small left out. The eval and the ranker's training replay it: one
`gather` per question and depth, then `assemble` per weight pair, budget and ranker."""

from __future__ import annotations

from nexusai.models import Entity, Episode
from nexusai.observability import stopwatch
from nexusai.orchestration.context import Context
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.turn.gathered import Gathered
from nexusai.orchestration.turn.pack import carry_and_pack
from nexusai.orchestration.turn.plan import TurnPlan


def assemble(turn: TurnPlan, gathered: Gathered) -> Context:
    """The context `turn` gives from what was gathered for it (or for a plan that asked
    the same sources as deep: a source this plan does not ask is not read)."""
    settings, timings = turn.settings, dict(gathered.timings)
    # Without a vector nothing is near the message: the newest come, and no floor holds.
    floor = settings.standing_floor if gathered.vector is not None else 0.0
    with stopwatch(timings, "fuse"):
        lists = {depth: _fused(turn, gathered, depth) for _, depth in turn.stages}
    fused = lists[turn.stages[-1].depth]
    with stopwatch(timings, "pack"):
        kept, memories, left_out = carry_and_pack(turn, lists, gathered.standing_candidates, floor)
    return Context(
        session_id=turn.request.session_id,
        message=turn.message,
        recent=gathered.recent,
        memories=memories,
        entities=_entities(turn, gathered),
        standing=kept,
        warnings=[
            *turn.warnings(gathered.embedder),
            *gathered.warnings,
            *left_out,
        ],
        lists=_lists(turn, gathered) if turn.request.legs else None,
        timings=timings,
        budget=settings.context_budget,
        window=turn.window,
        fused=fused,
        zone=turn.zone,
    )


def _lists(turn: TurnPlan, gathered: Gathered) -> dict[str, list[Episode]]:
    """Each fused source's full list, by its name (a client re-fuses them)."""
    return {name: gathered.found.get(name, []) for name in turn.fused()}


def _fused(turn: TurnPlan, gathered: Gathered, depth: int) -> list[FusedEpisode]:
    """Fusion's list at `depth`: the turn's own, or a shallower stage's from the first rows
    of each source, as a turn of that smaller budget reads and fuses them."""
    if depth == turn.pool:
        found = {name: gathered.found.get(name, []) for name in turn.fused()}
        return turn.mode.fuse(turn.message, found, turn.weights, turn.pool, turn.request.explain)
    needs = turn.mode.needs(depth, turn.request.legs, turn.settings.recent_limit)
    found = {
        name: gathered.first_rows(name, turn.source(name).rows(needs.depth, needs.headroom))
        for name in turn.fused()
    }
    return turn.mode.fuse(turn.message, found, turn.weights, needs.limit, turn.request.explain)


def _entities(turn: TurnPlan, gathered: Gathered) -> list[Entity]:
    """The entities the search found; under a filter, only those whose latest mentions
    include an episode the turn's sources found (each kept by the filter): an entity only
    episodes the filter left out mention is not the turn's."""
    if turn.rule is None or turn.rule.is_empty():
        return gathered.entities
    found = {e.id for rows in gathered.found.values() for e in rows}
    found |= {f.episode.id for f in gathered.standing_candidates}
    return [e for e in gathered.entities if found.intersection(e.latest_mention_ids)]
