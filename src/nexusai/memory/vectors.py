"""Vector indexes: one protocol, two engines (embedded Qdrant Edge, remote Qdrant).

Vectors are derived data: SQLite holds the truth, and every vector can be rebuilt from it.
Each point's id is the row id it was made from (for a long episode's later windows, an id
derived from it: see `chunks`); its payload carries the `session_id` (one id, or for an
entity the list of sessions it is visible to) that searches filter on.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import qdrant_edge as edge

from nexusai.config import Config
from nexusai.errors import ConfigError, NexusError
from nexusai.models import finds_nothing

log = logging.getLogger("nexusai.vectors")

SCOPE_KEY = "session_id"

# Qdrant Edge's optimizer builds an HNSW graph once a segment passes its indexing threshold,
# and holds the GIL while it does: minutes at 100,000 vectors, every request stalled. So a
# shard the service opens never builds one (its optimizer only vacuums deleted points);
# `nexus reindex`, with the service stopped, builds it at Qdrant's usual threshold.
NO_HNSW_KB = 2**40
BUILD_HNSW_KB = 10_000
# Deleted points stay in memory until a vacuum; one runs when they are this share of the
# index (Qdrant's own trigger) and at least this many. A vacuum holds the GIL while it
# copies the live points (1.1 s at 75,000 of 384 dimensions), so a serving index vacuums
# only while it is small enough to pause requests under 100 ms; a larger one vacuums when
# it is opened, before anything is served.
VACUUM_SHARE = 0.2
VACUUM_MIN_POINTS = 1_000
VACUUM_LIVE_MAX = 2_500


class VectorIndexBusy(NexusError):
    status_code = 409


@dataclass(frozen=True)
class VectorPoint:
    id: int
    vector: Sequence[float]
    scope: int | Sequence[int]


class VectorIndex(Protocol):
    dimension: int

    def upsert(self, points: Sequence[VectorPoint]) -> None: ...

    def delete(self, ids: Sequence[int]) -> None: ...

    def search(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
    ) -> list[tuple[int, float]]:
        """Nearest points by cosine similarity, best first, within the sessions given (all
        when None), never one of `exclude_ids`."""
        ...

    def count(self) -> int: ...

    def ids(self) -> set[int]:
        """Every point id in the index (for `nexus doctor`)."""
        ...

    def reset(self, dimension: int) -> None:
        """Drop every vector and start empty with this dimension (for a rebuild)."""
        ...

    def optimize(self) -> None:
        """Build search indexes now (slow, blocks the process: `nexus reindex` only)."""
        ...

    def compact(self) -> bool:
        """Reclaim the memory of deleted points once they are many (a short pause, which
        is why it waits for many); True if it ran."""
        ...

    def flush(self) -> None:
        """Write what is buffered to disk, so the write-ahead log can be cut short."""
        ...

    def close(self) -> None: ...


class EdgeVectorIndex:
    """Qdrant Edge: the Qdrant engine in-process, on disk, no server."""

    def __init__(self, path: Path, dimension: int) -> None:
        self.path = path
        self.dimension = dimension
        self._write_lock = threading.Lock()
        self.damaged: str | None = None  # why the index found on disk was set aside
        self._deleted = 0  # points deleted since the last vacuum (or since opening)
        self._shard = self._open()

    def _config(self, indexing_kb: int = NO_HNSW_KB) -> edge.EdgeConfig:
        return edge.EdgeConfig(
            vectors=edge.EdgeVectorParams(size=self.dimension, distance=edge.Distance.Cosine),
            optimizers=edge.EdgeOptimizersConfig(indexing_threshold=indexing_kb),
        )

    def _open(self) -> edge.EdgeShard:
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
        shard = edge.EdgeShard.create(str(self.path), self._config())
        shard.update(
            edge.UpdateOperation.create_field_index(SCOPE_KEY, edge.PayloadSchemaType.Integer)
        )
        return shard

    def _load(self, indexing_kb: int = NO_HNSW_KB) -> edge.EdgeShard:
        try:
            shard = edge.EdgeShard.load(str(self.path), self._config(indexing_kb))
        except Exception as exc:
            if "WouldBlock" in str(exc):
                raise VectorIndexBusy(
                    f"the vector index in {self.path} is open in another process; only one"
                    " process may use it at a time (stop `nexus serve` first)"
                ) from None
            raise
        try:
            _probe(shard, self.dimension)
            shard.optimize()  # vacuums what was deleted before (nothing waits on it yet)
        except Exception:
            shard.close()
            raise
        return shard

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        batch = [
            edge.Point(p.id, [float(x) for x in p.vector], {SCOPE_KEY: _scope(p.scope)})
            for p in points
        ]
        with self._write_lock:
            self._shard.update(edge.UpdateOperation.upsert_points(batch))

    def delete(self, ids: Sequence[int]) -> None:
        if ids:
            with self._write_lock:
                before = self._shard.info().points_count
                self._shard.update(edge.UpdateOperation.delete_points([int(i) for i in ids]))
                self._deleted += before - self._shard.info().points_count

    def search(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
    ) -> list[tuple[int, float]]:
        if finds_nothing(session_ids, limit):
            return []
        must: list[edge.FieldCondition] = []
        if session_ids is not None:
            must.append(
                edge.FieldCondition(SCOPE_KEY, match=edge.MatchAny([*map(int, session_ids)]))
            )
        must_not = [edge.HasIdCondition(set(map(int, exclude_ids)))] if exclude_ids else []
        request = edge.QueryRequest(
            limit=limit,
            query=edge.Query.Nearest([float(x) for x in vector]),
            filter=edge.Filter(must=must or None, must_not=must_not or None),  # type: ignore[arg-type]
        )
        return [(_int_id(p.id), float(p.score)) for p in self._shard.query(request)]

    def count(self) -> int:
        return int(self._shard.info().points_count)

    def ids(self) -> set[int]:
        found: set[int] = set()
        offset = None
        while True:
            request = edge.ScrollRequest(offset=offset, limit=1000, with_payload=False)
            records, offset = self._shard.scroll(request)
            found.update(_int_id(r.id) for r in records)
            if offset is None:
                return found

    def reset(self, dimension: int) -> None:
        with self._write_lock:
            self._shard.close()
            shutil.rmtree(self.path, ignore_errors=True)
            self.dimension = dimension
            self._shard = self._open()

    def optimize(self) -> None:
        with self._write_lock:
            # Loading runs the optimizer (see `_load`): at Qdrant's usual threshold it
            # builds the graph; then back to the threshold the service keeps.
            self._reload(BUILD_HNSW_KB)
            self._reload(NO_HNSW_KB)
            self._deleted = 0

    def _reload(self, indexing_kb: int) -> None:
        self._shard.flush()
        self._shard.close()
        self._shard = self._load(indexing_kb)

    def compact(self) -> bool:
        with self._write_lock:
            live = self._shard.info().points_count
            if live > VACUUM_LIVE_MAX:
                return False  # vacuumed at the next open instead
            if self._deleted < max(VACUUM_MIN_POINTS, VACUUM_SHARE * (live + self._deleted)):
                return False
            self._shard.optimize()  # vacuum only: this shard never builds HNSW
            self._shard.flush()
            self._deleted = 0
            return True

    def flush(self) -> None:
        with self._write_lock:
            self._shard.flush()

    def close(self) -> None:
        with self._write_lock:
            try:
                self._shard.flush()
            except Exception as exc:  # its files went away under it: SQLite still has all
                log.warning(
                    "the vector index in %s could not be saved (%s); the next start checks"
                    " it against SQLite and rebuilds what is missing",
                    self.path,
                    str(exc).splitlines()[0][:200],
                )
            self._shard.close()


class QdrantVectorIndex:
    """A Qdrant server or cluster through qdrant-client (or its local mode, in tests)."""

    def __init__(self, client: object, collection: str, dimension: int) -> None:
        from qdrant_client import QdrantClient

        assert isinstance(client, QdrantClient)
        self._client = client
        self.collection = collection
        self.dimension = dimension
        self._ensure_collection()

    def _ensure_collection(self) -> None:
        from qdrant_client import models

        if self._client.collection_exists(self.collection):
            return
        self._client.create_collection(
            self.collection,
            vectors_config=models.VectorParams(
                size=self.dimension, distance=models.Distance.COSINE
            ),
        )
        self._client.create_payload_index(
            self.collection, SCOPE_KEY, field_schema=models.PayloadSchemaType.INTEGER
        )

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        from qdrant_client import models

        if points:
            self._client.upsert(
                self.collection,
                [
                    models.PointStruct(
                        id=p.id,
                        vector=[float(x) for x in p.vector],
                        payload={SCOPE_KEY: _scope(p.scope)},
                    )
                    for p in points
                ],
            )

    def delete(self, ids: Sequence[int]) -> None:
        from qdrant_client import models

        if ids:
            self._client.delete(self.collection, models.PointIdsList(points=[int(i) for i in ids]))

    def search(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
    ) -> list[tuple[int, float]]:
        from qdrant_client import models

        if finds_nothing(session_ids, limit):
            return []
        must: list[models.Condition] = []
        if session_ids is not None:
            must.append(
                models.FieldCondition(
                    key=SCOPE_KEY, match=models.MatchAny(any=[*map(int, session_ids)])
                )
            )
        must_not: list[models.Condition] = (
            [models.HasIdCondition(has_id=[*map(int, exclude_ids)])] if exclude_ids else []
        )
        response = self._client.query_points(
            self.collection,
            query=[float(x) for x in vector],
            query_filter=models.Filter(must=must or None, must_not=must_not or None),
            limit=limit,
        )
        return [(int(p.id), float(p.score)) for p in response.points]

    def count(self) -> int:
        return int(self._client.count(self.collection, exact=True).count)

    def ids(self) -> set[int]:
        found: set[int] = set()
        offset = None
        while True:
            records, offset = self._client.scroll(
                self.collection, limit=1000, offset=offset, with_payload=False
            )
            found.update(int(r.id) for r in records)
            if offset is None:
                return found

    def reset(self, dimension: int) -> None:
        self._client.delete_collection(self.collection)
        self.dimension = dimension
        self._ensure_collection()

    def optimize(self) -> None:
        """The server optimizes on its own schedule."""

    def compact(self) -> bool:
        """The server vacuums on its own schedule."""
        return False

    def flush(self) -> None:
        """The server flushes on its own schedule."""

    def close(self) -> None:
        self._client.close()


def _int_id(point_id: object) -> int:
    assert isinstance(point_id, int)  # nexusai only ever writes integer ids
    return point_id


def _scope(scope: int | Sequence[int]) -> int | list[int]:
    return int(scope) if isinstance(scope, int) else [int(s) for s in scope]


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
    path.rename(aside)
    reason = str(why).strip().splitlines()[0][:200] if str(why).strip() else type(why).__name__
    return f"the vector index in {path} could not be read ({reason}); set aside as {aside.name}"


def open_vector_index(config: Config, collection: str, dimension: int) -> VectorIndex:
    """Remote Qdrant when NEXUS_QDRANT_URL is set, else Qdrant Edge under the data dir."""
    if config.qdrant_url:
        from qdrant_client import QdrantClient

        client = QdrantClient(
            url=config.qdrant_url, api_key=config.qdrant_api_key, check_compatibility=False
        )
        try:
            return QdrantVectorIndex(client, collection, dimension)
        except Exception as exc:  # the client raises its transport's errors as they come
            client.close()
            reason = str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else ""
            raise ConfigError(
                f"cannot use the Qdrant server at {config.qdrant_url} (NEXUS_QDRANT_URL):"
                f" {type(exc).__name__} {reason}".rstrip()
            ) from None
    return EdgeVectorIndex(config.vectors_path / collection, dimension)
