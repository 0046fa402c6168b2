"""Weighted Reciprocal Rank Fusion of the semantic and keyword rankings. Pure: no I/O.

    RRF(d) = w_semantic / (k + rank_semantic(d)) + w_keyword / (k + rank_keyword(d))

Ranks are 1-based; a list an episode is absent from adds nothing. The spec guards only the
keyword side against score-0 bleed-through; both are guarded here, so a strategy whose
weight is 0 brings no episode into the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from nexusai.config import RETRIEVAL
from nexusai.models import Episode


@dataclass(frozen=True)
class Moved:
    """One feature of a memory and how much it moved the learned ranker's score."""

    feature: str
    value: float
    effect: float
    meaning: str = ""


@dataclass(frozen=True)
class FusedEpisode:
    episode: Episode
    score: float
    semantic_rank: int | None
    keyword_rank: int | None
    moved: tuple[Moved, ...] = ()  # learned mode, with explain: what moved it most
    placed_by: Literal["ranker", "rrf"] | None = None  # learned mode: who chose its place
    tokens: int = 0  # packed into a budget: what its line in the prompt costs
    excerpt: tuple[int, int] | None = None  # packed as a passage: its span in the content

    @property
    def content(self) -> str:
        """What the LLM gets of it: the whole text, or the excerpt packing cut."""
        if self.excerpt is None:
            return self.episode.content
        start, end = self.excerpt
        return self.episode.content[start:end]


def fuse_ranked(
    semantic: Sequence[Episode],
    keyword: Sequence[Episode],
    semantic_weight: float,
    keyword_weight: float,
    limit: int,
) -> list[FusedEpisode]:
    """Fused episodes with their score and ranks, best first, at most `limit`. Ties go to
    the better single rank, then the lower id, so the order never depends on chance."""
    k = RETRIEVAL.RRF_K
    scores: dict[int, float] = {}
    episodes: dict[int, Episode] = {}
    ranks: dict[str, dict[int, int]] = {"semantic": {}, "keyword": {}}
    for side, ranked, weight in (
        ("semantic", semantic, semantic_weight),
        ("keyword", keyword, keyword_weight),
    ):
        for rank, episode in enumerate(ranked, start=1):
            ranks[side].setdefault(episode.id, rank)
            contribution = weight / (k + rank)
            if contribution > 0 and rank == ranks[side][episode.id]:
                scores[episode.id] = scores.get(episode.id, 0.0) + contribution
                episodes.setdefault(episode.id, episode)

    def order(episode_id: int) -> tuple[float, int, int]:
        best = min(
            ranks["semantic"].get(episode_id, 10**9), ranks["keyword"].get(episode_id, 10**9)
        )
        return (-scores[episode_id], best, episode_id)

    return [
        FusedEpisode(episodes[i], scores[i], ranks["semantic"].get(i), ranks["keyword"].get(i))
        for i in sorted(scores, key=order)[: max(limit, 0)]
    ]
