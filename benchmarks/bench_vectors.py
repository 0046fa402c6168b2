"""Semantic memory: ingest through the real write path, vector query latency, reopen.

Vectors for the 100,000-episode index are the real MiniLM vectors of 10,000 messages plus
small Gaussian noise (re-normalized): real geometry, without embedding 100,000 texts.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from benchmarks.common import LATENCY_COLUMNS, Report, embedder_seconds, sentences, time_ms
from nexusai.config import VECTOR_LAYOUTS, Config
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.memory.repositories.derived import VectorState
from nexusai.memory.service import Memory
from nexusai.memory.vectors import EdgeVectorIndex, VectorIndex, VectorPoint
from nexusai.models import NewEpisode

SESSIONS = 1000


def ingest(embedder: LocalEmbedder, count: int, chunk: int = 500) -> tuple[Report, np.ndarray]:
    """Raw embedding and the write path take turns on the same chunks of text, so that
    noise from the machine falls on both alike. The write path embeds each message with the
    end of the one before it; the raw rate is measured on those same texts (the fair
    baseline for the path's own overhead) and on the bare messages (what the context costs).
    """
    report = Report(
        f"Ingest of {count:,} short messages (MiniLM, ONNX on CPU)",
        ["path", "episodes/s", "vs raw"],
    )
    texts = list(sentences(count))
    raw: list[list[float]] = []
    bare_seconds = raw_seconds = path_seconds = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory.open(Config.from_env({}, data_dir=Path(tmp), extractor="none"), embedder)
        for start in range(0, count, chunk):
            part = texts[start : start + chunk]
            began = time.perf_counter()
            raw.extend(embedder.embed(part))
            bare_seconds += time.perf_counter() - began
            session_id = memory.store.sessions.create().id
            stored = []
            began = time.perf_counter()
            for i in range(0, len(part), 100):  # requests of 100 episodes, as a client would
                batch = [NewEpisode("user", t) for t in part[i : i + 100]]
                stored += memory.add_episodes(session_id, batch)
            path_seconds += time.perf_counter() - began
            raw_seconds += embedder_seconds(embedder, stored)
        assert memory.count_pending_vectors() == 0
        memory.close()
    bare_rate, raw_rate, path_rate = (count / t for t in (bare_seconds, raw_seconds, path_seconds))
    report.add("embedder alone, bare messages", f"{bare_rate:,.0f}", f"{bare_rate / raw_rate:.2f}")
    report.add("embedder alone, message + end of the one before", f"{raw_rate:,.0f}", "1.00")
    report.add(
        "write path (SQLite + FTS + embed + upsert)",
        f"{path_rate:,.0f}",
        f"{path_rate / raw_rate:.2f}",
    )
    report.notes.append(
        "Target: the write path keeps at least 80% of the embedder's rate on the texts it embeds."
    )
    return report, np.array(raw, dtype=np.float32)


def noisy_copies(base: np.ndarray, count: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    picks = base[rng.integers(0, len(base), count)]
    vectors = picks + rng.normal(0, 0.03, picks.shape).astype(np.float32)
    unit: np.ndarray = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    return unit


def fill_index(index: VectorIndex, vectors: np.ndarray, per_session: int = 0) -> None:
    """Episode i + 1 in session i // per_session + 1, as `build_store` writes them (or,
    without `per_session`, dealt round the sessions)."""
    for start in range(0, len(vectors), 2000):
        index.upsert(
            [
                VectorPoint(i + 1, vectors[i].tolist(), _session_of(i, per_session))
                for i in range(start, min(start + 2000, len(vectors)))
            ]
        )


def _session_of(index: int, per_session: int) -> int:
    return index // per_session + 1 if per_session else index % SESSIONS + 1


def search(
    report: Report, index: EdgeVectorIndex, queries: np.ndarray, exact: list[set[int]], label: str
) -> None:
    """Latency scoped and unscoped; beside the unscoped row, the share of the exact top 20
    (by cosine over every vector) that the index returned."""
    rng = random.Random(5)
    cycle = iter(list(queries) * 20)
    scoped = time_ms(
        lambda: index.search(next(cycle), rng.sample(range(1, SESSIONS + 1), 5), [], 20), 300
    )
    report.add_latency(f"{label}, scope 5 of {SESSIONS} sessions", scoped, "")
    unscoped = time_ms(lambda: index.search(next(cycle), None, [], 20), 300)
    found = [{i for i, _ in index.search(q, None, [], 20)} for q in queries]
    overlap = np.mean([len(got & best) / 20 for got, best in zip(found, exact, strict=True)])
    report.add_latency(f"{label}, no filter", unscoped, f"{overlap:.3f}")


def searches(embedder: LocalEmbedder, base: np.ndarray, sizes: list[int], tmp: Path) -> Report:
    """Each size in each vector layout (NEXUS_VECTOR_MEMORY), before and after its graph."""
    report = Report(
        "Vector query alone (Qdrant Edge, top 20, cosine)", [*LATENCY_COLUMNS, "top 20 as exact"]
    )
    queries = np.array(embedder.embed(list(sentences(100, seed=99))), dtype=np.float32)
    for size in sizes:
        vectors = noisy_copies(base, size)
        exact = [set((np.argsort(-(vectors @ q))[:20] + 1).tolist()) for q in queries]
        for layout in VECTOR_LAYOUTS:
            index = EdgeVectorIndex(tmp / f"v{size}-{layout}", base.shape[1], layout=layout)
            fill_index(index, vectors)
            search(report, index, queries, exact, f"{size:,} {layout}, before optimize")
            start = time.perf_counter()
            index.optimize()
            spent = time.perf_counter() - start
            report.notes.append(f"optimize() at {size:,}, {layout}: {spent:.1f} s")
            search(report, index, queries, exact, f"{size:,} {layout}, HNSW built")
            index.close()
    report.notes.append("Target: p95 under 5 ms at 100,000 with the scope filter.")
    return report


_REOPEN = """
import json, resource, sys, time
from pathlib import Path
from nexusai.config import Config
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.memory.service import Memory
embedder = LocalEmbedder()
start = time.perf_counter()
memory = Memory.open(Config.from_env({}, data_dir=Path(sys.argv[1]), extractor="none"), embedder)
opened = time.perf_counter() - start
memory.search_vectors(embedder.embed_one("hello"), [1, 2, 3], [], 20)
print(json.dumps({"open_s": opened, "count": memory.vectors.count(),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def build_store(
    data_dir: Path,
    embedder: LocalEmbedder,
    base: np.ndarray,
    size: int,
    per_project: int = 0,
    database_url: str | None = None,
    texts: Iterator[str] | None = None,
    labelled: bool = False,
    layout: str | None = None,
) -> float:
    """A store of `size` episodes over SESSIONS sessions with their vectors (written
    straight to the index), ready to open: SQLite in `data_dir`, or PostgreSQL at
    `database_url`. With `per_project`, sessions are grouped into projects of that many
    sessions; `texts` gives the episodes' texts (default: the sentence generator's). With
    `labelled`, session i is dated i hours after LABELLED_START (its turns a second apart)
    and each episode's metadata `tag` is one of LABELS values, in turn (filters' rows).
    `layout`: the embedded index's NEXUS_VECTOR_MEMORY (None: the default). Returns the
    seconds the rows took."""
    config = Config.from_env(
        {}, data_dir=data_dir, extractor="none", database_url=database_url, vector_memory=layout
    )
    started = time.perf_counter()
    texts = texts or sentences(size)
    with closing(Memory.open(config, embedder)) as memory:
        store, project = memory.store, None
        for i in range(SESSIONS):
            if per_project and i % per_project == 0:
                project = store.projects.create(f"p{i // per_project}").id
            session_id = store.sessions.create(project).id
            batch = [
                _labelled(next(texts), i, n) if labelled else NewEpisode("u", next(texts))
                for n in range(size // SESSIONS)
            ]
            store.episodes.add(session_id, batch)
        rows = time.perf_counter() - started
        # The vectors first, then the rows say so: an open finding rows marked indexed
        # without their vectors would mark them pending again.
        fill_index(memory.vectors.index, noisy_copies(base, size), per_session=size // SESSIONS)
        store.derived.set_vectors(list(range(1, size + 1)), VectorState.INDEXED)
    return rows


LABELLED_START = datetime(2026, 1, 1, tzinfo=UTC)
LABELS = 100


def _labelled(text: str, session: int, turn: int) -> NewEpisode:
    when = LABELLED_START + timedelta(hours=session, seconds=turn)
    return NewEpisode("u", text, when, {"tag": f"t{(session * 7 + turn) % LABELS}"})


def reopen(embedder: LocalEmbedder, base: np.ndarray, size: int, tmp: Path) -> Report:
    report = Report(f"Reopen of a {size:,}-episode store", ["what", "value"])
    build_store(tmp, embedder, base, size)
    result = subprocess.run(
        [sys.executable, "-c", _REOPEN, str(tmp)], capture_output=True, text=True, check=True
    )
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["count"] == size
    report.add("Memory.open (SQLite + Qdrant Edge), s", f"{figures['open_s']:.2f}")
    report.add(
        "peak RSS of the process (model + store + one query), MB", f"{figures['rss_mb']:,.0f}"
    )
    return report


def run(quick: bool = False) -> None:
    embedder = LocalEmbedder()
    report, base = ingest(embedder, 1000 if quick else 10_000)
    report.print()
    with tempfile.TemporaryDirectory() as tmp:
        sizes = [10_000] if quick else [10_000, 100_000]
        searches(embedder, base, sizes, Path(tmp)).print()
        reopen(embedder, base, sizes[-1], Path(tmp) / "reopen").print()
