"""What a larger `contextBudget` costs: `/context` through HTTP at 100,000 realistic
episodes in one project (the project benchmark's store), each message asked by the learned
mode within 1,000, 2,000 and 4,000 tokens and by RRF (1, 1) within 4,000, one after the
other in an order that alternates. Above 1,000 tokens a turn ranks a deeper list (100,
then 200) and fuses and packs each stage: p50 / p95, each against the 1,000-token turn's,
and each `Server-Timing` step's p50 / p95.
Sizes: NEXUS_RECOMMENDED_SIZE (default 100000); NEXUS_BENCH_STORES keeps the store.
"""

from __future__ import annotations

import os

from benchmarks.bench_recommended import add_rows, realistic_samples, steps
from benchmarks.common import Report

PASSES = 3
TURNS = {
    "learned, 1,000 tokens": {"fusion": "learned", "contextBudget": 1000},
    "learned, 2,000 tokens": {"fusion": "learned", "contextBudget": 2000},
    "learned, 4,000 tokens": {"fusion": "learned", "contextBudget": 4000},
    "RRF (1, 1), 4,000 tokens": {
        "fusion": "rrf",
        "semanticWeight": 1.0,
        "keywordWeight": 1.0,
        "contextBudget": 4000,
    },
}


def run(quick: bool = False) -> None:
    size = 20_000 if quick else int(os.environ.get("NEXUS_RECOMMENDED_SIZE", "100000"))
    samples = realistic_samples(size, TURNS, PASSES, 40 if quick else None)
    report = Report(
        f"A turn's cost by contextBudget at {size:,} realistic episodes, one run (ms)",
        ["turn", "count", "p50", "p95", "p95 vs 1,000 tokens"],
    )
    add_rows(report, samples, "learned, 1,000 tokens")
    report.notes.append(steps(samples))
    report.print()
