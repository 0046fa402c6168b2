"""Qdrant Edge: the Qdrant engine in-process, on disk, no server; optimized behind itself
(`edge_build`), claimed by one process at a time (`owner`)."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import qdrant_edge as edge

from nexusai.config import VECTOR_LAYOUTS as LAYOUTS
from nexusai.errors import first_line
from nexusai.memory.vectors.base import (
    SCOPE_KEY,
    VectorPoint,
    int_id,
    qdrant_conditions,
    scope_payload,
)
from nexusai.memory.vectors.edge_build import run_build
from nexusai.memory.vectors.edge_layout import (
    RESCORED,
    check_room,
    check_sizes,
    layout_of,
    vector_params,
)
from nexusai.memory.vectors.owner import OwnerLock, VectorIndexBusy
from nexusai.models import finds_nothing

log = logging.getLogger("nexusai.vectors")

# Qdrant Edge's optimizer, which builds HNSW graphs and vacuums deleted points, holds the
# GIL while it runs: minutes for a graph of 100,000 vectors, 1.1 s to vacuum 75,000, every
# request stalled. So the shard the service serves from never runs it (its threshold is
# never reached, and it vacuums only when opened, before anything is served). A serving
# index is optimized behind itself instead, in a child process over a copy
# (`edge_build`), once this many points are outside any graph (below that a filtered scan
# costs a few ms)...
NO_HNSW_KB = 2**40
BUILD_HNSW_KB = 10_000
BUILD_BEHIND_MIN = 20_000
# ...or once the deleted points, which stay in memory until a vacuum, are this share of the
# index (Qdrant's own trigger) and at least this many. `nexus reindex`, with the service
# stopped, optimizes in place.
VACUUM_SHARE = 0.2
VACUUM_MIN_POINTS = 1_000


class EdgeVectorIndex:
    """Qdrant Edge: the Qdrant engine in-process, on disk, no server."""

    def __init__(
        self,
        path: Path,
        dimension: int,
        owner: OwnerLock | None = None,
        layout: str = LAYOUTS[0],
    ) -> None:
        """`owner`: the index's lock, claimed already (see `claim_embedded_indexes`).
        `layout`: one of LAYOUTS, what a new index is made in and an existing one is
        converted to when it is next optimized (it is served in its own until then)."""
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        self.path = path
        self.dimension = dimension
        self.layout = layout
        self._write_lock = threading.Lock()
        self.damaged: str | None = None  # why the index found on disk was set aside
        self._deleted = 0  # points deleted since the last vacuum (or since opening)
        # While the index is optimized behind itself: what was written since its copy.
        self._journal: list[edge.UpdateOperation] | None = None
        self._deleted_at_copy = 0
        self._build: threading.Thread | None = None
        self._cancel_build = threading.Event()
        self._closed = False
        self._owner = owner or OwnerLock(path)
        if owner is None:
            self._owner.claim()
        try:
            self._shard = self._open()
        except BaseException:
            self._owner.release()
            raise
        _drop_leftovers(path)  # only once the open says no other process has the index

    def _config(self, layout: str, indexing_kb: int = NO_HNSW_KB) -> edge.EdgeConfig:
        return edge.EdgeConfig(
            vectors=vector_params(self.dimension, layout),
            optimizers=edge.EdgeOptimizersConfig(indexing_threshold=indexing_kb),
        )

    def _open(self) -> edge.EdgeShard:
        if self.path.is_symlink() and not self.path.exists():
            self.path.unlink()  # what a swap linked to was deleted: start empty, as below
        if (self.path / "edge_config.json").exists():
            try:
                return self._load()
            except VectorIndexBusy:
                raise
            except Exception as exc:
                self.damaged = _set_aside(self.path, exc)
        elif self.path.exists() and any(self.path.iterdir()):
            self.damaged = _set_aside(self.path, "its configuration file is missing")
        self.path.mkdir(parents=True, exist_ok=True)
        shard = edge.EdgeShard.create(str(self.path), self._config(self.layout))
        shard.update(
            edge.UpdateOperation.create_field_index(SCOPE_KEY, edge.PayloadSchemaType.Integer)
        )
        return shard

    def _load(
        self,
        indexing_kb: int = NO_HNSW_KB,
        path: Path | None = None,
        vacuum: bool = True,
        layout: str | None = None,
    ) -> edge.EdgeShard:
        """Opens a shard in `layout`, by default the one it is in on disk: opened in
        another, Qdrant rewrites every segment, and at the serving threshold the rewritten
        ones lose their graph (every search an exact scan), so only `optimize` converts."""
        path = (path or self.path).resolve()  # a built shard is reached through a link
        layout = layout or layout_of(path)
        check_sizes(path, self.dimension)
        try:
            shard = edge.EdgeShard.load(str(path), self._config(layout, indexing_kb))
        except Exception as exc:
            if "WouldBlock" in str(exc):
                raise VectorIndexBusy(
                    f"the vector index in {path} is open in another process; only one"
                    " process may use it at a time (stop `nexus serve` first)"
                ) from None
            raise
        try:
            _probe(shard, self.dimension)
            if vacuum:
                shard.optimize()  # vacuums what was deleted before (nothing waits on it yet)
        except Exception:
            shard.close()
            raise
        return shard

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        batch = [
            edge.Point(p.id, [float(x) for x in p.vector], {SCOPE_KEY: scope_payload(p.scope)})
            for p in points
        ]
        with self._write_lock:
            check_room(self.path)
            self._apply(edge.UpdateOperation.upsert_points(batch))

    def _apply(self, operation: edge.UpdateOperation) -> None:
        """A write, under the write lock; journaled while a graph is built behind."""
        self._shard.update(operation)
        if self._journal is not None:
            self._journal.append(operation)

    def delete(self, ids: Sequence[int]) -> None:
        if ids:
            with self._write_lock:
                before = self._shard.info().points_count
                self._apply(edge.UpdateOperation.delete_points([int(i) for i in ids]))
                self._deleted += before - self._shard.info().points_count

    def search(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
        only_ids: Sequence[int] | None = None,
    ) -> list[tuple[int, float]]:
        if finds_nothing(session_ids, limit) or finds_nothing(only_ids, limit):
            return []
        must, must_not = qdrant_conditions(
            session_ids,
            exclude_ids,
            only_ids,
            _in_sessions,
            lambda ids: edge.HasIdCondition(set(ids)),
        )
        request = edge.QueryRequest(
            limit=limit,
            query=edge.Query.Nearest([float(x) for x in vector]),
            filter=edge.Filter(must=must or None, must_not=must_not or None),  # type: ignore[arg-type]
            params=RESCORED,
        )
        return [(int_id(p.id), float(p.score)) for p in self._shard.query(request)]

    def count(self) -> int:
        return int(self._shard.info().points_count)

    def graph_points(self) -> int:
        """Points inside an HNSW graph; searches scan the rest."""
        return int(self._shard.info().indexed_vectors_count)

    @property
    def optimizing(self) -> bool:
        return self._build is not None

    def ids(self) -> set[int]:
        found: set[int] = set()
        offset = None
        while True:
            request = edge.ScrollRequest(offset=offset, limit=1000, with_payload=False)
            records, offset = self._shard.scroll(request)
            found.update(int_id(r.id) for r in records)
            if offset is None:
                return found

    def reset(self, dimension: int) -> None:
        self._stop_build()
        with self._write_lock:
            self._shard.close()
            _remove(self.path)
            self.dimension = dimension
            self._shard = self._open()

    def optimize(self) -> None:
        self._stop_build()
        with self._write_lock:
            # Loading runs the optimizer (see `_load`): at Qdrant's usual threshold it
            # builds the graph, in the wanted layout; then back to the threshold the
            # service keeps.
            self._reload(BUILD_HNSW_KB, self.layout)
            self._reload(NO_HNSW_KB)
            self._deleted = 0

    def _reload(self, indexing_kb: int, layout: str | None = None) -> None:
        self._shard.flush()
        self._shard.close()
        self._shard = self._load(indexing_kb, layout=layout)

    def flush(self) -> None:
        with self._write_lock:
            self._shard.flush()

    def optimize_behind(self) -> bool:
        with self._write_lock:
            if self._build is not None or self._cancel_build.is_set() or not self._due():
                return False
            # The copy and the journal start at one instant: nothing is written between.
            self._shard.flush()
            copy = self.path.with_name(f"{self.path.name}.{time.time_ns()}")
            shutil.copytree(self.path.resolve(), copy)
            self._journal = []
            self._deleted_at_copy = self._deleted
            self._build = threading.Thread(
                target=self._build_and_swap, args=(copy,), name="nexus-optimize", daemon=True
            )
        converting = layout_of(self.path) != self.layout
        log.info(
            "optimizing the vector index behind it (%d points%s)",
            self.count(),
            f", converting it to the {self.layout} layout" if converting else "",
        )
        self._build.start()
        return True

    def _due(self) -> bool:
        if layout_of(self.path) != self.layout:
            return True
        info = self._shard.info()
        if info.points_count - info.indexed_vectors_count >= BUILD_BEHIND_MIN:
            return True
        total = info.points_count + self._deleted
        return self._deleted >= max(VACUUM_MIN_POINTS, VACUUM_SHARE * total)

    def _build_and_swap(self, copy: Path) -> None:
        started = time.monotonic()
        built = run_build(copy, self.dimension, self.layout, self._cancel_build)
        OwnerLock(copy).path.unlink(missing_ok=True)  # the child's claim on its copy, done
        with self._write_lock:
            try:
                unused = (
                    self._swap(copy, started) if built and not self._cancel_build.is_set() else copy
                )
            finally:
                self._journal = None
        if unused is not None:
            shutil.rmtree(unused, ignore_errors=True)
        self._build = None  # the last step: `optimizing` is true until the files are tidy

    def _swap(self, built: Path, started: float) -> Path | None:
        """Opens the optimized copy (a pause: Qdrant Edge holds the GIL while it loads,
        about 0.3 s at 100,000 points), replays what was written since the copy, serves
        from it, and makes it the index on disk. Returns the directory left unused (the
        one replaced, or the copy if it could not be opened), to delete."""
        paused = time.monotonic()
        try:
            shard = self._replayed(built)
        except Exception as exc:  # the serving shard is untouched
            log.warning("swapping in the optimized vector index failed: %s", first_line(exc))
            return built
        previous, self._shard = self._shard, shard
        self._deleted -= self._deleted_at_copy  # the child vacuumed those
        previous.close()
        log.info(
            "swapped in the optimized vector index after %.0f s (a %.2f s pause)",
            paused - started,
            time.monotonic() - paused,
        )
        try:
            return _link(self.path, built)
        except OSError as exc:  # served from now on, but not what the next start opens
            log.warning(
                "the optimized vector index in %s could not take the place of %s (%s); the"
                " next start finds what the old one lacks and rebuilds it from SQLite",
                built,
                self.path,
                exc,
            )
            return None

    def _replayed(self, built: Path) -> edge.EdgeShard:
        """The optimized copy, opened, with the writes made since it was copied."""
        assert self._journal is not None
        shard = self._load(path=built, vacuum=False)
        try:
            for operation in self._journal:
                shard.update(operation)
        except BaseException:
            shard.close()
            raise
        return shard

    def _stop_build(self, for_good: bool = False) -> None:
        """Stops an optimization behind the index (its copy is dropped); a closed index
        starts no other."""
        self._cancel_build.set()
        build = self._build
        if build is not None:
            build.join()
        if not for_good:
            self._cancel_build.clear()

    def close(self) -> None:
        self._stop_build(for_good=True)
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._shard.flush()
            except Exception as exc:  # its files went away under it: SQLite still has all
                log.warning(
                    "the vector index in %s could not be saved (%s); the next start checks"
                    " it against SQLite and rebuilds what is missing",
                    self.path,
                    first_line(exc),
                )
            self._shard.close()
            self._owner.release()


def _probe(shard: edge.EdgeShard, dimension: int) -> None:
    """A search that reads the stored vectors: a truncated or garbled file fails here, at
    start, rather than in a user's turn."""
    count = int(shard.info().points_count)
    if count:
        probe = [1.0 / dimension**0.5] * dimension
        shard.query(edge.QueryRequest(limit=min(count, 10), query=edge.Query.Nearest(probe)))


def _set_aside(path: Path, why: object) -> str:
    """Moves a damaged index out of the way (kept for a look, never deleted) and says so."""
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    path.resolve().rename(aside)
    path.unlink(missing_ok=True)  # the link to it, if a built shard was swapped in
    return (
        f"the vector index in {path} could not be read ({first_line(why)});"
        f" set aside as {aside.name}"
    )


def _link(path: Path, target: Path) -> Path:
    """Makes `path` lead to `target` (a sibling) in one rename, whether it was a directory
    or a link, and returns where the directory it led to is now: a crash on the way leaves
    at worst no index, which a start rebuilds (and the directory, a leftover it drops)."""
    replaced = path.resolve()
    if not path.is_symlink():
        replaced = path.with_name(f"{path.name}.{time.time_ns()}")
        path.rename(replaced)
    link = path.with_name(f"{path.name}.link")
    link.unlink(missing_ok=True)
    link.symlink_to(target.name)
    os.replace(link, path)
    return replaced


def _remove(path: Path) -> None:
    if path.is_symlink():
        shutil.rmtree(path.resolve(), ignore_errors=True)
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def _drop_leftovers(path: Path) -> None:
    """Copies of builds that a stop or a crash cut short, shards a swap replaced, links
    half made: siblings named after the index. Set-aside damaged indexes are kept."""
    current = path.resolve()
    for lock in path.parent.glob(f".{path.name}.*.lock"):  # the locks of built copies
        lock.unlink(missing_ok=True)
    for sibling in path.parent.glob(f"{path.name}.*"):
        if ".damaged-" in sibling.name or sibling == current:
            continue
        if sibling.is_symlink():
            sibling.unlink()
        elif sibling.is_dir():
            shutil.rmtree(sibling, ignore_errors=True)


def _in_sessions(ids: list[int]) -> edge.FieldCondition | edge.HasIdCondition:
    return edge.FieldCondition(SCOPE_KEY, match=edge.MatchAny(ids))
