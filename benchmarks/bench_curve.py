"""The cost curve: `/context` through HTTP, and each leg on its own through the memory
service's HTTP API, at 10,000, 100,000 and 1,000,000 episodes, against `nexus serve` as
deployed (MiniLM, both legs on, scope of 5 sessions, 10 recent turns).

The stores are built without embedding every text: their vectors are noisy copies of 2,000
real MiniLM vectors (as in the vectors benchmark), written straight into Qdrant Edge, and
their texts come from the benchmarks' sentence generator; SQLite and FTS5 are written
through the store, as an import would. Queries are new sentences, embedded for real.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import httpx
import numpy as np
from tests.live_server import free_port, start_server

from benchmarks.bench_vectors import SESSIONS, build_store
from benchmarks.common import Report, peak_rss, sentences, timed_context
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.evaluation.metrics import percentile

RUNS = 300
STEPS = ("embed", "semantic", "keyword", "fuse", "entities", "shape", "total")


def run(quick: bool = False) -> None:
    sizes = (10_000, 50_000) if quick else _sizes()
    embedder = LocalEmbedder()
    base = np.array(embedder.embed(list(sentences(2000, seed=11))), dtype=np.float32)
    report = Report(
        "/context and each leg through HTTP, by store size (p50 / p95 ms)",
        ["episodes", "/context", "keyword leg", "semantic leg", "server peak RSS MB", "build s"],
    )
    steps = Report("Where a /context turn goes (Server-Timing, ms)", ["episodes", *STEPS])
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            started = time.monotonic()
            build_store(Path(tmp), embedder, base, size, per_project=5)
            built = time.monotonic() - started
            row, spent, tails, rss = _measure(Path(tmp), embedder)
        report.add(f"{size:,}", *row, rss, f"{built:.0f}")
        steps.add(f"{size:,} mean", *(spent.get(step, "-") for step in STEPS))
        steps.add(f"{size:,} p95", *(tails.get(step, "-") for step in STEPS))
    report.notes.append("Targets: /context p95 at most 20 ms at 100,000; at 1,000,000 at most")
    report.notes.append("twice the p95 at 100,000. Each leg is timed as a client of its route.")
    report.print()
    steps.print()


def _sizes() -> tuple[int, ...]:
    wanted = os.environ.get("NEXUS_CURVE_SIZES", "10000,100000,1000000")
    return tuple(int(size) for size in wanted.split(","))


def _measure(
    data_dir: Path, embedder: LocalEmbedder
) -> tuple[list[str], dict[str, float], dict[str, float], int]:
    port = free_port()
    process = start_server(data_dir, port)
    url = f"http://127.0.0.1:{port}"
    rng = random.Random(3)
    messages = list(sentences(RUNS + 20, seed=42))
    samples: dict[str, list[float]] = defaultdict(list)
    spent: dict[str, list[float]] = defaultdict(list)
    try:
        with httpx.Client(base_url=url, timeout=60) as http:
            http.patch("/settings", json={"keywordWeight": 1.0})
            for n, message in enumerate(messages):
                session = rng.randint(1, SESSIONS)
                warm = n < 20
                _turn(http, session, message, None if warm else samples, None if warm else spent)
                scope = http.get(f"/sessions/{session}/scope").json()["sessionIds"]
                _legs(http, embedder, message, scope, None if warm else samples)
        rss = peak_rss(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=60)
    row = [
        f"{percentile(samples[name], 50):.1f} / {percentile(samples[name], 95):.1f}"
        for name in ("context", "keyword", "semantic")
    ]
    means = {step: round(float(np.mean(ms)), 2) for step, ms in spent.items()}
    tails = {step: round(percentile(ms, 95), 2) for step, ms in spent.items()}
    return row, means, tails, rss


def _turn(
    http: httpx.Client,
    session: int,
    message: str,
    samples: dict[str, list[float]] | None,
    spent: dict[str, list[float]] | None,
) -> None:
    elapsed, steps = timed_context(http, session, message)
    if samples is None or spent is None:
        return
    samples["context"].append(elapsed)
    for name, ms in steps.items():
        spent[name].append(ms)


def _legs(
    http: httpx.Client,
    embedder: LocalEmbedder,
    message: str,
    scope: list[int],
    samples: dict[str, list[float]] | None,
) -> None:
    ids = ",".join(map(str, scope))
    started = time.perf_counter()
    http.get("/episodes/search", params={"q": message, "sessionIds": ids, "limit": 20})
    keyword = (time.perf_counter() - started) * 1000
    vector = embedder.embed_query(message)
    body = {"vector": vector, "sessionIds": scope, "limit": 10}
    started = time.perf_counter()
    http.post("/vectors/search/episodes", json=body).raise_for_status()
    semantic = (time.perf_counter() - started) * 1000
    if samples is not None:
        samples["keyword"].append(keyword)
        samples["semantic"].append(semantic)
