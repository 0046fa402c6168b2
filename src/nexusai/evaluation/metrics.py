"""Retrieval metrics over ranked episode ids and a question's evidence ids."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def recall_at(ranked: Sequence[int], evidence: Collection[int], k: int) -> float:
    """Share of the evidence found in the top k."""
    if not evidence:
        return 0.0
    return len(set(ranked[:k]) & set(evidence)) / len(set(evidence))


def hit_at(ranked: Sequence[int], evidence: Collection[int], k: int) -> float:
    """1 when at least one evidence item is in the top k."""
    return 1.0 if set(ranked[:k]) & set(evidence) else 0.0


def reciprocal_rank(ranked: Sequence[int], evidence: Collection[int]) -> float:
    """1/rank of the first evidence item in the list, 0 when none is in it."""
    wanted = set(evidence)
    return next((1.0 / rank for rank, i in enumerate(ranked, start=1) if i in wanted), 0.0)


def percentile(samples: Sequence[float], q: float) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]
