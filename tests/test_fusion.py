from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from nexusai.config import RETRIEVAL
from nexusai.models import Episode
from tests.fused import fuse_ranked


def fused_episodes(
    semantic: list[Episode], keyword: list[Episode], ws: float, wk: float, limit: int
) -> list[Episode]:
    """The spec's fuseEpisodeResults: the fused episodes alone, best first."""
    return [f.episode for f in fuse_ranked(semantic, keyword, ws, wk, limit)]


def ep(i: int) -> Episode:
    return Episode(i, 1, "user", f"episode {i}", "2024-01-01T00:00:00.000000Z", "", {})


ids = st.lists(st.integers(1, 40), unique=True, max_size=25)
weights = st.floats(0, 5, allow_nan=False)


def test_spec_formula_and_sum_for_both_lists() -> None:
    fused = fuse_ranked([ep(1), ep(2)], [ep(2), ep(3)], 1.0, 2.0, 10)
    k = RETRIEVAL.RRF_K
    scores = {f.episode.id: f.score for f in fused}
    assert scores[1] == 1.0 / (k + 1)
    assert scores[2] == 1.0 / (k + 2) + 2.0 / (k + 1)
    assert scores[3] == 2.0 / (k + 2)
    assert [f.episode.id for f in fused] == [2, 3, 1]
    assert (fused[0].ranks.get("semantic"), fused[0].ranks.get("keyword")) == (2, 1)


def test_spec_guard_keyword_weight_zero_adds_no_fts_only_episode() -> None:
    result = fused_episodes([ep(1)], [ep(2), ep(1)], 1.0, 0.0, 10)
    assert [e.id for e in result] == [1]


def test_semantic_weight_zero_is_guarded_too() -> None:
    result = fused_episodes([ep(1), ep(2)], [ep(3)], 0.0, 1.0, 10)
    assert [e.id for e in result] == [3]


def test_limit() -> None:
    assert len(fused_episodes([ep(i) for i in range(1, 30)], [], 1, 1, 5)) == 5


@given(ids, ids, weights, weights, st.integers(0, 30))
def test_output_is_a_duplicate_free_subset_within_limit(
    sem: list[int], kw: list[int], ws: float, wk: float, limit: int
) -> None:
    result = [
        e.id for e in fused_episodes([ep(i) for i in sem], [ep(i) for i in kw], ws, wk, limit)
    ]
    assert len(result) == len(set(result)) <= limit
    assert set(result) <= set(sem) | set(kw)


@given(ids, ids, weights, weights)
def test_weight_zero_brings_nothing_in(sem: list[int], kw: list[int], ws: float, wk: float) -> None:
    result = {e.id for e in fused_episodes([ep(i) for i in sem], [ep(i) for i in kw], ws, 0, 99)}
    assert result <= set(sem)
    result = {e.id for e in fused_episodes([ep(i) for i in sem], [ep(i) for i in kw], 0, wk, 99)}
    assert result <= set(kw)


@given(st.integers(1, 20), st.floats(0.01, 5), st.floats(0.01, 5))
def test_in_both_lists_beats_in_one_at_equal_rank(rank: int, ws: float, wk: float) -> None:
    filler = [ep(100 + i) for i in range(rank - 1)]
    semantic = [*filler, ep(1)]  # episode 1 at `rank` in both lists
    keyword = [*[ep(200 + i) for i in range(rank - 1)], ep(1)]
    only_semantic = [*[ep(300 + i) for i in range(rank - 1)], ep(2)]  # 2 at `rank` in one
    both = fuse_ranked(semantic, keyword, ws, wk, 99)
    one = fuse_ranked(only_semantic, [], ws, wk, 99)
    score_both = next(f.score for f in both if f.episode.id == 1)
    score_one = next(f.score for f in one if f.episode.id == 2)
    assert score_both > score_one


@given(ids, ids, weights, weights)
def test_order_is_deterministic_and_best_first(
    sem: list[int], kw: list[int], ws: float, wk: float
) -> None:
    a = fuse_ranked([ep(i) for i in sem], [ep(i) for i in kw], ws, wk, 99)
    b = fuse_ranked([ep(i) for i in sem], [ep(i) for i in kw], ws, wk, 99)
    assert a == b
    assert all(x.score >= y.score for x, y in itertools.pairwise(a))


def test_ties_break_on_best_rank_then_id() -> None:
    # 5 is first semantically, 3 first by keyword: same score with equal weights.
    fused = fuse_ranked([ep(5), ep(9)], [ep(3), ep(8)], 1.0, 1.0, 10)
    assert [f.episode.id for f in fused] == [3, 5, 8, 9]
