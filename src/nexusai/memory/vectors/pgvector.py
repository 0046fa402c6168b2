"""Vectors in PostgreSQL with pgvector: the `VectorIndex` for a deployment that is one
PostgreSQL and several replicas, since Qdrant Edge belongs to one process.

One table per collection: the point id, the sessions it is visible to (an array, so an
entity seen in several sessions is one row) and the vector, with an HNSW index over cosine
distance that PostgreSQL keeps current on every write. Searches filter by session inside
the query. A scope of few points is searched exactly, through the GIN index on sessions;
a larger one walks HNSW with pgvector's iterative index scan, which keeps the filter from
starving the result (without it HNSW returns its `ef_search` nearest and the filter may
drop them all).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import cast

from psycopg import Connection, sql
from psycopg_pool import ConnectionPool

from nexusai.memory.vectors.base import VectorPoint
from nexusai.models import finds_nothing

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")
# How many candidates HNSW walks per query, and how far an iterative scan may go on when
# the session filter drops them: enough that a scope of a few sessions still fills `limit`.
EF_SEARCH = 100
MAX_SCAN_TUPLES = 50_000
# A scope of up to this many points is searched exactly, over the session index: a few
# sessions among many are a filter so selective that HNSW walks tens of thousands of nodes
# to find them (measured at 10,000 points, 5 sessions of 10: 42 ms, against about 1 ms).
EXACT_MAX = 20_000


class PgVectorIndex:
    """pgvector through a psycopg connection pool (shared with the episode store, or its
    own)."""

    def __init__(
        self, pool: ConnectionPool, collection: str, dimension: int, exact_max: int = EXACT_MAX
    ) -> None:
        if not _NAME.match(collection):
            raise ValueError(f"collection name {collection!r}: lower-case letters, digits, _")
        self._pool = pool
        self.table = f"vectors_{collection}"
        self.dimension = dimension
        self.exact_max = exact_max  # scopes of up to this many points are searched exactly
        self.damaged: str | None = None  # why a table found with another shape was set aside
        with self._pool.connection() as conn:
            # Replicas starting at once: one creates, the others wait and find it made.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [self.table])
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            found = _dimension(conn, self.table)
            if found is not None and found != dimension:
                self.damaged = self._set_aside(conn, found)
            self._create(conn)

    def _create(self, conn: Connection[tuple[object, ...]]) -> None:
        table = sql.Identifier(self.table)
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (id bigint PRIMARY KEY,"
                " sessions bigint[] NOT NULL, embedding vector({}) NOT NULL)"
            ).format(table, sql.Literal(self.dimension))
        )
        conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding vector_cosine_ops)"
            ).format(sql.Identifier(f"{self.table}_hnsw"), table)
        )
        conn.execute(
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (sessions)").format(
                sql.Identifier(f"{self.table}_sessions"), table
            )
        )

    def _set_aside(self, conn: Connection[tuple[object, ...]], found: int) -> str:
        """A table of another dimension (the embedder changed) is kept under another name,
        never dropped, and the episodes are re-embedded into a new one."""
        aside = f"{self.table}_set_aside_{time.strftime('%Y%m%d%H%M%S')}"
        conn.execute(
            sql.SQL("ALTER TABLE {} RENAME TO {}").format(
                sql.Identifier(self.table), sql.Identifier(aside)
            )
        )
        for suffix in ("hnsw", "sessions"):
            conn.execute(
                sql.SQL("ALTER INDEX IF EXISTS {} RENAME TO {}").format(
                    sql.Identifier(f"{self.table}_{suffix}"), sql.Identifier(f"{aside}_{suffix}")
                )
            )
        return (
            f"the vector table {self.table} holds {found}-dimensional vectors, the embedder"
            f" makes {self.dimension}; set aside as {aside}"
        )

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        rows = [(p.id, _sessions(p.scope), _literal(p.vector)) for p in points]
        with self._pool.connection() as conn, conn.cursor() as cursor:
            cursor.executemany(
                sql.SQL(
                    "INSERT INTO {} (id, sessions, embedding) VALUES (%s, %s::bigint[], %s::vector)"
                    " ON CONFLICT (id) DO UPDATE"
                    " SET sessions = EXCLUDED.sessions, embedding = EXCLUDED.embedding"
                ).format(sql.Identifier(self.table)),
                rows,
            )

    def delete(self, ids: Sequence[int]) -> None:
        if ids:
            with self._pool.connection() as conn:
                conn.execute(
                    sql.SQL("DELETE FROM {} WHERE id = ANY(%s::bigint[])").format(
                        sql.Identifier(self.table)
                    ),
                    [[int(i) for i in ids]],
                )

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
        where = [sql.SQL("NOT (id = ANY(%(exclude)s::bigint[]))")]
        if session_ids is not None:
            where.append(sql.SQL("sessions && %(sessions)s::bigint[]"))
        if only_ids is not None:
            where.append(sql.SQL("id = ANY(%(only)s::bigint[])"))
        query = sql.SQL(
            "SELECT id, 1 - (embedding <=> %(vector)s::vector) FROM {} WHERE {}"
            " ORDER BY embedding <=> %(vector)s::vector LIMIT %(limit)s"
        ).format(sql.Identifier(self.table), sql.SQL(" AND ").join(where))
        params = {
            "vector": _literal(vector),
            "exclude": [int(i) for i in exclude_ids],
            "sessions": [int(s) for s in session_ids or []],
            "only": [int(i) for i in only_ids or []],
            "limit": limit,
        }
        with self._pool.connection() as conn, conn.transaction():
            # SET LOCAL: these last for this transaction only, not for the pooled connection.
            if self._exact(conn, params, session_ids, only_ids):
                conn.execute("SET LOCAL enable_indexscan = off")  # exact, over the GIN bitmap
            else:
                conn.execute(
                    f"SET LOCAL hnsw.ef_search = {max(EF_SEARCH, limit)};"
                    " SET LOCAL hnsw.iterative_scan = strict_order;"
                    f" SET LOCAL hnsw.max_scan_tuples = {MAX_SCAN_TUPLES}"
                )
            rows = conn.execute(query, params).fetchall()
        return [(int(i), float(score)) for i, score in cast(list[tuple[int, float]], rows)]

    def _exact(
        self,
        conn: Connection[tuple[object, ...]],
        params: dict[str, object],
        session_ids: Sequence[int] | None,
        only_ids: Sequence[int] | None,
    ) -> bool:
        """Whether to search exactly: the ids given, or the scope, are few enough."""
        if only_ids is not None and len(only_ids) <= self.exact_max:
            return True
        return session_ids is not None and self._in_scope(conn, params) <= self.exact_max

    def _in_scope(self, conn: Connection[tuple[object, ...]], params: dict[str, object]) -> int:
        """How many points the scope holds, counted up to one past `exact_max`."""
        row = conn.execute(
            sql.SQL(
                "SELECT count(*) FROM (SELECT 1 FROM {} WHERE sessions && %(sessions)s::bigint[]"
                " LIMIT {}) AS s"
            ).format(sql.Identifier(self.table), sql.Literal(self.exact_max + 1)),
            params,
        ).fetchone()
        return cast(int, row[0]) if row else 0

    def count(self) -> int:
        with self._pool.connection() as conn:
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(self.table))
            ).fetchone()
        return cast(int, row[0]) if row else 0

    def ids(self) -> set[int]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                sql.SQL("SELECT id FROM {}").format(sql.Identifier(self.table))
            ).fetchall()
        return {cast(int, row[0]) for row in rows}

    def reset(self, dimension: int) -> None:
        with self._pool.connection() as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(self.table)))
            self.dimension = dimension
            self._create(conn)

    def optimize(self) -> None:
        """PostgreSQL keeps the HNSW index current on every write; nothing to build."""

    def flush(self) -> None:
        """Every write is committed when it returns."""

    # PostgreSQL keeps its HNSW index current with every write; autovacuum reclaims rows.
    optimizing = False

    def optimize_behind(self) -> bool:
        return False

    def close(self) -> None:
        """The pool belongs to whoever made it."""


def _dimension(conn: Connection[tuple[object, ...]], table: str) -> int | None:
    """The vector column's dimension of an existing table, None if there is no table."""
    row = conn.execute(
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s)"
        " AND attname = 'embedding'",
        [table],
    ).fetchone()
    return cast(int, row[0]) if row else None


def _sessions(scope: int | Sequence[int]) -> list[int]:
    return [int(scope)] if isinstance(scope, int) else [int(s) for s in scope]


def _literal(vector: Sequence[float]) -> str:
    """pgvector's text form; psycopg sends it as a parameter, never spliced into SQL."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"
