"""A serving Qdrant Edge index optimized behind itself, in a child process (HNSW graph
built, deleted points vacuumed): what was written meanwhile is in the swapped-in shard,
searches never fail, a stop leaves nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

from nexusai.memory.vectors import EdgeVectorIndex, VectorPoint, edge_layout
from nexusai.memory.vectors import edge as vectors

# A build on a busy 2-core machine can take minutes; a hang is what this catches.
pytestmark = pytest.mark.timeout(900)

DIM = 384
# Over Qdrant's usual indexing threshold (10 MB of vectors), which the child builds at.
POINTS = 8_000
SESSIONS = 100


@pytest.fixture
def big(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EdgeVectorIndex]:
    monkeypatch.setattr(vectors, "BUILD_BEHIND_MIN", POINTS // 2)
    index = EdgeVectorIndex(tmp_path / "vectors" / "episodes", DIM)
    rng = np.random.default_rng(5)
    for start in range(1, POINTS + 1, 2000):
        index.upsert([point(i, rng) for i in range(start, start + 2000)])
    yield index
    index.close()


def point(i: int, rng: np.random.Generator) -> VectorPoint:
    vector = rng.normal(size=DIM)
    return VectorPoint(i, (vector / np.linalg.norm(vector)).tolist(), i % SESSIONS + 1)


def wait_built(index: EdgeVectorIndex, rng: np.random.Generator) -> int:
    """Searches while the build runs (each must answer) until the index says the build
    ended; how many were made. No clock of its own: a slow machine only takes longer,
    and a build that hangs is caught by the module's timeout."""
    searches = 0
    pause = 0.01
    while index.optimizing:
        query = point(0, rng)
        assert len(index.search(query.vector, [1, 2, 3], [], 10)) == 10
        assert len(index.search(query.vector, None, [], 10)) == 10
        searches += 1
        time.sleep(pause)  # the child runs only on CPU time nobody else wants
        pause = min(pause * 1.2, 0.5)  # fewer searches as it goes: they slow the build
    return searches


def test_built_behind_with_what_was_written_meanwhile(big: EdgeVectorIndex) -> None:
    rng = np.random.default_rng(9)
    assert big.graph_points() == 0
    assert big.optimize_behind()
    assert not big.optimize_behind()  # one at a time
    added = [point(i, rng) for i in range(POINTS + 1, POINTS + 51)]
    big.upsert(added)
    big.delete(list(range(1, 21)))
    moved = point(21, rng)
    big.upsert([moved])
    assert wait_built(big, rng) > 0

    assert big.graph_points() >= POINTS - 20
    assert big.ids() == set(range(21, POINTS + 51))
    for written in (added[0], added[-1], moved):
        assert isinstance(written.scope, int)
        assert big.search(written.vector, [written.scope], [], 1)[0][0] == written.id
    assert not big.optimize_behind()  # nothing left outside a graph

    path = big.path
    assert path.is_symlink()
    assert path.resolve().parent == path.parent
    assert sorted(p.name for p in path.parent.iterdir() if not p.name.startswith(".")) == sorted(
        [path.name, path.resolve().name]
    )
    big.close()
    reopened = EdgeVectorIndex(path, DIM)
    try:
        assert reopened.ids() == set(range(21, POINTS + 51))
        assert reopened.graph_points() >= POINTS - 20
    finally:
        reopened.close()


def test_writes_racing_the_build_and_the_swap_all_land(big: EdgeVectorIndex) -> None:
    """A writer upserting and deleting as fast as it can, from before the copy until after
    the swap: the index ends holding exactly what it was last told."""
    held = set(range(1, POINTS + 1))
    done = threading.Event()

    def writer() -> None:
        rng = np.random.default_rng(4)
        random_ids = np.random.default_rng(6)
        while not done.is_set():
            fresh = int(random_ids.integers(1, 2 * POINTS))
            big.upsert([point(fresh, rng)])
            held.add(fresh)
            gone = int(random_ids.integers(1, 2 * POINTS))
            big.delete([gone])
            held.discard(gone)
            time.sleep(0.001)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        time.sleep(0.2)
        assert big.optimize_behind()
        wait_built(big, np.random.default_rng(3))
        time.sleep(0.2)
    finally:
        done.set()
        thread.join()
    assert big.graph_points() > 0
    assert big.ids() == held


def test_deleted_points_are_vacuumed_behind_once_many(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path / "episodes", DIM)
    rng = np.random.default_rng(2)
    try:
        index.upsert([point(i, rng) for i in range(1, 3_001)])
        index.delete(list(range(10, 3_001, 10)))  # 300: a tenth, and under the minimum
        assert not index.optimize_behind()
        index.delete([*range(3, 3_001, 3), 5, 7, 99_999])  # 902 more, some gone
        gone = set(range(10, 3_001, 10)) | set(range(3, 3_001, 3)) | {5, 7}
        segments = {p.name for p in (index.path / "segments").iterdir()}
        assert index.optimize_behind()
        wait_built(index, rng)
        assert {p.name for p in (index.path / "segments").iterdir()}.isdisjoint(segments)
        assert index.ids() == set(range(1, 3_001)) - gone
        assert not index.optimize_behind()  # nothing deleted since
        assert index.graph_points() == 0  # too small for a graph: a scan is as quick
    finally:
        index.close()


def test_closing_stops_a_build_and_leaves_no_copy(big: EdgeVectorIndex) -> None:
    path = big.path
    assert big.optimize_behind()
    big.close()
    assert [p.name for p in path.parent.iterdir() if not p.name.startswith(".")] == [path.name]
    assert not path.is_symlink()
    reopened = EdgeVectorIndex(path, DIM)
    try:
        assert reopened.count() == POINTS
    finally:
        reopened.close()


def test_leftovers_of_a_crashed_build_are_dropped_at_open(tmp_path: Path) -> None:
    root = tmp_path / "vectors"
    EdgeVectorIndex(root / "episodes", DIM).close()
    (root / "episodes.1764540000000000000").mkdir()  # a copy a crash left
    (root / "episodes.link").symlink_to("episodes")  # a link half made
    (root / "episodes.damaged-20261130-120000").mkdir()  # kept for a look
    (root / "entities").mkdir()
    EdgeVectorIndex(root / "episodes", DIM).close()
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == [
        "entities",
        "episodes",
        "episodes.damaged-20261130-120000",
    ]


def test_a_link_to_a_deleted_index_opens_empty(big: EdgeVectorIndex) -> None:
    assert big.optimize_behind()
    wait_built(big, np.random.default_rng(1))
    big.close()
    shutil.rmtree(big.path.resolve())
    again = EdgeVectorIndex(big.path, DIM)
    try:
        assert again.count() == 0  # the store's start marks the episodes for a rebuild
        assert not big.path.is_symlink()
    finally:
        again.close()


def test_reset_of_a_swapped_index_removes_what_it_leads_to(big: EdgeVectorIndex) -> None:
    assert big.optimize_behind()
    wait_built(big, np.random.default_rng(1))
    built = big.path.resolve()
    big.reset(DIM)
    assert big.count() == 0
    assert not built.exists()


_SERVICE = """
import sys, time
from pathlib import Path
import numpy as np
from nexusai.memory.vectors import edge as vectors
vectors.BUILD_BEHIND_MIN = 4_000
index = vectors.EdgeVectorIndex(Path(sys.argv[1]), 384)
rng = np.random.default_rng(0)
points = [vectors.VectorPoint(i, rng.normal(size=384).tolist(), 1) for i in range(1, 8_001)]
index.upsert(points)
assert index.optimize_behind()
print("optimizing", flush=True)
time.sleep(120)
"""


def _builder(pid: int) -> list[psutil.Process]:
    """The service's build child, once its thread has started it."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = [
            child
            for child in psutil.Process(pid).children()
            if "nexusai.memory.vectors.edge_child" in " ".join(child.cmdline())
        ]
        if found:
            return found
        time.sleep(0.01)
    raise AssertionError("the service started no build child")


def test_a_killed_service_takes_its_child_along(tmp_path: Path) -> None:
    service = subprocess.Popen(
        [sys.executable, "-c", _SERVICE, str(tmp_path / "episodes")], stdout=subprocess.PIPE
    )
    try:
        assert service.stdout is not None
        assert service.stdout.readline().strip() == b"optimizing"
        children = _builder(service.pid)
        assert children[0].is_running()  # the kill below is what must end it
    finally:
        service.kill()
        service.wait()
        if service.stdout is not None:
            service.stdout.close()
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive


def test_an_index_in_ram_is_converted_to_compact_behind_itself(tmp_path: Path) -> None:
    """An index made with NEXUS_VECTOR_MEMORY=ram, opened with the default: served in its
    own layout (its graph kept) until the build behind it converts it."""
    path = tmp_path / "episodes"
    rng = np.random.default_rng(8)
    points = [point(i, rng) for i in range(1, POINTS + 1)]
    index = EdgeVectorIndex(path, DIM, layout="ram")
    index.upsert(points)
    index.optimize()  # as `nexus reindex` does: its graph built in place
    graphed = index.graph_points()
    index.close()
    assert graphed > 0
    assert edge_layout.layout_of(path) == "ram"

    compact = EdgeVectorIndex(path, DIM)
    try:
        assert edge_layout.layout_of(path) == "ram"
        assert compact.graph_points() == graphed
        assert compact.search(points[5].vector, None, [], 1)[0][0] == points[5].id
        assert compact.optimize_behind()  # due for its layout alone
        wait_built(compact, rng)
        assert edge_layout.layout_of(path) == "compact"
        assert compact.graph_points() == graphed
        for written in points[::400]:
            found = compact.search(written.vector, None, [], 3)
            assert found[0][0] == written.id
            assert found[0][1] == pytest.approx(1.0, abs=1e-4)  # rescored: the exact cosine
        assert not compact.optimize_behind()
    finally:
        compact.close()


def test_a_layout_that_is_not_known_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="layout"):
        EdgeVectorIndex(tmp_path / "episodes", DIM, layout="disk")
    assert not (tmp_path / "episodes").exists()
