"""A search graph built behind a serving index (issue #15, target 5).

`nexus serve` over a store of 100,000 episodes (1,000 sessions, projects of 5; vectors
written straight into Qdrant Edge as in the curve benchmark, none in a graph). Within half
a minute of start its upkeep sees 100,000 points outside any HNSW graph and builds one in a
child process in Linux's idle scheduling class (it runs on CPU time nobody else wants),
over a copy of the shard, then swaps it in. A client asks `/context` (both legs on) 20
times a second, as a busy service would be asked (a client asking back to back would leave
the build no CPU on 2 cores), before the build, during it (the swap included) and after;
and a semantic search over a wide scope (500 of the 1,000 sessions), what the graph is for.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
from tests.live_server import free_port, start_server

from benchmarks.bench_vectors import SESSIONS, build_store
from benchmarks.common import Report, peak_rss, sentences
from nexusai.embedders.minilm import LocalEmbedder

TURNS = 300
WIDE = 100
PERIOD = 0.05  # a turn every 50 ms


def run(quick: bool = False) -> None:
    size = 30_000 if quick else 100_000
    embedder = LocalEmbedder()
    base = np.array(embedder.embed(list(sentences(2000, seed=11))), dtype=np.float32)
    wide = [embedder.embed_query(text) for text in sentences(WIDE, seed=5)]
    report = Report(
        f"/context through HTTP while a {size:,}-point graph is built behind the index (ms)",
        ["phase", "turns", "p50", "p95", "mean", "max", "turns over 100 ms"],
    )
    with tempfile.TemporaryDirectory() as tmp:
        build_store(Path(tmp), embedder, base, size, per_project=5)
        port = free_port()
        process = start_server(Path(tmp), port)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
                _phases(http, wide, report)
            report.notes.append(
                f"Server peak RSS {peak_rss(process.pid)} MB (both shards are open for a"
                " moment at the swap); the child's is its own."
            )
        finally:
            process.terminate()
            process.wait(timeout=60)
    report.notes.append("Target: no /context waits more than 100 ms behind index maintenance.")
    report.print()


def _phases(http: httpx.Client, wide: list[list[float]], report: Report) -> None:
    http.patch("/settings", json={"keywordWeight": 1.0})
    messages = sentences(100_000, seed=42)
    _turns(http, messages, lambda n: n < 20)  # warm-up
    wide_before = _wide(http, wide)
    before = _turns(http, messages, lambda n: n < TURNS)
    if _building(http):
        report.notes.append("The build had started before the quiet turns ended.")
    deadline = time.monotonic() + 90
    while not _building(http):
        assert time.monotonic() < deadline, "no build started"
        time.sleep(0.5)
    started = time.monotonic()
    during = _turns(http, messages, lambda n: n % 10 or _building(http))
    took = time.monotonic() - started
    after = _turns(http, messages, lambda n: n < TURNS)
    wide_after = _wide(http, wide)
    for label, samples in (("before the build", before), (f"during it ({took:.0f} s)", during)):
        report.add_latency(label, samples, max(samples), sum(t > 100 for t in samples))
    report.add_latency("after it", after, max(after), sum(t > 100 for t in after))
    report.add_latency("wide-scope semantic search, before", wide_before, max(wide_before), "")
    report.add_latency("wide-scope semantic search, after", wide_after, max(wide_after), "")


def _turns(
    http: httpx.Client, messages: Iterator[str], go_on: Callable[[int], object]
) -> list[float]:
    """A turn every PERIOD while `go_on(n)`, each timed from when it was due: a turn held
    up by the one before it counts the wait."""
    rng = random.Random(3)
    times: list[float] = []
    due = time.perf_counter()
    while go_on(len(times)):
        body = {"sessionId": rng.randint(1, SESSIONS), "message": next(messages)}
        time.sleep(max(0.0, due - time.perf_counter()))
        http.post("/context", json=body).raise_for_status()
        now = time.perf_counter()
        times.append((now - due) * 1000)
        due = max(due + PERIOD, now)
    return times


def _wide(http: httpx.Client, vectors: list[list[float]]) -> list[float]:
    rng = random.Random(8)
    times = []
    for vector in vectors:
        scope = rng.sample(range(1, SESSIONS + 1), SESSIONS // 2)
        body = {"vector": vector, "sessionIds": scope, "limit": 10}
        started = time.perf_counter()
        http.post("/vectors/search/episodes", json=body).raise_for_status()
        times.append((time.perf_counter() - started) * 1000)
    return times


def _building(http: httpx.Client) -> bool:
    return bool(http.get("/health").json()["vectorIndexOptimizing"])
