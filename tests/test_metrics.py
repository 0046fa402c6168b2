from __future__ import annotations

import pytest

from nexusai.evaluation.metrics import hit_at, percentile, recall_at, reciprocal_rank


def test_recall_hit_and_mrr_on_known_rankings() -> None:
    ranked = [7, 3, 9, 1, 4]
    assert recall_at(ranked, {3, 4, 8}, 2) == pytest.approx(1 / 3)
    assert recall_at(ranked, {3, 4, 8}, 5) == pytest.approx(2 / 3)
    assert hit_at(ranked, {8}, 5) == 0.0
    assert hit_at(ranked, {9}, 3) == 1.0
    assert hit_at(ranked, {9}, 2) == 0.0
    assert reciprocal_rank(ranked, {9, 4}) == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, {42}) == 0.0
    assert recall_at([], {1}, 10) == 0.0


def test_percentile() -> None:
    assert percentile(list(range(1, 101)), 50) == 51  # nearest rank, index round(49.5) = 50
    assert percentile([3.0, 1.0, 2.0], 100) == 3.0
    assert percentile([5.0], 95) == 5.0
    assert percentile([], 95) == 0.0
