"""Vector indexes: one protocol, three engines (embedded Qdrant Edge, remote Qdrant, and
pgvector beside a PostgreSQL store), a module each; this one chooses.

Vectors are derived data: SQLite holds the truth, and every vector can be rebuilt from it.
Each point's id is the row id it was made from (for a long episode's later windows, an id
derived from it: see `chunks`); its payload carries the `session_id` (one id, or for an
entity the list of sessions it is visible to) that searches filter on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nexusai.config import Config
from nexusai.errors import ConfigError
from nexusai.memory.vectors.base import VectorIndex, VectorPoint
from nexusai.memory.vectors.edge import EdgeVectorIndex
from nexusai.memory.vectors.owner import OwnerLock, VectorIndexBusy

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

__all__ = [
    "EdgeVectorIndex",
    "OwnerLock",
    "VectorIndex",
    "VectorIndexBusy",
    "VectorPoint",
    "claim_embedded_indexes",
    "open_vector_index",
    "uses_embedded_index",
]


def uses_embedded_index(config: Config) -> bool:
    """Qdrant Edge unless a Qdrant server or a PostgreSQL store (pgvector) is configured."""
    return not (config.qdrant_url or config.database_url)


def claim_embedded_indexes(config: Config, collections: Sequence[str]) -> dict[str, OwnerLock]:
    """Each embedded index's lock, claimed (none for the other engines); raises
    VectorIndexBusy, with every lock it took released, when one is held elsewhere."""
    if not uses_embedded_index(config):
        return {}
    claimed: dict[str, OwnerLock] = {}
    try:
        for name in collections:
            claimed[name] = OwnerLock(config.vectors_path / name)
            claimed[name].claim()
    except VectorIndexBusy:
        for lock in claimed.values():
            lock.release()
        raise
    return claimed


def open_vector_index(
    config: Config,
    collection: str,
    dimension: int,
    pool: ConnectionPool | None = None,
    owner: OwnerLock | None = None,
) -> VectorIndex:
    """A Qdrant server when NEXUS_QDRANT_URL is set; else pgvector in the PostgreSQL store's
    `pool`, when there is one (Qdrant Edge belongs to one process, and replicas share the
    database); else Qdrant Edge under the data dir."""
    if pool is not None and not config.qdrant_url:
        from nexusai.memory.vectors.pgvector import PgVectorIndex

        return PgVectorIndex(pool, collection, dimension)
    if config.qdrant_url:
        try:
            from qdrant_client import QdrantClient
        except ImportError:  # the optional extra `qdrant`
            raise ConfigError(
                "NEXUS_QDRANT_URL needs the Qdrant client: pip install 'nexusai[qdrant]'"
            ) from None

        client = QdrantClient(
            url=config.qdrant_url, api_key=config.qdrant_api_key, check_compatibility=False
        )
        try:
            from nexusai.memory.vectors.qdrant import QdrantVectorIndex

            return QdrantVectorIndex(client, collection, dimension)
        except Exception as exc:  # the client raises its transport's errors as they come
            client.close()
            reason = str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else ""
            raise ConfigError(
                f"cannot use the Qdrant server at {config.qdrant_url} (NEXUS_QDRANT_URL):"
                f" {type(exc).__name__} {reason}".rstrip()
            ) from None
    return EdgeVectorIndex(
        config.vectors_path / collection, dimension, owner, layout=config.vector_memory
    )
