"""The first turns after a start: a store that has been served before (its search graph
built) is opened again by `nexus serve`, and `/context` turns are asked through HTTP the
moment `/ready` answers, at the recommended pair (1, 1): the first 10, and 120 messages
each asked for the first time. Three starts: reading ahead (the default NEXUS_WARM_SECONDS:
`/ready` waits while the keyword index's copy is read, commonest words first) with no copy
saved (as after a crash), then with the copy the last stop saved beside the store, and
without reading ahead (NEXUS_WARM_SECONDS=0: ready at once; each word read by the first
turn that asks for it, or behind it while FTS5 answers), no copy saved. The same messages
asked again are the warm row, for comparison.

The store is the project benchmark's (one project of 1,000 sessions). Sizes:
NEXUS_START_SIZES (default 100000); text: NEXUS_START_TEXT ("realistic" by default, or
"common words"). With NEXUS_BENCH_STORES set, the store is kept there (see `store_dir`).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from benchmarks.bench_project import ROWS, _corpora, _settle
from benchmarks.bench_vectors import SESSIONS, build_store
from benchmarks.common import (
    Report,
    base_vectors,
    mark_built,
    served,
    sizes,
    store_dir,
    timed_context,
)
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.evaluation.metrics import percentile

FIRST = 10
# Each start: its settings, and whether the copy the last stop saved is kept.
WARM = {
    "read ahead, nothing saved": ({}, False),
    "read ahead, the copy saved at the last stop": ({}, True),
    "NEXUS_WARM_SECONDS=0, nothing saved": ({"NEXUS_WARM_SECONDS": "0"}, False),
}


def run(quick: bool = False) -> None:
    sized = sizes(quick, "NEXUS_START_SIZES", "100000")
    kind = os.environ.get("NEXUS_START_TEXT", "realistic")
    texts, queries = _corpora()[kind]
    embedder = LocalEmbedder()
    base = base_vectors(embedder)
    report = Report(
        f"The first turns after a start, {kind} text: /context through HTTP (p50 / p95 ms)",
        [
            "episodes",
            "start",
            "to /ready, s",
            f"first {FIRST}",
            "first asks",
            "asked again",
            f"first {FIRST} p95 / again",
        ],
    )
    for size in sized:
        with store_dir(f"project-{kind.replace(' ', '-')}-{size}") as (data, built):
            if not built:
                build_store(data, embedder, base, size, SESSIONS, texts=texts(size))
                mark_built(data)
            _served_once(data)
            for start, (env, saved) in WARM.items():
                if not saved:
                    (data / "nexus.db.keywords.npz").unlink(missing_ok=True)
                report.add(f"{size:,}", start, *_after_start(data, queries, env))
    report.notes.append("Targets: the first 10 turns' p95 at most 1.2 times the same start's warm")
    report.notes.append("p95 (the same messages asked again).")
    report.print()


def _served_once(data_dir: Path, **env: str) -> None:
    """The store as a restart finds it: served (`env` added to the service's environment)
    until its search graph was built."""
    with served(data_dir, **env) as (http, _):
        _settle(http)


def _after_start(data_dir: Path, queries: list[str], env: dict[str, str]) -> list[str]:
    rng = random.Random(3)
    with served(data_dir, **env) as (http, ready):
        http.patch("/settings", json=ROWS["(1, 1)"]).raise_for_status()
        first = [timed_context(http, rng.randint(1, SESSIONS), q)[0] for q in queries]
        again = [timed_context(http, rng.randint(1, SESSIONS), q)[0] for q in queries]
    ratio = percentile(first[:FIRST], 95) / percentile(again, 95)
    return [f"{ready:.1f}", _cell(first[:FIRST]), _cell(first), _cell(again), f"{ratio:.2f}"]


def _cell(samples: list[float]) -> str:
    return f"{percentile(samples, 50):.1f} / {percentile(samples, 95):.1f}"
