"""The PostgreSQL store (issue #18): the same `EpisodeStore`, on a database several memory
replicas share.

- **Connections.** A psycopg pool. A read outside a transaction borrows a connection for
  one statement; `atomic` holds one for the transaction, and every read the same thread
  makes inside it goes through that connection, so it sees its own uncommitted writes.
- **Writes are serialized**, as SQLite's are, by a transaction-scoped advisory lock: the
  neighbour-context bookkeeping (a turn is indexed with the end of the one before it) reads
  then writes, and must not interleave with another replica's insert into the same session.
- **Vectors waiting to be made** are claimed with `FOR UPDATE SKIP LOCKED`: two replicas
  repairing at once take different episodes, and an edit waits for the claim to end, so
  no vector is made from text that changed under it.
- **The SQL** is the repositories', rendered by the `POSTGRES` dialect; keyword search
  is PostgreSQL's own (`postgres.fts`).
- **Values** come back as SQLite's do: times as the store's UTC text, metadata as JSON text.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.adapt import Buffer
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.datetime import TimestamptzLoader
from psycopg.types.string import TextLoader
from psycopg_pool import ConnectionPool, PoolTimeout

from nexusai.errors import DISK_FULL, ConfigError, NexusError, StorageFull, first_line
from nexusai.memory.dbapi import Connection
from nexusai.memory.postgres import fts as pg_fts
from nexusai.memory.postgres.migrations import apply_migrations
from nexusai.memory.repositories.columns import Where
from nexusai.memory.repositories.dialect import POSTGRES
from nexusai.memory.repositories.keywords import Keywords
from nexusai.memory.repositories.validation import Limits
from nexusai.memory.store import EpisodeStore
from nexusai.models import Episode, to_utc_text

PgConnection = psycopg.Connection[Any]
WRITE_LOCK = "hashtext('nexus_writes')"
# Seconds a request waits for a connection before its 503: a database that is down makes
# every request wait this long, a busy pool rarely anywhere near it.
POOL_WAIT = 5.0
SECRET_PREFIX = "secret:"  # a store's secrets are rows of `meta`, every replica reads them


class DatabaseUnavailable(NexusError):
    """PostgreSQL does not answer: nothing of the request was kept."""

    status_code = 503


class PgStore(EpisodeStore):
    """The PostgreSQL store, over a pool it owns (the pgvector index may share it)."""

    dialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        max_content_bytes: int = 1024 * 1024,
        max_metadata_bytes: int = 64 * 1024,
        pool_size: int = 16,
        connect_timeout: int = 10,
    ) -> None:
        self.url = url
        self._open_repositories(Limits(max_content_bytes, max_metadata_bytes))
        self.keywords: PgKeywords = PgKeywords(self)
        try:  # one connection first: a bad URL is one clear line, not the pool's retries
            with psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout) as conn:
                self.migrations_applied = apply_migrations(conn)
        except psycopg.Error as exc:
            raise ConfigError(
                f"cannot use the PostgreSQL store at {redacted(url)}"
                f" (NEXUS_DATABASE_URL): {first_line(exc, 300)}"
            ) from None
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=_configure,
            timeout=POOL_WAIT,
            open=False,
        )
        self._local = threading.local()
        self.pool.open()

    def describe(self) -> str:
        return redacted(self.url)

    # -- connections and transactions ------------------------------------------------

    def connection(self) -> Connection:
        current = self._current()
        return current if current is not None else _Reads(self)

    def _current(self) -> _Connection | None:
        """This thread's transaction, if it is in one."""
        current: _Connection | None = getattr(self._local, "transaction", None)
        return current

    @contextmanager
    def raw(self) -> Iterator[PgConnection]:
        """A psycopg connection, for `postgres.fts` and pgvector: this thread's
        transaction's, or a borrowed one."""
        current = self._current()
        if current is not None:
            yield current.raw
            return
        try:
            with self.pool.connection() as raw:
                yield raw
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise self.unavailable(exc) from None

    @contextmanager
    def atomic(self) -> Iterator[_Connection]:
        with self._transaction(lock=True) as conn:
            yield conn

    @contextmanager
    def _transaction(self, *, lock: bool) -> Iterator[_Connection]:
        current = self._current()
        if current is not None:
            yield current
            return
        # A connection the server closed (a restart, a failover) fails at BEGIN, before any
        # of the caller's statements ran: the pool drops it and the transaction is begun
        # once more, as a read is tried once more. Once begun, a failure is the request's.
        for last in (False, True):
            begun = False
            try:
                with self.pool.connection() as raw, raw.transaction():
                    if lock:
                        raw.execute(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")
                    begun = True
                    self._local.transaction = _Connection(raw)
                    try:
                        yield self._local.transaction
                    finally:
                        self._local.transaction = None
                return
            except pg_errors.DiskFull as exc:
                raise StorageFull(DISK_FULL) from exc
            except (psycopg.OperationalError, PoolTimeout) as exc:
                if begun or last or isinstance(exc, PoolTimeout):
                    raise self.unavailable(exc) from None
                self.pool.check()

    def unavailable(self, exc: Exception) -> DatabaseUnavailable:
        """The error for a request the database did not answer. Connections it broke are
        dropped from the pool, so that the next request gets live ones."""
        self.pool.check()
        return DatabaseUnavailable(
            f"the PostgreSQL store at {self.describe()} does not answer ({first_line(exc, 300)});"
            " nothing of this request was kept, send it again"
        )

    def open_connections(self) -> int:
        return int(self.pool.get_stats().get("pool_size", 0))

    def warm(self, keep_on: Callable[[], bool]) -> None:
        """Nothing to read ahead: PostgreSQL's keyword search keeps no copy of its own."""

    def close(self) -> None:
        self.pool.close()

    # -- what differs from SQLite ----------------------------------------------------

    def secret(self, name: str) -> bytes:
        return bytes.fromhex(self.meta.add(SECRET_PREFIX + name, secrets.token_hex(32)))

    def adopt_secret(self, name: str, value: bytes) -> None:
        """Takes another store's secret as this one's (a store moved here keeps its keys)."""
        self.meta.set(SECRET_PREFIX + name, value.hex())

    @contextmanager
    def claim_pending_vectors(
        self, limit: int, sessions: Sequence[int] | None = None, ids: Sequence[int] | None = None
    ) -> Iterator[list[int]]:
        # Not under the write lock: the claim lasts as long as the embedding does, and only
        # edits of the claimed rows wait for it.
        with self._transaction(lock=False):
            yield self.derived.pending_vectors(limit, sessions, ids)


class PgKeywords(Keywords):
    """PostgreSQL's own keyword index (`postgres.fts`)."""

    def __init__(self, store: PgStore) -> None:
        self._store = store

    def _search(
        self,
        query: str,
        limit: int,
        session_ids: Sequence[int] | None,
        budget: int,
        where: Where | None,
    ) -> list[Episode]:
        found = pg_fts.scored_search(
            self._store.raw, query, limit, session_ids, budget=budget, where=where
        )
        hits = dict(found)
        return self._store.episodes.get_many(list(hits), hits) if hits else []

    def ok(self) -> bool:
        with self._store.raw() as raw:
            return pg_fts.agrees(raw)

    def rebuild(self) -> None:
        with self._store.atomic() as conn:
            pg_fts.rebuild(conn.raw)

    def own_text_matches(self, query: str, ids: Sequence[int]) -> set[int]:
        with self._store.raw() as raw:
            return pg_fts.own_text_matches(raw, query, ids)


class _Row:
    """A row read by position or by column name, as `sqlite3.Row` is."""

    __slots__ = ("_names", "_values")

    def __init__(self, names: dict[str, int], values: Sequence[Any]) -> None:
        self._names = names
        self._values = values

    def __getitem__(self, key: int | str) -> Any:
        return self._values[self._names[key] if isinstance(key, str) else key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[str]:
        return list(self._names)


def _rows(cursor: psycopg.Cursor[Any]) -> Any:
    names = {column.name: i for i, column in enumerate(cursor.description or [])}
    return lambda values: _Row(names, values)


class _TimeText(TimestamptzLoader):
    """A `timestamptz` as the store's UTC text, the form SQLite stores and compares."""

    def load(self, data: Buffer) -> str:  # type: ignore[override]
        moment = super().load(data)
        assert isinstance(moment, datetime)
        return to_utc_text(moment)


def _configure(conn: PgConnection) -> None:
    conn.row_factory = _rows
    conn.adapters.register_loader("timestamptz", _TimeText)
    conn.adapters.register_loader("jsonb", TextLoader)


class _Connection:
    """A pooled connection held for a transaction."""

    def __init__(self, raw: PgConnection) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> psycopg.Cursor[Any]:
        return self.raw.execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> None:
        with self.raw.cursor() as cursor:
            cursor.executemany(sql, parameters)


class _Reads:
    """One statement on a borrowed connection, its rows read before it goes back. A read
    that meets a connection the server closed (a restart, a failover) is tried once more,
    after the pool has dropped its dead connections."""

    def __init__(self, store: PgStore) -> None:
        self._store = store

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> _Fetched:
        try:
            return self._once(sql, parameters)
        except PoolTimeout as exc:  # every connection busy for POOL_WAIT: no use waiting more
            raise self._store.unavailable(exc) from None
        except psycopg.OperationalError as exc:
            self._store.unavailable(exc)  # drops the dead connections: one more try
        try:
            return self._once(sql, parameters)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise self._store.unavailable(exc) from None

    def _once(self, sql: str, parameters: Sequence[Any]) -> _Fetched:
        with self._store.pool.connection() as raw:
            cursor = raw.execute(sql, parameters)
            return _Fetched(cursor.fetchall() if cursor.description else [], cursor.rowcount)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> None:
        with self._store.atomic() as conn:  # a write: in a transaction, never retried
            conn.executemany(sql, parameters)


class _Fetched:
    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return self._rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


def redacted(url: str) -> str:
    """A database URL without its password, for messages."""
    parts = conninfo_to_dict(url)
    where = f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}"
    return f"postgresql://{parts.get('user', '')}@{where}/{parts.get('dbname', '')}"
