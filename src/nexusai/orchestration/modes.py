"""The fusion modes, one object each: what a mode needs from the two legs, and how it
fuses what they found. A turn (`context.assemble_context`) and `nexus eval` ask the mode
the `fusion` setting names, then pack what it gives (`packing`): one path for both.

A new mode is a class here with `asks` and `fuse`, and its name in `fusion_mode`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from nexusai.models import Scope
from nexusai.observability import stopwatch
from nexusai.orchestration.fusion import FusedEpisode, fuse_ranked
from nexusai.orchestration.learned import rank_learned
from nexusai.orchestration.memory_client import MemoryClient
from nexusai.orchestration.packing import PACK_DEPTH, pack_turn
from nexusai.orchestration.retrieval import LegQuery, Legs, get_legs, within_named_time
from nexusai.orchestration.settings import RuntimeSettings
from nexusai.ranking.model import Ranker, shipped


@dataclass(frozen=True)
class Asks:
    """What a mode needs of the legs for one turn."""

    depth: int  # rows each leg is asked for
    both: bool  # both legs, whatever their weights
    # Rows the keyword leg asks past `depth` for the recent turns it drops (None: the
    # spec's, `depth` again; a mode that reads only the first `depth` needs no more than
    # the recent turns' count).
    headroom: int | None
    limit: int  # how many memories fusion gives packing


class FusionMode(ABC):
    name: str
    packer: str  # how a budgeted turn packs what it fuses (`packing.PACKERS`)

    @abstractmethod
    def asks(self, settings: RuntimeSettings, legs: bool) -> Asks:
        """With `legs`, both legs are asked in full (a client re-fuses them)."""

    @abstractmethod
    def fuse(
        self, message: str, found: Legs, settings: RuntimeSettings, limit: int, explain: bool
    ) -> list[FusedEpisode]:
        """The fused memories, best first, at most `limit`."""


def pool_limit(settings: RuntimeSettings) -> int:
    """How many fused memories packing chooses from: the spec's `semanticLimit` without a
    budget, a deeper list with one."""
    if settings.context_budget <= 0:
        return settings.semantic_limit
    return max(settings.semantic_limit, PACK_DEPTH)


class RRF(FusionMode):
    """The spec's weighted Reciprocal Rank Fusion, both sides guarded."""

    name = "rrf"
    packer = "greedy"  # its scores say the order, not how likely each is to answer

    def asks(self, settings: RuntimeSettings, legs: bool) -> Asks:
        limit = pool_limit(settings)
        return Asks(limit, legs, None, limit)

    def fuse(
        self, message: str, found: Legs, settings: RuntimeSettings, limit: int, explain: bool
    ) -> list[FusedEpisode]:
        weights = (settings.semantic_weight, settings.keyword_weight)
        return fuse_ranked(found.semantic, found.keyword, *weights, limit)


class Learned(FusionMode):
    """The learned ranker over both legs' deeper lists; every third place RRF (1, 1)'s."""

    name = "learned"
    packer = "dense"  # its scores are probabilities: worth per token can be weighed

    def __init__(self, ranker: Ranker) -> None:
        self.ranker = ranker

    def asks(self, settings: RuntimeSettings, legs: bool) -> Asks:
        headroom = None if legs else settings.recent_limit
        return Asks(self.ranker.depth, True, headroom, pool_limit(settings))

    def fuse(
        self, message: str, found: Legs, settings: RuntimeSettings, limit: int, explain: bool
    ) -> list[FusedEpisode]:
        return rank_learned(message, found.semantic, found.keyword, self.ranker, limit, explain)


def fusion_mode(settings: RuntimeSettings, ranker: Ranker | None = None) -> FusionMode:
    """The mode the `fusion` setting names; `ranker` for the learned one (the shipped one
    when None)."""
    if settings.fusion == Learned.name:
        return Learned(ranker or shipped())
    return RRF()


@dataclass(frozen=True)
class Packed:
    """A turn's two lists of memories: the standing ones it carries whatever was found
    (`orchestration/standing.py`), and the searched ones, as the LLM gets them."""

    standing: list[FusedEpisode]
    memories: list[FusedEpisode]
    warnings: list[str] = field(default_factory=list)  # what the budget left out, said


def fuse_and_pack(
    mode: FusionMode,
    message: str,
    found: Legs,
    settings: RuntimeSettings,
    explain: bool = False,
    timings: dict[str, float] | None = None,
    standing: Sequence[FusedEpisode] = (),
) -> Packed:
    """The stages after the legs, as every turn runs them: the mode fuses, packing keeps
    what fits the budget, beside the `standing` candidates."""
    spent = timings if timings is not None else {}
    with stopwatch(spent, "fuse"):
        fused = mode.fuse(message, found, settings, mode.asks(settings, False).limit, explain)
    with stopwatch(spent, "pack"):
        return packed(mode, fused, message, settings, standing)


def packed(
    mode: FusionMode,
    fused: list[FusedEpisode],
    message: str,
    settings: RuntimeSettings,
    standing: Sequence[FusedEpisode] = (),
) -> Packed:
    """The stages after fusion: packing (the mode's packer, the budget's size, the
    standing candidates first) and order."""
    budget = settings.context_budget
    limit = settings.memory_limit if budget > 0 else settings.semantic_limit
    kept, memories = pack_turn(fused, standing, message, budget, limit, mode.packer)
    warnings = _left_out(budget, fused, standing, (kept, memories))
    return Packed(kept, in_order(memories, settings), warnings)


def _left_out(
    budget: int,
    fused: Sequence[FusedEpisode],
    standing: Sequence[FusedEpisode],
    packed: tuple[list[FusedEpisode], list[FusedEpisode]],
) -> list[str]:
    """What a budget too small left out, said, so that a turn is never short in silence."""
    kept, memories = packed
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


def in_order(memories: list[FusedEpisode], settings: RuntimeSettings) -> list[FusedEpisode]:
    """The memories in the `memoryOrder` the settings ask: fusion's, or by when said."""
    if settings.memory_order == "time":
        return sorted(memories, key=lambda f: (f.episode.occurred_at, f.episode.id))
    return memories


def turn_fused(
    memory: MemoryClient,
    message: str,
    vector: Sequence[float] | None,
    scope: Scope,
    settings: RuntimeSettings,
    ranker: Ranker | None = None,
    now: datetime | None = None,
) -> list[FusedEpisode]:
    """A turn's fused list for a vector made already, with no recent turns left out: what
    `nexus eval` asks (the legs and fusion as `POST /context` runs them; `packed` after,
    or one list packed at several budgets); `now` the turn's time (`timeAware`)."""
    rule, _ = within_named_time(settings, message, now, None)
    mode = fusion_mode(settings, ranker)
    asks = mode.asks(settings, False)
    asked = LegQuery(
        memory,
        message,
        vector,
        scope.session_ids,
        [],
        asks.depth,
        settings.keyword_budget,
        scope.every_session,
        asks.headroom,
        rule,
    )
    found = get_legs(asked, settings, asks.both)
    return mode.fuse(message, found, settings, asks.limit, False)
