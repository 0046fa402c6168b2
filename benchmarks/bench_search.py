"""Keyword search without a scope: the admin's `GET /episodes/search?q=...` with no
`sessionIds` (every project), against a 5-session scope and a scope naming every session,
through HTTP against `nexus serve`. The store is the project benchmark's: 1,000 sessions of
common words (14 of 44 words an episode, 8 of the same a query: every term is common, the
worst case for an OR query). Each row asks 200 queries once, right after `/ready` ("first
ask") and then again; p50 / p95 ms. Twice: with the start's reading ahead (the default
NEXUS_WARM_SECONDS, so `/ready` waits for the keyword index's copy), and without it (0:
ready at once, each word read behind the first turn that asks for it, FTS5 answering it).

Sizes: NEXUS_SEARCH_SIZES (default 20000; the issue's second target is 1000000).
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.bench_project import COMMON, _common
from benchmarks.bench_vectors import SESSIONS, build_store
from benchmarks.common import Report, base_vectors, served, sizes
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.evaluation.metrics import percentile

QUERIES = 200
WARM = {"read ahead": {}, "NEXUS_WARM_SECONDS=0": {"NEXUS_WARM_SECONDS": "0"}}
SCOPES = ("no sessionIds (every project)", "5 sessions", f"all {SESSIONS:,} sessions")


def run(quick: bool = False) -> None:
    sized = sizes(quick, "NEXUS_SEARCH_SIZES", "20000")
    embedder = LocalEmbedder()
    base = base_vectors(embedder, 500)
    report = Report(
        "GET /episodes/search over common words, through HTTP (p50 / p95 ms)",
        ["episodes", "start", "scope", "first ask", "asked again"],
    )
    for size in sized:
        with tempfile.TemporaryDirectory() as tmp:
            build_store(Path(tmp), embedder, base, size, SESSIONS, texts=_common(size))
            for start, warm in WARM.items():
                found, ready = _measure(Path(tmp), warm)
                for scope, cells in found.items():
                    report.add(f"{size:,}", start, scope, *cells)
                report.notes.append(f"{size:,}, {start}: from start to /ready {ready:.1f} s")
    report.notes.append("Targets: no sessionIds at most 15 ms p95 at 20,000, 30 ms at 1,000,000.")
    report.print()


def _measure(data_dir: Path, warm: dict[str, str]) -> tuple[dict[str, list[str]], float]:
    """Each scope's cells, and the seconds from the start to `/ready`."""
    found: dict[str, list[str]] = {}
    with served(data_dir, **warm) as (http, ready):
        for n, scope in enumerate(SCOPES):
            rng = random.Random(n)
            queries = [" ".join(rng.choice(COMMON) for _ in range(8)) for _ in range(QUERIES)]
            first = [_search(http, q, _scope_of(scope, rng)) for q in queries]
            again = [_search(http, q, _scope_of(scope, rng)) for q in queries]
            found[scope] = [_cell(first), _cell(again)]
    return found, ready


def _scope_of(scope: str, rng: random.Random) -> str | None:
    """A row's `sessionIds` (drawn the same way every run)."""
    if scope == SCOPES[0]:
        return None
    if scope == SCOPES[1]:
        return ",".join(str(rng.randint(1, SESSIONS)) for _ in range(5))
    return ",".join(str(s) for s in range(1, SESSIONS + 1))


def _search(http: httpx.Client, query: str, session_ids: str | None) -> float:
    params = {"q": query} if session_ids is None else {"q": query, "sessionIds": session_ids}
    started = time.perf_counter()
    http.get("/episodes/search", params=params).raise_for_status()
    return (time.perf_counter() - started) * 1000


def _cell(samples: list[float]) -> str:
    return f"{percentile(samples, 50):.1f} / {percentile(samples, 95):.1f}"
