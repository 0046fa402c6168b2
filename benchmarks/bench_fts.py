"""Keyword search latency (the spec's SQL) as the store grows."""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

from benchmarks.common import LATENCY_COLUMNS, Report, sentences, time_ms
from nexusai.memory.sqlite.store import SqliteStore
from nexusai.models import NewEpisode

SESSIONS = 1000


def build(store: SqliteStore, episodes: int) -> list[int]:
    """`episodes` synthetic messages spread evenly over SESSIONS sessions."""
    texts = sentences(episodes)
    session_ids = []
    for _ in range(SESSIONS):
        session = store.sessions.create()
        session_ids.append(session.id)
        batch = [NewEpisode("user", next(texts)) for _ in range(episodes // SESSIONS)]
        store.episodes.add(session.id, batch)
    return session_ids


def measure(report: Report, store: SqliteStore, session_ids: list[int], size: int) -> None:
    queries = iter(list(sentences(300, seed=99)) * 10)
    rng = random.Random(1)
    scoped = time_ms(
        lambda: store.keywords.search(next(queries), 20, rng.sample(session_ids, 5)), 200
    )
    report.add_latency(f"{size:,} eps, scope 5 of {SESSIONS} sessions", scoped)
    unscoped = time_ms(lambda: store.keywords.search(next(queries), 20, None), 200)
    report.add_latency(f"{size:,} eps, all sessions", unscoped)
    # A project holding every session: its scope names them all, and the whole-table BM25
    # answers once it holds the message's words (it reads them behind the first ask).
    fresh = list(sentences(200, seed=123))
    first = _each(store, fresh, session_ids)
    _settled(store)
    again = _each(store, fresh, session_ids)
    report.add_latency(f"{size:,} eps, scope naming every session, first ask", first)
    report.add_latency(f"{size:,} eps, scope naming every session, asked before", again)


def _each(store: SqliteStore, messages: list[str], session_ids: list[int]) -> list[float]:
    samples = []
    for message in messages:
        started = time.perf_counter()
        store.keywords.search(message, 20, session_ids)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _settled(store: SqliteStore) -> None:
    """Waits for the whole-table BM25's reading behind the turns to finish."""
    while store._bm25._worker is not None:
        time.sleep(0.05)


def run(quick: bool = False) -> None:
    report = Report("FTS5 keyword search (spec SQL, limit 20)", LATENCY_COLUMNS)
    for size in [10_000] if quick else [10_000, 100_000]:
        with tempfile.TemporaryDirectory() as tmp, SqliteStore(Path(tmp) / "n.db") as store:
            start = time.perf_counter()
            session_ids = build(store, size)
            seconds = time.perf_counter() - start
            report.notes.append(
                f"{size:,} episodes written in {seconds:.1f} s ({size / seconds:,.0f}/s)"
            )
            measure(report, store, session_ids, size)
    report.print()
