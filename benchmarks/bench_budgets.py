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

from benchmarks.bench_project import _corpora, _settle
from benchmarks.bench_recommended import alternating, steps
from benchmarks.bench_vectors import SESSIONS, build_store
from benchmarks.common import Report, base_vectors, mark_built, served, store_dir
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.evaluation.metrics import percentile

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
    texts, queries = _corpora()["realistic"]
    with store_dir(f"project-realistic-{size}") as (data, built):
        if not built:
            embedder = LocalEmbedder()
            build_store(data, embedder, base_vectors(embedder), size, SESSIONS, texts=texts(size))
            mark_built(data)
        with served(data) as (http, _):
            _settle(http)
            samples = alternating(http, queries[:40] if quick else queries, TURNS, PASSES)
    report = Report(
        f"A turn's cost by contextBudget at {size:,} realistic episodes, one run (ms)",
        ["turn", "count", "p50", "p95", "p95 vs 1,000 tokens"],
    )
    baseline = percentile([ms for ms, _ in samples["learned, 1,000 tokens"]], 95)
    for name, timed in samples.items():
        wall = [ms for ms, _ in timed]
        p95 = percentile(wall, 95)
        report.add(
            name, len(wall), f"{percentile(wall, 50):.1f}", f"{p95:.1f}", f"{p95 / baseline:.2f}"
        )
    report.notes.append(steps(samples))
    report.print()
