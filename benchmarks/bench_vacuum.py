"""What index upkeep costs a running service: the vacuum that reclaims deleted points.

Qdrant Edge's optimizer holds the GIL while it runs, so the service never runs it on the
shard it serves from: once a fifth of the points are deleted (and at least 1,000), the
index is optimized behind itself, in a child process over a copy that is swapped in when
done (`vectors.edge_build`). Here, at 3,500 and at 100,000 vectors (real MiniLM vectors of 2,000
sentences plus noise), a quarter deleted (at least 1,000): scoped queries asked back to
back, each timed from the end of the one before, before, while and after it runs.
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
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.memory.vectors.edge import VACUUM_MIN_POINTS, EdgeVectorIndex


def run(quick: bool = False) -> None:
    embedder = LocalEmbedder()
    base = np.array(embedder.embed(list(sentences(2000, seed=7))), dtype=np.float32)
    queries = np.array(embedder.embed(list(sentences(100, seed=99))), dtype=np.float32)
    report = Report(
        "Scoped vector queries while the index is optimized behind itself",
        ["case", "runs", "p50 ms", "p95 ms", "mean ms", "max ms"],
    )
    with tempfile.TemporaryDirectory() as tmp:
        for size in (3_500, 20_000 if quick else 100_000):
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
    began = time.perf_counter()
    # Started from a thread of its own, as the service's upkeep starts it.
    upkeep = threading.Thread(target=index.optimize_behind)
    upkeep.start()
    during = _queries(
        index, queries, lambda: not upkeep.is_alive() and not index.optimizing, None, began
    )
    took = time.perf_counter() - began
    report.add_latency(f"{size:,}, while optimized behind ({took:.1f} s)", during, max(during))
    after = _queries(index, queries, lambda: False, 300)
    report.add_latency(f"{size:,}, after", after, max(after))
    index.close()


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
