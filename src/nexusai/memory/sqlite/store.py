"""The SQLite store: one file in WAL mode. Readers run in parallel on their own
thread-local connections, and writers take one in-process lock plus `BEGIN IMMEDIATE`, so
concurrent requests queue for the write instead of failing with "database is locked"."""

from __future__ import annotations

import os
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from nexusai.errors import DISK_FULL, StorageFull
from nexusai.files import private_dir, private_file
from nexusai.memory.repositories.columns import SCORE_AT, Where, episode_from_row
from nexusai.memory.repositories.dialect import SQLITE
from nexusai.memory.repositories.keywords import Keywords
from nexusai.memory.repositories.validation import Limits
from nexusai.memory.sqlite import fts
from nexusai.memory.sqlite.bm25 import WholeTableBM25
from nexusai.memory.sqlite.migrations import apply_migrations
from nexusai.memory.store import EpisodeStore, StoreDamaged, disk_full
from nexusai.models import Episode


class SqliteStore(EpisodeStore):
    """The SQLite store."""

    dialect = SQLITE

    def __init__(
        self,
        path: str | Path,
        *,
        max_content_bytes: int = 1024 * 1024,
        max_metadata_bytes: int = 64 * 1024,
        busy_timeout: float = 30.0,
    ) -> None:
        self.path = Path(path)
        private_dir(self.path.parent)
        private_file(self.path)
        self._open_repositories(Limits(max_content_bytes, max_metadata_bytes))
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        # Each thread's connection, by thread: a pool thread that ends (AnyIO retires idle
        # workers after 10 s) leaves its connection here, closed when the next one opens.
        self._connections: dict[threading.Thread, sqlite3.Connection] = {}
        self._connections_lock = threading.Lock()
        self._write_lock = threading.RLock()
        # The keyword copy is kept beside the file between starts (derived: never backed up).
        self._bm25 = WholeTableBM25(self.connection, saved=self.keyword_copy_path)
        self.keywords: SqliteKeywords = SqliteKeywords(self)
        # Called with every SQL statement any connection runs, when set before it opens.
        self.trace: Callable[[str], None] | None = None
        try:
            self._check_whole()
            self.migrations_applied = self._migrate()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise StoreDamaged(self.path, str(exc)) from None

    @property
    def keyword_copy_path(self) -> Path:
        return self.path.with_name(self.path.name + ".keywords.npz")

    def _check_whole(self) -> None:
        """SQLite's quick check before anything is served or written: a damaged file is
        refused, never served from (or migrated, which could spread the damage)."""
        problems = [row[0] for row in self.connection().execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise StoreDamaged(self.path, "; ".join(problems))

    def _migrate(self) -> list[str]:
        """Applies what migrations are new. Foreign keys are off meanwhile, since a migration
        may rebuild a table others reference (SQLite would cascade the old table's drop), and
        checked before the migrations commit."""
        conn = self.connection()
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=OFF")
        try:
            with self.atomic():
                applied = apply_migrations(conn)
                broken = conn.execute("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"a migration broke {len(broken)} foreign keys")
        finally:
            conn.execute("PRAGMA foreign_keys=ON")
        return applied

    # -- connections and transactions ------------------------------------------------

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (SQLite connections must not be shared mid-statement)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_timeout,
            )
            conn.row_factory = sqlite3.Row
            if self.trace:
                conn.set_trace_callback(self.trace)
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
            with self._connections_lock:
                self._close_orphans()
                self._connections[threading.current_thread()] = conn
        return conn

    @contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; nested calls join the outer one."""
        with self._write_lock:
            conn = self.connection()
            if conn.in_transaction:
                yield conn
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:  # SQLite may have rolled back already (disk full)
                    conn.execute("ROLLBACK")
                if disk_full(exc):
                    raise StorageFull(DISK_FULL) from exc
                raise

    def _close_orphans(self) -> None:
        """Closes the connections of threads that have ended (none can be using them)."""
        for thread in [t for t in self._connections if not t.is_alive()]:
            self._connections.pop(thread).close()

    def open_connections(self) -> int:
        with self._connections_lock:
            return len(self._connections)

    def warm(self, keep_on: Callable[[], bool]) -> None:
        self._bm25.warm(keep_on)

    def close(self) -> None:
        self._bm25.close()
        with self._connections_lock:
            for conn in self._connections.values():
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    def describe(self) -> str:
        return str(self.path)

    def secret(self, name: str) -> bytes:
        return _read_or_make(self.path.parent / name)

    @contextmanager
    def claim_pending_vectors(
        self, limit: int, sessions: Sequence[int] | None = None, ids: Sequence[int] | None = None
    ) -> Iterator[list[int]]:
        # One process indexes a SQLite store: there is no one to claim from.
        yield self.derived.pending_vectors(limit, sessions=sessions, ids=ids)


class SqliteKeywords(Keywords):
    """FTS5, with the whole table's copy (`bm25`) for searches over every session."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def _search(
        self,
        query: str,
        limit: int,
        session_ids: Sequence[int] | None,
        budget: int,
        where: Where | None,
    ) -> list[Episode]:
        episodes = self._store.episodes
        kept = None if where is None else lambda: episodes.kept_ids(None, where)
        store = self._store
        rows = fts.search(
            store.connection, query, limit, session_ids, budget, store._bm25, where, kept
        )
        return [episode_from_row(row, row[SCORE_AT]) for row in rows]

    def ok(self) -> bool:
        return fts.integrity_check(self._store.connection())

    def rebuild(self) -> None:
        with self._store.atomic() as conn:
            fts.rebuild_index(conn)

    def own_text_matches(self, query: str, ids: Sequence[int]) -> set[int]:
        return fts.own_text_matches(self._store.connection(), query, ids)


def _read_or_make(path: Path) -> bytes:
    """A secret file: made once, written where only this user can read it."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    key = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return path.read_bytes()
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    return key


def readable_store(path: Path) -> bool:
    """Whether the file at `path` is a whole SQLite store (a backup to restore), read
    without writing to it."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            ok = conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            conn.execute("SELECT count(*) FROM episodes").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False
    return bool(ok)
