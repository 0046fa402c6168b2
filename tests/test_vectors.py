from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg_pool import ConnectionPool
from qdrant_client import QdrantClient

from nexusai.memory.vectors import VectorIndex, VectorPoint
from nexusai.memory.vectors.edge import NO_HNSW_KB, EdgeVectorIndex
from nexusai.memory.vectors.pgvector import PgVectorIndex
from nexusai.memory.vectors.qdrant import QdrantVectorIndex


def unit(*xs: float) -> list[float]:
    norm = sum(x * x for x in xs) ** 0.5
    return [x / norm for x in xs]


@pytest.fixture(params=["edge", "qdrant-client", "pgvector"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    if request.param == "edge":
        made: VectorIndex = EdgeVectorIndex(tmp_path / "episodes", 3)
    elif request.param == "pgvector":
        made = PgVectorIndex(request.getfixturevalue("pg_pool"), "episodes", 3)
    else:
        made = QdrantVectorIndex(QdrantClient(location=":memory:"), "episodes", 3)
    yield made
    made.close()


def fill(index: VectorIndex) -> None:
    index.upsert(
        [
            VectorPoint(1, unit(1, 0, 0), 10),
            VectorPoint(2, unit(0.9, 0.1, 0), 10),
            VectorPoint(3, unit(0.8, 0.2, 0), 20),
            VectorPoint(4, unit(0, 1, 0), 30),
            VectorPoint(5, unit(1, 0.05, 0), [20, 30]),
        ]
    )


def test_nearest_first_with_scores(index: VectorIndex) -> None:
    fill(index)
    hits = index.search(unit(1, 0, 0), None, [], 3)
    assert [h[0] for h in hits] == [1, 5, 2]
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5)


def test_scope_filters_sessions(index: VectorIndex) -> None:
    fill(index)
    assert [h[0] for h in index.search(unit(1, 0, 0), [20], [], 10)] == [5, 3]
    assert {h[0] for h in index.search(unit(1, 0, 0), [10, 30], [], 10)} == {1, 2, 4, 5}
    assert index.search(unit(1, 0, 0), [], [], 10) == []
    assert index.search(unit(1, 0, 0), [99], [], 10) == []


def test_excluded_ids_never_come_back(index: VectorIndex) -> None:
    fill(index)
    assert [h[0] for h in index.search(unit(1, 0, 0), [10, 20], [1, 5], 10)] == [2, 3]


def test_only_the_ids_given_are_searched(index: VectorIndex) -> None:
    fill(index)
    assert [h[0] for h in index.search(unit(1, 0, 0), None, [], 2, [4, 3])] == [3, 4]
    assert [h[0] for h in index.search(unit(1, 0, 0), [20], [3], 10, [3, 4, 5])] == [5]
    assert index.search(unit(1, 0, 0), None, [], 10, []) == []
    assert index.search(unit(1, 0, 0), [10], [], 10, [4]) == []


def test_delete_upsert_and_reset(index: VectorIndex) -> None:
    fill(index)
    index.delete([1, 2])
    assert index.count() == 3
    assert [h[0] for h in index.search(unit(1, 0, 0), [10], [], 10)] == []
    index.upsert([VectorPoint(3, unit(0, 0, 1), 20)])  # overwrite
    assert index.search(unit(0, 0, 1), [20], [], 1)[0][0] == 3
    index.reset(2)
    assert index.count() == 0
    index.upsert([VectorPoint(7, unit(1, 1), 1)])
    assert index.search(unit(1, 1), None, [], 5)[0][0] == 7


def test_edge_vectors_survive_reopen(tmp_path: Path) -> None:
    first = EdgeVectorIndex(tmp_path / "episodes", 3)
    fill(first)
    first.close()
    again = EdgeVectorIndex(tmp_path / "episodes", 3)
    assert again.count() == 5
    assert [h[0] for h in again.search(unit(1, 0, 0), [20], [], 10)] == [5, 3]
    again.close()


def test_second_process_gets_a_clear_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    first = EdgeVectorIndex(tmp_path / "episodes", 3)
    code = (
        "from pathlib import Path; from nexusai.memory.vectors import EdgeVectorIndex;"
        f"EdgeVectorIndex(Path({str(tmp_path / 'episodes')!r}), 3)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    first.close()
    assert result.returncode != 0
    assert "open in another process" in result.stderr


def _spread(n: int, start: int = 0) -> list[VectorPoint]:
    return [VectorPoint(i, unit(1, i / n, (i % 7) / 7 + 0.01), i % 50) for i in range(start, n)]


def test_edge_index_is_opened_never_to_build_hnsw_by_itself(tmp_path: Path) -> None:
    """Only `optimize` (`nexus reindex`, or the child process optimizing behind a serving
    index) builds the graph; the shard the service serves from must never, since the build
    holds the GIL for minutes at scale."""
    index = EdgeVectorIndex(tmp_path / "episodes", 3)
    try:
        index.upsert(_spread(2_000))
        index.optimize()
        assert index.count() == 2_000
        index.upsert(_spread(2_100, 2_000))
        assert index.count() == 2_100
    finally:
        index.close()
    saved = json.loads((tmp_path / "episodes" / "edge_config.json").read_text())
    assert saved["optimizers"]["indexing_threshold"] == NO_HNSW_KB


@pytest.mark.parametrize("path", ["hnsw", "exact"])
def test_pgvector_filtered_search_is_exact_on_a_narrow_scope(
    pg_pool: ConnectionPool, path: str
) -> None:
    """HNSW alone returns its ef_search nearest and a session filter may drop them all;
    the iterative scan must still give a 2-of-300-session scope its true nearest. The
    planner is kept to the HNSW index, as it is at scale (here it would scan the table).
    A scope of few points takes the exact path through the session index instead."""
    with pg_pool.connection() as conn:
        database = conn.info.dbname
        for setting in ("enable_seqscan", "enable_bitmapscan"):
            conn.execute(f"ALTER DATABASE {database} SET {setting} = off")
    pg_pool.drain()  # connections made from now on have the settings
    rng = random.Random(3)
    points = [
        VectorPoint(i, unit(rng.gauss(0, 1), rng.gauss(0, 1), rng.gauss(0, 1)), i % 300)
        for i in range(1, 3_001)
    ]
    index = PgVectorIndex(pg_pool, "episodes", 3, exact_max=0 if path == "hnsw" else 20_000)
    index.upsert(points)
    query = unit(0.3, -0.5, 0.8)
    for scope in ([7, 123], [299], None):
        within = [p for p in points if scope is None or p.scope in scope]
        exact = sorted(
            within, key=lambda p: -sum(a * b for a, b in zip(p.vector, query, strict=True))
        )
        hits = index.search(query, scope, [exact[0].id], 10)
        assert [i for i, _ in hits] == [p.id for p in exact[1:11]]


def test_pgvector_table_of_another_dimension_is_set_aside(pg_pool: ConnectionPool) -> None:
    first = PgVectorIndex(pg_pool, "episodes", 3)
    fill(first)
    again = PgVectorIndex(pg_pool, "episodes", 4)  # the embedder changed
    assert again.damaged is not None
    assert "set aside as vectors_episodes_set_aside_" in again.damaged
    assert again.count() == 0
    again.upsert([VectorPoint(1, unit(1, 0, 0, 0), 1)])
    assert again.search(unit(1, 0, 0, 0), [1], [], 3)[0][0] == 1
    with pg_pool.connection() as conn:
        kept = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'vectors_episodes_set_aside_%'"
        ).fetchone()
    assert kept == (1,)


def test_edge_index_vacuums_when_opened(tmp_path: Path) -> None:
    """Before anything is served, opening reclaims what was deleted before."""
    path = tmp_path / "episodes"
    index = EdgeVectorIndex(path, 3)
    total = 7_000
    index.upsert(_spread(total))
    index.delete(list(range(0, total, 2)))
    before = {p.name for p in (path / "segments").iterdir()}
    index.close()
    again = EdgeVectorIndex(path, 3)
    try:
        assert {p.name for p in (path / "segments").iterdir()} != before  # rewritten
        assert again.count() == total // 2
        assert all(i % 2 for i, _ in again.search(unit(1, 0.5, 0.3), None, [], 50))
    finally:
        again.close()
