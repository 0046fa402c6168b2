"""A turn's last stage before its answer: packing what fusion gave into the budget beside
the standing candidates, in the order the settings ask, saying what a budget too small
left out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import tzinfo

from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.layout import block_tokens
from nexusai.orchestration.packing import pack_in_stages
from nexusai.orchestration.standing import carried, standing_left_out
from nexusai.orchestration.turn.plan import TurnPlan

Packed = tuple[list[FusedEpisode], list[FusedEpisode], list[str]]


def carry_and_pack(
    turn: TurnPlan,
    lists: Mapping[int, Sequence[FusedEpisode]],
    candidates: Sequence[FusedEpisode],
    floor: float,
) -> Packed:
    """What a turn gives after fusion: the standing ones its settings carry of
    `candidates` at `floor` (`standing.carried`), then `pack`, and what either left out,
    said. `assemble` runs it, and the eval's budgets replay it per budget and floor
    (`evaluation.budgets`)."""
    carried_ones = carried(candidates, turn.settings.standing_limit, floor)
    kept, memories, left_out = pack(turn, lists, carried_ones)
    return kept, memories, [*standing_left_out(candidates, carried_ones), *left_out]


def pack(
    turn: TurnPlan, lists: Mapping[int, Sequence[FusedEpisode]], standing: Sequence[FusedEpisode]
) -> Packed:
    """(standing ones kept, memories, warnings): packing by the plan's packer into the
    budget in the plan's stages (`lists`: fusion's list at each stage's depth; at most
    `memoryLimit` memories; without a budget, the spec's first `semanticLimit`), the
    memories then in the plan's order (`memoryOrder`)."""
    settings = turn.settings
    budget = settings.context_budget
    limit = settings.memory_limit if budget > 0 else settings.semantic_limit
    chars = turn.packing.excerpt_chars
    zone = turn.zone
    kept, memories = pack_in_stages(
        lists, turn.stages, standing, turn.message, limit, turn.packer, chars, zone
    )
    if turn.order == "time":
        memories = sorted(memories, key=lambda f: (f.episode.occurred_at, f.episode.id))
    fused = lists[turn.stages[-1].depth]
    return kept, memories, _left_out(budget, fused, standing, kept, memories, zone)


def _left_out(
    budget: int,
    fused: Sequence[FusedEpisode],
    standing: Sequence[FusedEpisode],
    kept: Sequence[FusedEpisode],
    memories: Sequence[FusedEpisode],
    zone: tzinfo | None,
) -> list[str]:
    """What a budget too small left out, said, so that a turn is never short in silence."""
    if budget <= 0:
        return []
    warnings = []
    given = {f.episode.id for f in kept}
    dropped = [f for f in standing if f.episode.id not in given]
    if pinned := [f.episode.id for f in dropped if f.episode.pinned]:
        warnings.append(
            f"pinned {_episodes(pinned)} did not fit contextBudget {budget} (a pinned one"
            " comes whole, before any memory); raise it, or unpin what is no longer needed"
        )
    if recognised := [f.episode.id for f in dropped if not f.episode.pinned]:
        warnings.append(
            f"{len(recognised)} of the user's recognised rules and preferences"
            f" ({_episodes(recognised)}) did not fit: they may take a quarter of"
            f" contextBudget ({budget}) after the pinned ones; raise it"
        )
    if not memories and any(f.episode.id not in given for f in fused):
        left = budget - block_tokens(kept, [], zone)
        warnings.append(
            f"contextBudget {budget} left room for no memory ({left} tokens after the standing"
            " ones, less than any memory found costs); raise it"
        )
    return warnings


def _episodes(ids: Sequence[int]) -> str:
    """Episode ids as a warning names them: "episode 99", "episodes 3, 7 and 12"."""
    if len(ids) == 1:
        return f"episode {ids[0]}"
    head = ", ".join(map(str, ids[:-1]))
    return f"episodes {head} and {ids[-1]}"
