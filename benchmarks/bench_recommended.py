"""The recommended turn against the spec's fused turn, in one run: `/context` through HTTP
at 100,000 realistic episodes in one project (the project benchmark's store), each message
asked at RRF (1, 1) and at the recommended settings (learned, `contextBudget` 1000,
`memoryOrder` auto) one after the other, which first alternating, after a pass that asks
every message once each way (so that no row pays for a word's first read). p50 / p95 of
each, their ratio, and each `Server-Timing` step's p50 / p95: where the difference is. The
ratio moves by several hundredths from run to run on a 2-core machine, so each pass's own
ratio is given too: their median and range.
Sizes: NEXUS_RECOMMENDED_SIZE (default 100000); NEXUS_BENCH_STORES keeps the store.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from typing import Any

import httpx

from benchmarks.bench_project import _corpora, _settle
from benchmarks.bench_vectors import SESSIONS, build_store
from benchmarks.common import Report, base_vectors, mark_built, served, store_dir, timed_context
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.evaluation.metrics import percentile

PASSES = 6
TURNS = {
    "RRF (1, 1)": {"fusion": "rrf", "semanticWeight": 1.0, "keywordWeight": 1.0},
    "recommended": {"fusion": "learned", "contextBudget": 1000, "memoryOrder": "auto"},
}
Timed = tuple[float, dict[str, float]]


def run(quick: bool = False) -> None:
    size = 20_000 if quick else int(os.environ.get("NEXUS_RECOMMENDED_SIZE", "100000"))
    samples = realistic_samples(size, TURNS, PASSES)
    report = Report(
        f"The recommended turn and RRF (1, 1) at {size:,} realistic episodes, one run (ms)",
        ["turn", "count", "p50", "p95", "p95 vs RRF (1, 1)"],
    )
    add_rows(report, samples, "RRF (1, 1)")
    report.notes.append(steps(samples))
    report.notes.append(_by_pass(samples))
    report.notes.append("Target: the recommended turn's p95 at most 1.15 times RRF (1, 1)'s.")
    report.print()


def realistic_samples(
    size: int, turns: dict[str, dict[str, Any]], passes: int, messages: int | None = None
) -> dict[str, list[Timed]]:
    """The project benchmark's realistic store of `size` episodes (built once), served, and
    its first `messages` messages (all when None) asked at each of `turns` (`alternating`)."""
    texts, queries = _corpora()["realistic"]
    with store_dir(f"project-realistic-{size}") as (data, built):
        if not built:
            embedder = LocalEmbedder()
            build_store(data, embedder, base_vectors(embedder), size, SESSIONS, texts=texts(size))
            mark_built(data)
        with served(data) as (http, _):
            _settle(http)
            return alternating(http, queries[:messages], turns, passes)


def add_rows(report: Report, samples: dict[str, list[Timed]], baseline: str) -> None:
    """A row per turn: how many, p50, p95, and its p95 against `baseline`'s."""
    against = percentile([ms for ms, _ in samples[baseline]], 95)
    for name, timed in samples.items():
        wall = [ms for ms, _ in timed]
        p95 = percentile(wall, 95)
        report.add(
            name, len(wall), f"{percentile(wall, 50):.1f}", f"{p95:.1f}", f"{p95 / against:.2f}"
        )


def alternating(
    http: httpx.Client,
    queries: Sequence[str],
    turns: dict[str, dict[str, Any]],
    passes: int,
) -> dict[str, list[Timed]]:
    """Each message asked in a random session at each of `turns`' settings, one after the
    other, in an order that alternates, `passes` times, after a pass that is not kept."""
    rng = random.Random(3)
    asked = [(rng.randint(1, SESSIONS), q) for q in queries]
    for session, message in asked:  # every word read once, every code path run
        for settings in turns.values():
            timed_context(http, session, message, settings=settings)
    samples: dict[str, list[Timed]] = {name: [] for name in turns}
    names = list(turns)
    for n in range(passes):
        for i, (session, message) in enumerate(asked):
            order = names if (i + n) % 2 == 0 else names[::-1]
            for name in order:
                samples[name].append(timed_context(http, session, message, settings=turns[name]))
    return samples


def _by_pass(samples: dict[str, list[Timed]]) -> str:
    """Each pass's p95 ratio of the second turn to the first (`TURNS`' order; a pass asks
    every message once each way, so the samples hold the passes one after another): their
    median and range."""
    rrf, recommended = ([ms for ms, _ in samples[name]] for name in TURNS)
    each = len(rrf) // PASSES
    ratios = sorted(
        percentile(recommended[n * each : (n + 1) * each], 95)
        / percentile(rrf[n * each : (n + 1) * each], 95)
        for n in range(PASSES)
    )
    middle = (ratios[(PASSES - 1) // 2] + ratios[PASSES // 2]) / 2
    return (
        f"The p95 ratio pass by pass ({PASSES} passes): median {middle:.2f},"
        f" {ratios[0]:.2f} to {ratios[-1]:.2f}."
    )


def steps(samples: dict[str, list[Timed]]) -> str:
    """Each `Server-Timing` step's p50 / p95, turn against turn."""
    names = dict.fromkeys(
        step for timed in samples.values() for _, steps in timed for step in steps
    )
    cells = []
    for step in names:
        each = []
        for timed in samples.values():
            spent = [steps.get(step, 0.0) for _, steps in timed]
            each.append(f"{percentile(spent, 50):.1f} / {percentile(spent, 95):.1f}")
        cells.append(f"{step} {' against '.join(each)}")
    return f"Each step's p50 / p95 ({' against '.join(samples)}): " + "; ".join(cells)
