"""What index upkeep costs a running service: the vacuum that reclaims deleted points.

The service's Qdrant Edge shard never builds HNSW (the build holds the GIL for minutes at
100,000 vectors; `nexus reindex` builds it with the service stopped). What it does run is
a vacuum once a fifth of the points are deleted, while the index is small enough
(VACUUM_LIVE_MAX); a larger one is vacuumed when next opened. Here, at that size and at
100,000 vectors (real MiniLM vectors of 2,000 sentences plus noise), a quarter deleted:
the service's vacuum in a thread while the main thread keeps asking scoped queries, each
timed from the end of the one before; and the open that vacuums the large one.
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
from benchmarks.common import Report, sentences
from nexusai.embedders import LocalEmbedder
from nexusai.memory.vectors import VACUUM_LIVE_MAX, VACUUM_MIN_POINTS, EdgeVectorIndex


def run(quick: bool = False) -> None:
    embedder = LocalEmbedder()
    base = np.array(embedder.embed(list(sentences(2000, seed=7))), dtype=np.float32)
    queries = np.array(embedder.embed(list(sentences(100, seed=99))), dtype=np.float32)
    report = Report(
        "Scoped vector queries while the service's vacuum runs",
        ["case", "runs", "p50 ms", "p95 ms", "mean ms", "max ms"],
    )
    with tempfile.TemporaryDirectory() as tmp:
        # The largest index the service vacuums as it serves, and a large one.
        for size in (VACUUM_LIVE_MAX + VACUUM_MIN_POINTS, 20_000 if quick else 100_000):
            _one(Path(tmp) / f"v{size}", size, base, queries, report)
    report.notes.append("Target: no query waits more than 100 ms behind index upkeep.")
    report.print()


def _one(path: Path, size: int, base: np.ndarray, queries: np.ndarray, report: Report) -> None:
    index = EdgeVectorIndex(path, base.shape[1])
    fill_index(index, noisy_copies(base, size))
    deleted = max(size // 4, VACUUM_MIN_POINTS)
    index.delete(list(range(1, deleted + 1)))
    quiet = _queries(index, queries, lambda: False, 300)
    report.add_latency(f"{size:,} vectors, {deleted:,} deleted, no upkeep", quiet, max(quiet))
    took: list[float] = []
    done = threading.Event()

    def vacuum() -> None:
        started = time.perf_counter()
        if index.compact():
            took.append(time.perf_counter() - started)
        done.set()

    thread = threading.Thread(target=vacuum)
    began = time.perf_counter()  # before start(): it waits for the thread to run
    thread.start()
    during = _queries(index, queries, done.is_set, None, began)
    thread.join()
    if took:
        label = f"{size:,}, while the vacuum runs ({took[0]:.2f} s)"
        report.add_latency(label, during, max(during))
        index.close()
        return
    index.close()
    started = time.perf_counter()
    EdgeVectorIndex(path, base.shape[1]).close()
    report.notes.append(
        f"At {size:,} the serving index does not vacuum; the next open does, before anything"
        f" is served: that open took {time.perf_counter() - started:.2f} s."
    )


def _queries(
    index: EdgeVectorIndex,
    queries: np.ndarray,
    stop: Callable[[], bool],
    count: int | None,
    since: float | None = None,
) -> list[float]:
    """Scoped top-20 queries, back to back: `count` of them, or until `stop()`. Each is
    timed from the end of the one before, so that time the thread spends waiting for the
    GIL between queries counts too (a request arriving then would wait as long)."""
    rng = random.Random(3)
    times: list[float] = []
    last = since or time.perf_counter()
    while not stop() if count is None else len(times) < count:
        scope = rng.sample(range(1, SESSIONS + 1), 5)
        index.search(queries[len(times) % len(queries)].tolist(), scope, [], 20)
        now = time.perf_counter()
        times.append((now - last) * 1000)
        last = now
    return times
