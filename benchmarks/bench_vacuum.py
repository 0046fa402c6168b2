"""What index upkeep costs a running service: the vacuum that reclaims deleted points.

The service's Qdrant Edge shard never builds HNSW (the build holds the GIL for minutes at
100,000 vectors; `nexus reindex` builds it with the service stopped). What it does run is
a vacuum once a fifth of the points are deleted. Here: 100,000 vectors (real MiniLM
vectors of 2,000 sentences plus noise), a quarter deleted, then the vacuum in a thread
while the main thread keeps asking scoped queries; reported: how long the vacuum took and
the worst query latency during it, against the same queries without it.
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.bench_vectors import SESSIONS, fill_index, noisy_copies
from benchmarks.common import LATENCY_COLUMNS, Report, sentences
from nexusai.embedders import LocalEmbedder
from nexusai.memory.vectors import EdgeVectorIndex


def run(quick: bool = False) -> None:
    size = 10_000 if quick else 100_000
    embedder = LocalEmbedder()
    base = np.array(embedder.embed(list(sentences(2000, seed=7))), dtype=np.float32)
    queries = np.array(embedder.embed(list(sentences(100, seed=99))), dtype=np.float32)
    report = Report(
        f"Scoped vector queries while the service's vacuum runs ({size:,} vectors)",
        [*LATENCY_COLUMNS, "max ms"],
    )
    with tempfile.TemporaryDirectory() as tmp:
        index = EdgeVectorIndex(Path(tmp) / "episodes", base.shape[1])
        fill_index(index, noisy_copies(base, size))
        index.delete(list(range(1, size + 1, 4)))
        quiet = _queries(index, queries, lambda: False, 500)
        report.add_latency("no upkeep", quiet, max(quiet))
        done = threading.Event()
        took: list[float] = []

        def vacuum() -> None:
            started = time.perf_counter()
            assert index.compact()
            took.append(time.perf_counter() - started)
            done.set()

        thread = threading.Thread(target=vacuum)
        thread.start()
        during = _queries(index, queries, done.is_set, None)
        thread.join()
        report.add_latency("while the vacuum runs", during, max(during))
        index.close()
    report.notes.append(f"The vacuum took {took[0]:.2f} s (points: {size:,}, a quarter deleted).")
    report.notes.append("Target: no query waits more than 100 ms behind index upkeep.")
    report.print()


def _queries(
    index: EdgeVectorIndex, queries: np.ndarray, stop: Callable[[], bool], count: int | None
) -> list[float]:
    """Scoped top-20 queries, back to back: `count` of them, or until `stop()`. Each is
    timed from the end of the one before, so that time the thread spends waiting for the
    GIL between queries counts too (a request arriving then would wait as long)."""
    rng = random.Random(3)
    times: list[float] = []
    last = time.perf_counter()
    while not stop() if count is None else len(times) < count:
        scope = rng.sample(range(1, SESSIONS + 1), 5)
        index.search(queries[len(times) % len(queries)].tolist(), scope, [], 20)
        now = time.perf_counter()
        times.append((now - last) * 1000)
        last = now
    return times
