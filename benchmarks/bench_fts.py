"""Keyword search latency (the spec's SQL) as the store grows."""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

from benchmarks.common import LATENCY_COLUMNS, Report, sentences
from nexusai.memory.fts import search_episodes
from nexusai.memory.models import NewEpisode
from nexusai.memory.store import Store

SESSIONS = 1000


def build(path: Path, episodes: int) -> tuple[Store, list[int], float]:
    store = Store(path)
    per_session = episodes // SESSIONS
    texts = sentences(episodes)
    start = time.perf_counter()
    session_ids = []
    for _ in range(SESSIONS):
        session = store.create_session()
        session_ids.append(session.id)
        batch = [NewEpisode("user", next(texts)) for _ in range(per_session)]
        store.add_episodes(session.id, batch)
    return store, session_ids, time.perf_counter() - start


def run(quick: bool = False) -> None:
    report = Report("FTS5 keyword search (spec SQL, limit 20)", [*LATENCY_COLUMNS])
    sizes = [10_000] if quick else [10_000, 100_000]
    queries = list(sentences(300, seed=99))
    rng = random.Random(1)
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            store, session_ids, seconds = build(Path(tmp) / "n.db", size)
            report.notes.append(
                f"{size:,} episodes written in {seconds:.1f} s "
                f"({size / seconds:,.0f}/s, FTS triggers included)"
            )
            cycle = iter(queries * 10)

            def scoped() -> None:
                search_episodes(store, next(cycle), 20, rng.sample(session_ids, 5))

            def unscoped() -> None:
                search_episodes(store, next(cycle), 20, None)

            report.add_latency(f"{size:,} eps, scope 5 of {SESSIONS} sessions", _ms(scoped, 200))
            report.add_latency(f"{size:,} eps, all sessions", _ms(unscoped, 200))
            store.close()
    report.print()


def _ms(fn: object, runs: int) -> list[float]:
    from benchmarks.common import time_ms

    assert callable(fn)
    return time_ms(fn, runs)
