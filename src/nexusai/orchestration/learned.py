"""The learned fusion mode (`fusion: "learned"`): both legs' deeper lists, every candidate
scored by the ranker, the best `limit` kept. Pure: no I/O.

One rule sits beside the ranker: every third memory is RRF's next choice at (1, 1) that is
not already among them. The ranker learns what most questions want, and the minority
(a question about what the assistant said, in a chat where the user's own messages hold
most facts) pays; a third of the memories chosen as RRF chooses them bounds that loss, for
under 0.01 of overall recall (docs/evaluation.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode, Moved
from nexusai.ranking.features import FEATURES, MEANINGS, Candidates, Matrix, candidates
from nexusai.ranking.model import Ranker

# The sources the ranker's features read, by name (`ranking.features.candidates`): a
# source not here is not read by this mode; one added here needs features that read it,
# and a ranker trained on them.
READS = ("semantic", "keyword")
EXPLAINED = 3  # features shown per memory with explain
RRF_EVERY = 3  # every third memory is RRF's: docs/evaluation.md has 2 to 5 measured


def rank_learned(
    query: str,
    found: Mapping[str, Sequence[Episode]],
    ranker: Ranker,
    limit: int,
    explain: bool = False,
) -> list[FusedEpisode]:
    """The best `limit` of both lists by the ranker's score, every `RRF_EVERY`-th place
    given to RRF. Ties go to the better single rank, then the lower id, as in RRF. Each
    list is read as deep as the ranker was trained, or as `limit` where that is deeper
    (a large budget's pool: `packing.stages`); what a leg gives past that (the
    keyword leg's headroom for the recent turns) is not read."""
    depth = max(ranker.depth, limit)
    semantic, keyword = (found.get(name, [])[:depth] for name in READS)
    pool = candidates(query, semantic, keyword)
    if not pool.episodes or limit <= 0:
        return []
    scores = ranker.scores(pool.matrix)
    ties = _ties(pool)
    chosen = _interleaved(_best_first(scores, ties), _rrf_order(pool, ties), limit)
    moved = ranker.contributions(pool.matrix[chosen]) if explain else None
    return [
        FusedEpisode(
            pool.episodes[i],
            float(scores[i]),
            _ranks(pool, i),
            _most_moved(pool.matrix[i], moved[row]) if moved is not None else (),
            "rrf" if _rrfs_place(row) else "ranker",
        )
        for row, i in enumerate(chosen)
    ]


def _ranks(pool: Candidates, i: int) -> dict[str, int]:
    """The candidate's rank in each source that found it, by name."""
    ranks = zip(READS, (pool.semantic_ranks[i], pool.keyword_ranks[i]), strict=True)
    return {name: rank for name, rank in ranks if rank is not None}


def _rrf_order(pool: Candidates, ties: Ties) -> list[int]:
    """The pool's indexes in RRF (1, 1)'s order: its feature column is `fuse_weighted`'s score
    at (1, 1) to the bit (the same sum in the same order), and ties go the same way."""
    return _best_first(pool.matrix[:, FEATURES.index("rrf")], ties)


def _interleaved(learned: list[int], rrf: list[int], limit: int) -> list[int]:
    """The ranker's order, but every `RRF_EVERY`-th place goes to RRF's best not yet
    placed. Both orders hold the whole pool, so neither runs out before the other."""
    chosen: list[int] = []
    taken = [False] * len(learned)
    at = {False: 0, True: 0}  # how far each order has been read
    orders = {False: learned, True: rrf}
    while len(chosen) < min(limit, len(learned)):
        whose = _rrfs_place(len(chosen))
        order, place = orders[whose], at[whose]
        while taken[order[place]]:
            place += 1
        chosen.append(order[place])
        taken[order[place]] = True
        at[whose] = place + 1
    return chosen


def _rrfs_place(place: int) -> bool:
    """Whether the 0-based `place` is one of RRF's."""
    return (place + 1) % RRF_EVERY == 0


Ties = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]  # (ids, better single ranks)


def _ties(pool: Candidates) -> Ties:
    """What breaks a tie in either order, as in RRF: the better single rank, then the
    lower id. A leg that did not find a candidate ranks it past its list's end, so the
    smaller of the two rank columns is the better rank of the legs that found it."""
    ranks = np.minimum(pool.matrix[:, _SEMANTIC_RANK], pool.matrix[:, _KEYWORD_RANK])
    return np.array([episode.id for episode in pool.episodes]), ranks.astype(np.int64)


_SEMANTIC_RANK = FEATURES.index("semantic_rank")
_KEYWORD_RANK = FEATURES.index("keyword_rank")


def _best_first(scores: Matrix, ties: Ties) -> list[int]:
    """The pool's indexes by score, ties broken by `ties`."""
    ids, ranks = ties
    order: list[int] = np.lexsort((ids, ranks, -scores)).tolist()
    return order


def _most_moved(values: Matrix, effects: Matrix) -> tuple[Moved, ...]:
    top = np.argsort(-np.abs(effects), kind="stable")[:EXPLAINED]
    return tuple(
        Moved(FEATURES[j], float(values[j]), float(effects[j]), MEANINGS[FEATURES[j]]) for j in top
    )
