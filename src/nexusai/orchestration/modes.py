"""The fusion modes, one object each: what a mode needs of the sources, how it fuses what
they found, and what it warns of. A turn's plan (`turn.plan`) asks the mode the `fusion`
setting names, and `turn.assemble` fuses with it, for every face and `nexus eval` alike.

A new mode is a class here with `asks` and `fuse`, and its line in `MODES`. Modes take
plain values, not the settings: the settings take their `fusion` choices from `MODES`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode, fuse_weighted
from nexusai.orchestration.learned import rank_learned
from nexusai.ranking.model import Ranker, shipped

Found = Mapping[str, Sequence[Episode]]  # each fused source's candidates, by its name


@dataclass(frozen=True, kw_only=True)
class Needs:
    """What a mode needs of the sources for one turn."""

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
    def needs(self, pool: int, legs: bool, recent: int) -> Needs:
        """For a turn whose packing chooses from `pool` memories and whose prompt holds
        `recent` turns; with `legs`, both legs are asked in full (a client re-fuses them)."""

    @abstractmethod
    def fuse(
        self,
        message: str,
        found: Found,
        weights: Mapping[str, float],
        limit: int,
        explain: bool,
    ) -> list[FusedEpisode]:
        """The fused memories, best first, at most `limit`."""

    def warnings(self, embedder: str, weights: Mapping[str, float]) -> list[str]:
        """What a turn in this mode says of its settings before it searches."""
        return []


class RRF(FusionMode):
    """The spec's weighted Reciprocal Rank Fusion, every list guarded: each source with a
    weight counts by it."""

    name = "rrf"
    packer = "placed"  # its scores say the order: worth is read from the place

    def needs(self, pool: int, legs: bool, recent: int) -> Needs:
        return Needs(depth=pool, both=legs, headroom=None, limit=pool)

    def fuse(
        self,
        message: str,
        found: Found,
        weights: Mapping[str, float],
        limit: int,
        explain: bool,
    ) -> list[FusedEpisode]:
        return fuse_weighted(found, weights, limit)

    def warnings(self, embedder: str, weights: Mapping[str, float]) -> list[str]:
        if any(weights.values()):
            return []
        # Within the spec's ranges, so allowed; but a turn with no memories says why.
        return [
            "semanticWeight and keywordWeight are both 0, so no memories are retrieved:"
            " set one above 0 (PATCH /settings)"
        ]


class Learned(FusionMode):
    """The learned ranker over the deeper lists of the sources it reads (`learned.READS`),
    as deep as it was trained or as the pool where that is deeper; every third place RRF
    (1, 1)'s."""

    name = "learned"
    packer = "dense"  # its scores are probabilities: worth per token can be weighed

    def __init__(self, ranker: Ranker) -> None:
        self.ranker = ranker

    def needs(self, pool: int, legs: bool, recent: int) -> Needs:
        headroom = None if legs else recent
        depth = max(self.ranker.depth, pool)  # a large budget's pool is deeper than trained
        return Needs(depth=depth, both=True, headroom=headroom, limit=pool)

    def fuse(
        self,
        message: str,
        found: Found,
        weights: Mapping[str, float],
        limit: int,
        explain: bool,
    ) -> list[FusedEpisode]:
        return rank_learned(message, found, self.ranker, limit, explain)

    def warnings(self, embedder: str, weights: Mapping[str, float]) -> list[str]:
        trained = self.ranker.trained_on.get("embedder", embedder)
        if trained == embedder:
            return []
        return [
            f"the learned ranker was trained on {trained}'s vectors and this service"
            f" embeds with {embedder}, so its order is not what was measured: train"
            " one for this embedder (nexus ranker train) and point NEXUS_RANKER at it"
        ]


# Every mode by name, the spec's first: the `fusion` setting takes its choices and default
# from here. A factory gets the ranker a learned mode is to use (None: the shipped one).
MODES: dict[str, Callable[[Ranker | None], FusionMode]] = {
    RRF.name: lambda ranker: RRF(),
    Learned.name: lambda ranker: Learned(ranker or shipped()),
}
"""Every fusion mode by name. A new entry needs: a `FusionMode` with `asks`, `fuse` and a
`packer` named in `packing.PACKERS` (or a new packer there); `make docs`, since the
`fusion` setting's choices (docs/retrieval.md, docs/api.md) come from here; its runs in
`nexus eval` (`evaluation/harness.py` scores RRF's weight pairs and the learned mode by
name); and, for the inspector's sliders, its turn asked of the server (the page re-fuses
RRF only, `inspector/ui/fusion.js`)."""


def fusion_mode(name: str, ranker: Ranker | None = None) -> FusionMode:
    """The mode `name` (the `fusion` setting) names; `ranker` for the learned one."""
    return MODES[name](ranker)
