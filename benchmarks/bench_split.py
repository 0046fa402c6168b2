"""POST /context over HTTP in both deployments at 10,000 episodes: one process, and memory
+ orchestration as two services on loopback. The difference is the cost of the split.

Each service is its own `nexus serve` process, as in a deployment: a server thread inside
the measuring process would share its GIL and measure that instead."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import httpx
import numpy as np
from tests.live_server import server_process

from benchmarks.bench_vectors import SESSIONS, build_store
from benchmarks.common import LATENCY_COLUMNS, Report, sentences, time_ms
from nexusai.embedders.minilm import LocalEmbedder

RUNS = 300


def ask(url: str, report: Report, label: str) -> None:
    rng = random.Random(4)
    turns = iter([(rng.randint(1, SESSIONS), m) for m in sentences(RUNS + 20, seed=8)])
    with httpx.Client(base_url=url, timeout=30) as client:
        client.patch("/settings", json={"keywordWeight": 1.0})

        def one() -> None:
            session, message = next(turns)
            response = client.post("/context", json={"sessionId": session, "message": message})
            response.raise_for_status()

        report.add_latency(label, time_ms(one, RUNS, warmup=10))


def run(quick: bool = False) -> None:
    size = 2_000 if quick else 10_000
    embedder = LocalEmbedder()
    base = np.array(embedder.embed(list(sentences(1000, seed=11))), dtype=np.float32)
    report = Report(f"POST /context at {size:,} episodes, weights (1, 1)", LATENCY_COLUMNS)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "memory"
        build_store(data, embedder, base, size, per_project=5)
        with server_process(data, "all") as url:
            ask(url, report, "one process (--role all)")
        with server_process(data, "memory") as memory_url:
            orchestration = Path(tmp) / "orchestration"
            with server_process(orchestration, "orchestration", NEXUS_MEMORY_URL=memory_url) as url:
                ask(url, report, "two services on loopback")
    one, two = (float(row[2]) for row in report.rows)
    report.notes.append(
        f"The split adds {two - one:.1f} ms at p50: 4 requests a turn in 2 rounds (scope and"
        " recent turns while the message is embedded, then both legs at once), on cores"
        " shared by three processes."
    )
    report.print()
