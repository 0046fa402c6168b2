"""The learned fusion mode (`fusion: "learned"`): both legs' deeper lists, every candidate
scored by the ranker, the best `limit` kept. Pure: no I/O.

One rule sits beside the ranker: RRF's first choice at (1, 1), the candidate both legs
agree on most, is always among the memories (in the last place if the ranker would leave
it out). The ranker learns what most questions want and the minority pays; this keeps the
one memory RRF is surest of, for under 0.01 of overall recall (docs/evaluation.md)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode, Moved, fuse_ranked
from nexusai.ranking.features import FEATURES, Candidates, Matrix, candidates
from nexusai.ranking.model import Ranker

EXPLAINED = 3  # features shown per memory with explain


def rank_learned(
    query: str,
    semantic: Sequence[Episode],
    keyword: Sequence[Episode],
    ranker: Ranker,
    limit: int,
    explain: bool = False,
) -> list[FusedEpisode]:
    """The best `limit` of both lists by the ranker's score. Ties go to the better single
    rank, then the lower id, as in RRF."""
    semantic, keyword = semantic[: ranker.depth], keyword[: ranker.depth]
    pool = candidates(query, semantic, keyword)
    if not pool.episodes or limit <= 0:
        return []
    scores = ranker.scores(pool.matrix).tolist()
    chosen = sorted(range(len(pool.episodes)), key=lambda i: _order(pool, scores[i], i))[:limit]
    _keep_rrfs_first(pool, semantic, keyword, chosen)
    moved = ranker.contributions(pool.matrix[chosen]) if explain else None
    return [
        FusedEpisode(
            pool.episodes[i],
            float(scores[i]),
            pool.semantic_ranks[i],
            pool.keyword_ranks[i],
            _most_moved(pool.matrix[i], moved[row]) if moved is not None else (),
        )
        for row, i in enumerate(chosen)
    ]


def _keep_rrfs_first(
    pool: Candidates, semantic: Sequence[Episode], keyword: Sequence[Episode], chosen: list[int]
) -> None:
    """RRF's first choice takes the last place when the ranker left it out."""
    first = fuse_ranked(semantic, keyword, 1.0, 1.0, 1)
    if not first:
        return
    index = next(i for i, e in enumerate(pool.episodes) if e.id == first[0].episode.id)
    if index not in chosen:
        chosen[-1] = index


def _order(pool: Candidates, score: float, i: int) -> tuple[float, int, int]:
    ranks = [r for r in (pool.semantic_ranks[i], pool.keyword_ranks[i]) if r is not None]
    return (-score, min(ranks), pool.episodes[i].id)


def _most_moved(values: Matrix, effects: Matrix) -> tuple[Moved, ...]:
    top = np.argsort(-np.abs(effects), kind="stable")[:EXPLAINED]
    return tuple(Moved(FEATURES[j], float(values[j]), float(effects[j])) for j in top)
