"""Turns while the service extracts an import's entities behind itself.

`nexus import --entities later` writes 20,000 short turns (the import-short benchmark's, 20
to a session, 1,000 sessions) and leaves their entities to the service. The service is
served once without extraction until its vector index's search graph is built, so that
what follows competes with extraction alone. It is then started with spaCy's extraction,
and `/context` turns are asked at the recommended settings (learned, `contextBudget` 1000,
`memoryOrder` auto) from the moment `/ready` answers: the first 10, and every turn until
the last entity is extracted. The same messages are asked again when it is done (quiet).
`NEXUS_IMPORT_SHORT` sets how many turns are imported.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.bench_import_short import cli_import, conversations_of, write_jsonl
from benchmarks.bench_project import _common_queries, _settle
from benchmarks.common import Report, served, timed_context
from nexusai.evaluation.metrics import percentile

FIRST = 10
RECOMMENDED = {"fusion": "learned", "contextBudget": 1000, "memoryOrder": "auto"}
EXTRACTION_LIMIT_SECONDS = 1800


def run(quick: bool = False) -> None:
    count = 2_000 if quick else int(os.environ.get("NEXUS_IMPORT_SHORT", "20000"))
    sessions = count // 20
    report = Report(
        f"/context while the entities of {count:,} imported turns are extracted (ms)",
        ["turns", "count", "p50", "p95", "p99", "p95 vs quiet"],
    )
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "d"
        jsonl = Path(tmp) / "turns.jsonl"
        write_jsonl(conversations_of(count), jsonl, interleaved=False)
        cli_import(jsonl, data, "later")
        with served(data) as (http, _):  # no extraction: the search graph is built first
            _settle(http)
        with served(data, NEXUS_EXTRACTOR="spacy") as (http, ready):
            http.patch("/settings", json=RECOMMENDED).raise_for_status()
            extracting, took = _while_extracting(http, sessions)
            quiet = _asked(http, sessions, len(extracting))
    report.notes.append(_steps(extracting, quiet))
    extracting_ms, quiet_ms = [ms for ms, _ in extracting], [ms for ms, _ in quiet]
    rows = {
        f"the first {FIRST} after /ready": extracting_ms[:FIRST],
        "every turn while extracting": extracting_ms,
        "the same, extraction done (quiet)": quiet_ms,
    }
    quiet_p95 = percentile(quiet_ms, 95)
    for what, samples in rows.items():
        p95 = percentile(samples, 95)
        report.add(
            what,
            len(samples),
            f"{percentile(samples, 50):.1f}",
            f"{p95:.1f}",
            f"{percentile(samples, 99):.1f}",
            f"{p95 / quiet_p95:.2f}",
        )
    report.notes.append(
        f"/ready after {ready:.1f} s; the last entity extracted {took:.0f} s later."
    )
    report.notes.append("Targets: the first 10 turns p95 at most 25 ms, and every turn while")
    report.notes.append("extracting within 1.3x of the quiet p95.")
    report.print()


Timed = tuple[float, dict[str, float]]  # a turn's wall time and its Server-Timing steps


def _while_extracting(http: httpx.Client, sessions: int) -> tuple[list[Timed], float]:
    """Turns one after another until no entity waits: their times, and how long it took."""
    rng, queries = random.Random(3), _common_queries()
    started = time.monotonic()
    samples: list[Timed] = []
    while time.monotonic() - started < EXTRACTION_LIMIT_SECONDS:
        samples.append(
            timed_context(http, rng.randint(1, sessions), queries[len(samples) % len(queries)])
        )
        if len(samples) % 10 == 0 and not http.get("/health").json()["entitiesPending"]:
            return samples, time.monotonic() - started
    raise RuntimeError(f"entities were still being extracted after {EXTRACTION_LIMIT_SECONDS} s")


def _asked(http: httpx.Client, sessions: int, count: int) -> list[Timed]:
    """The same turns again, in the same order."""
    rng, queries = random.Random(3), _common_queries()
    return [
        timed_context(http, rng.randint(1, sessions), queries[n % len(queries)])
        for n in range(count)
    ]


def _steps(extracting: list[Timed], quiet: list[Timed]) -> str:
    """Each Server-Timing step's p95 while extracting and quiet: where the difference is."""
    names = dict.fromkeys(name for _, steps in quiet for name in steps)
    cells = []
    for name in names:
        during = [steps.get(name, 0.0) for _, steps in extracting]
        after = [steps.get(name, 0.0) for _, steps in quiet]
        cells.append(f"{name} {percentile(during, 95):.1f}/{percentile(after, 95):.1f}")
    return "p95 of each step, while extracting / quiet (ms): " + ", ".join(cells)
