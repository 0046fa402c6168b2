"""A turn's last stage before its answer: packing what fusion gave into the budget beside
the standing candidates, in the order the settings ask, saying what a budget too small
left out."""

from __future__ import annotations

from collections.abc import Sequence

from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.packing import PACKERS, pack_turn
from nexusai.orchestration.turn.plan import TurnPlan

Packed = tuple[list[FusedEpisode], list[FusedEpisode], list[str]]


def pack(turn: TurnPlan, fused: list[FusedEpisode], standing: Sequence[FusedEpisode]) -> Packed:
    """(standing ones kept, memories, warnings): packing by the mode's packer into the
    budget (at most `memoryLimit` memories; without a budget, the spec's first
    `semanticLimit`), the memories then in the plan's order (`memoryOrder`)."""
    settings = turn.settings
    budget = settings.context_budget
    limit = settings.memory_limit if budget > 0 else settings.semantic_limit
    packer = PACKERS[turn.mode.packer]
    kept, memories = pack_turn(fused, standing, turn.message, budget, limit, packer)
    if turn.order == "time":
        memories = sorted(memories, key=lambda f: (f.episode.occurred_at, f.episode.id))
    return kept, memories, _left_out(budget, fused, standing, kept, memories)


def _left_out(
    budget: int,
    fused: Sequence[FusedEpisode],
    standing: Sequence[FusedEpisode],
    kept: Sequence[FusedEpisode],
    memories: Sequence[FusedEpisode],
) -> list[str]:
    """What a budget too small left out, said, so that a turn is never short in silence."""
    if budget <= 0:
        return []
    warnings = []
    given = {f.episode.id for f in kept}
    if dropped := [f for f in standing if f.episode.id not in given]:
        warnings.append(
            f"{len(dropped)} of the standing memories did not fit: the user's recognised rules"
            f" and preferences may take a quarter of contextBudget ({budget}); raise it"
        )
    if not memories and any(f.episode.id not in given for f in fused):
        left = budget - sum(f.tokens for f in kept)
        warnings.append(
            f"contextBudget {budget} left room for no memory ({left} tokens after the standing"
            " ones, less than any memory found costs); raise it"
        )
    return warnings
