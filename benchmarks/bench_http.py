"""What HTTP itself costs a request: `GET /health` round trips, and `POST /context`'s wall
time against the `total` its `Server-Timing` header reports (the turn's own work), through
`nexus serve` on a store of short turns. The difference is the server's HTTP stack
(uvicorn, FastAPI, the middleware) and the client's.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import httpx
from tests.live_server import free_port, start_server

from benchmarks.bench_import_short import conversations_of
from benchmarks.bench_project import _common_queries
from benchmarks.common import LATENCY_COLUMNS, Report, time_ms, timed_context
from nexusai.config import Config
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.memory.service import Memory

ROUNDS = 3


def run(quick: bool = False) -> None:
    episodes = 1_000 if quick else 4_000
    report = Report(
        f"HTTP's own cost per request, {episodes:,} episodes (ms)",
        LATENCY_COLUMNS,
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
        for conversation in conversations_of(episodes):
            memory.import_conversation(conversation.sessions, None)
    finally:
        memory.close()


def _measure(http: httpx.Client, report: Report) -> None:
    health = time_ms(lambda: http.get("/health").raise_for_status(), 300)
    report.add_latency("GET /health, round trip", health)
    http.patch("/settings", json={"semanticWeight": 1, "keywordWeight": 1}).raise_for_status()
    sessions = [s["id"] for s in http.get("/sessions").json()]
    rng = random.Random(1)
    turns = [
        timed_context(http, rng.choice(sessions), message) for message in _common_queries() * ROUNDS
    ]
    wall = [elapsed for elapsed, _ in turns]
    total = [steps["total"] for _, steps in turns]
    report.add_latency("POST /context (1, 1), round trip", wall)
    report.add_latency("... the turn's own work (Server-Timing total)", total)
    spent = [w - t for w, t in zip(wall, total, strict=True)]
    report.add_latency("... HTTP's share (the difference)", spent)
