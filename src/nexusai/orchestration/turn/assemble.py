"""The second half of a turn: what `gather` read, as the context the LLM gets. Pure: no
store, no model, no clock but the steps' timings. The standing memories the settings
carry, fusion of the sources the plan weighs (by name), packing into the budget, the order
and what a budget too small left out. The eval and the ranker's training replay it: one
`gather` per question and depth, then `assemble` per weight pair, budget and ranker."""

from __future__ import annotations

from nexusai.observability import stopwatch
from nexusai.orchestration.context import Context
from nexusai.orchestration.standing import carried
from nexusai.orchestration.turn.gather import Gathered
from nexusai.orchestration.turn.pack import pack
from nexusai.orchestration.turn.plan import TurnPlan


def assemble(turn: TurnPlan, gathered: Gathered) -> Context:
    """The context `turn` gives from what was gathered for it (or for a plan that asked
    the same sources as deep: a source this plan does not ask is not read)."""
    settings, timings = turn.settings, dict(gathered.timings)
    # Without a vector nothing is near the message: the newest come, and no floor holds.
    floor = settings.standing_floor if gathered.vector is not None else 0.0
    standing = carried(gathered.standing, settings.standing_limit, floor)
    found = {name: gathered.found.get(name, []) for name in turn.fused()}
    with stopwatch(timings, "fuse"):
        fused = turn.mode.fuse(turn.message, found, turn.weights, turn.pool, turn.request.explain)
    with stopwatch(timings, "pack"):
        kept, memories, left_out = pack(turn, fused, standing)
    legs = {name: gathered.found.get(name, []) for name in ("semantic", "keyword")}
    return Context(
        session_id=turn.request.session_id,
        message=turn.message,
        recent=gathered.recent,
        memories=memories,
        entities=gathered.entities,
        standing=kept,
        warnings=turn.warnings(gathered.embedder) + gathered.warnings + left_out,
        legs=legs if turn.request.legs else None,
        timings=timings,
        budget=settings.context_budget,
        window=turn.window,
        fused=fused,
    )
