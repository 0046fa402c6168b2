"""Weighted Reciprocal Rank Fusion of named rankings (the spec's two legs, and any source
given a weight), each memory keeping its rank in every list by the list's name. Pure: no
I/O.

    RRF(d) = sum over lists L of  w_L / (k + rank_L(d))

Ranks are 1-based; a list an episode is absent from adds nothing. The spec guards only the
keyword side against score-0 bleed-through; every list is guarded here, so a source whose
weight is 0 brings no episode into the result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from nexusai.models import Episode
from nexusai.ranking.features import rrf_term


@dataclass(frozen=True)
class Moved:
    """One feature of a memory and how much it moved the learned ranker's score."""

    feature: str
    value: float
    effect: float
    meaning: str = ""


@dataclass(frozen=True)
class FusedEpisode:
    """A memory as fusion gives it: its score, and its 1-based rank in each source that
    found it, by the source's name (a source that missed it is not there)."""

    episode: Episode
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict, hash=False)
    moved: tuple[Moved, ...] = ()  # learned mode, with explain: what moved it most
    placed_by: Literal["ranker", "rrf"] | None = None  # learned mode: who chose its place
    tokens: int = 0  # packed into a budget: what its line in the prompt costs
    excerpt: tuple[int, int] | None = None  # packed as a passage: its span in the content

    def priced(self, tokens: int, excerpt: tuple[int, int] | None = None) -> FusedEpisode:
        """The memory as packing gives it: whole (or as the `excerpt`), costing `tokens`.
        Made directly, not by `dataclasses.replace`: packing makes millions in an eval."""
        return FusedEpisode(
            self.episode,
            self.score,
            self.ranks,
            self.moved,
            self.placed_by,
            tokens,
            excerpt,
        )

    @property
    def content(self) -> str:
        """What the LLM gets of it: the whole text, or the excerpt packing cut."""
        if self.excerpt is None:
            return self.episode.content
        start, end = self.excerpt
        return self.episode.content[start:end]


def fuse_weighted(
    lists: Mapping[str, Sequence[Episode]], weights: Mapping[str, float], limit: int
) -> list[FusedEpisode]:
    """Weighted RRF over any number of named lists, best first, at most `limit`: a list
    adds `weights[name] / (k + rank)` for each episode it holds, and a list without a
    weight above 0 adds nothing. The sums run in `lists`' order (so that a score is the
    same float every time). Ties go to the better single rank, then the lower id, so the
    order never depends on chance."""
    scores: dict[int, float] = {}
    episodes: dict[int, Episode] = {}
    ranks: dict[str, dict[int, int]] = {name: {} for name in lists}
    for name, ranked in lists.items():
        weight, first = weights.get(name, 0.0), ranks[name]
        for rank, episode in enumerate(ranked, start=1):
            first.setdefault(episode.id, rank)
            contribution = float(rrf_term(weight, rank))
            if contribution > 0 and rank == first[episode.id]:
                scores[episode.id] = scores.get(episode.id, 0.0) + contribution
                episodes.setdefault(episode.id, episode)

    def order(episode_id: int) -> tuple[float, int, int]:
        best = min(found[episode_id] for found in ranks.values() if episode_id in found)
        return (-scores[episode_id], best, episode_id)

    return [
        FusedEpisode(episodes[i], scores[i], _ranks_of(ranks, i))
        for i in sorted(scores, key=order)[: max(limit, 0)]
    ]


def _ranks_of(ranks: Mapping[str, Mapping[int, int]], episode_id: int) -> dict[str, int]:
    """An episode's rank in each list that holds it, by the list's name."""
    return {name: found[episode_id] for name, found in ranks.items() if episode_id in found}
