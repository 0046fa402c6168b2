"""The fusion modes, one object each: what a mode needs from the two legs, and how it
fuses what they found. A turn's plan (`turn.plan`) asks the mode the `fusion` setting
names, and its executor fuses with it, for every face and `nexus eval` alike.

A new mode is a class here with `asks` and `fuse`, and its line in `MODES`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nexusai.orchestration.fusion import FusedEpisode, fuse_ranked
from nexusai.orchestration.learned import rank_learned
from nexusai.orchestration.packing import PACK_DEPTH
from nexusai.ranking.model import Ranker, shipped

if TYPE_CHECKING:  # settings takes its `fusion` choices from MODES, below
    from nexusai.orchestration.retrieval import Legs
    from nexusai.orchestration.settings import RuntimeSettings


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
    packer = "placed"  # its scores say the order: worth is read from the place

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


# Every mode, by name: the `fusion` setting takes its choices and default from here.
MODES: tuple[str, ...] = (RRF.name, Learned.name)
