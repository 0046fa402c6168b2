"""What HTTP itself costs a request: `GET /health` round trips, and `POST /context`'s wall
time against the `total` its `Server-Timing` header reports (the turn's own work), through
`nexus serve` on a store of short turns. The difference is the server's HTTP stack
(uvicorn, FastAPI, the middleware) and the client's.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from tests.live_server import free_port, start_server

from benchmarks.bench_import_short import _conversations
from benchmarks.bench_project import _common_queries
from benchmarks.common import Report
from nexusai.config import Config
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.evaluation.metrics import percentile
from nexusai.memory.service import Memory

ROUNDS = 3


def run(quick: bool = False) -> None:
    episodes = 1_000 if quick else 4_000
    report = Report(
        f"HTTP's own cost per request, {episodes:,} episodes (ms)",
        ["what", "requests", "p50", "p95"],
    )
    with tempfile.TemporaryDirectory() as tmp:
        _store(Path(tmp), episodes)
        port = free_port()
        server = start_server(Path(tmp), port)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                _measure(http, report)
        finally:
            server.terminate()
            server.wait()
    report.print()


def _store(data_dir: Path, episodes: int) -> None:
    memory = Memory.open(Config.from_env({}, data_dir=data_dir, extractor="none"), LocalEmbedder())
    try:
        for conversation in _conversations(episodes):
            memory.import_conversation(conversation.sessions, None)
    finally:
        memory.close()


def _measure(http: httpx.Client, report: Report) -> None:
    health = [_clocked(lambda: http.get("/health")) for _ in range(300)]
    report.add("GET /health, round trip", len(health), *_p50_p95(health))
    http.patch("/settings", json={"semanticWeight": 1, "keywordWeight": 1}).raise_for_status()
    sessions = [s["id"] for s in http.get("/sessions").json()]
    rng = random.Random(1)
    wall, total = [], []
    for message in _common_queries() * ROUNDS:
        body = {"sessionId": rng.choice(sessions), "message": message}
        started = time.perf_counter()
        answer = http.post("/context", json=body)
        wall.append((time.perf_counter() - started) * 1000)
        answer.raise_for_status()
        steps = dict(s.split(";dur=") for s in answer.headers["server-timing"].split(", "))
        total.append(float(steps["total"]))
    report.add("POST /context (1, 1), round trip", len(wall), *_p50_p95(wall))
    report.add("... the turn's own work (Server-Timing total)", len(total), *_p50_p95(total))
    spent = [w - t for w, t in zip(wall, total, strict=True)]
    report.add("... HTTP's share (the difference)", len(spent), *_p50_p95(spent))


def _clocked(call: Callable[[], httpx.Response]) -> float:
    started = time.perf_counter()
    call().raise_for_status()
    return (time.perf_counter() - started) * 1000


def _p50_p95(samples: list[float]) -> tuple[float, float]:
    return percentile(samples, 50), percentile(samples, 95)
