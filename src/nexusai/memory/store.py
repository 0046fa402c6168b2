"""The episode store: projects, sessions and episodes, the source of truth.

`EpisodeStore` keeps the connections, the transactions and one repository per aggregate
(`repositories`), each written once over its engine's `Dialect`. The engines are
`sqlite.store.SqliteStore`, the embedded default, and `postgres.store.PgStore`, for several
replicas on one database; each gives its connections, its dialect, its keyword index
(`repositories.keywords.Keywords`) and its secrets.
"""

from __future__ import annotations

import errno
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Self

from nexusai.errors import ConfigError
from nexusai.memory.dbapi import Connection
from nexusai.memory.repositories.api_keys import ApiKeys
from nexusai.memory.repositories.derived import DerivedState
from nexusai.memory.repositories.dialect import Dialect
from nexusai.memory.repositories.entities import Entities
from nexusai.memory.repositories.episodes import Episodes
from nexusai.memory.repositories.imports import Imports
from nexusai.memory.repositories.keywords import Keywords
from nexusai.memory.repositories.meta import Meta
from nexusai.memory.repositories.projects import Projects
from nexusai.memory.repositories.sessions import Sessions
from nexusai.memory.repositories.validation import Limits


class StoreDamaged(ConfigError):
    """The SQLite file fails SQLite's own check: the store is not opened."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(
            f"the store at {path} is damaged ({reason[:200]}) and was not opened: restore a"
            " backup with `nexus restore BACKUP --data-dir EMPTY_DIR` and point NEXUS_DATA_DIR"
            " there, or move the file aside to start with an empty store"
        )


class EpisodeStore(ABC):
    """One store, two engines: each gives connections and transactions, its dialect, its
    keyword index and its secrets; the repositories over them are written once."""

    dialect: Dialect
    keywords: Keywords
    # A connection pool the vector index may share (PostgreSQL's, for pgvector).
    pool: Any = None
    migrations_applied: list[str]

    def _open_repositories(self, limits: Limits) -> None:
        """The repositories over this store: an engine calls this once it can connect."""
        self.limits = limits
        self.meta = Meta(self)
        self.projects = Projects(self)
        self.sessions = Sessions(self, self.projects)
        self.episodes = Episodes(self, self.sessions, limits)
        self.imports = Imports(self, self.episodes)
        self.derived = DerivedState(self)
        self.entities = Entities(self)
        self.api_keys = ApiKeys(self)

    @abstractmethod
    def connection(self) -> Connection:
        """A connection to read with (this thread's transaction's, inside `atomic`); for
        the repositories."""

    @abstractmethod
    def atomic(self) -> AbstractContextManager[Connection]:
        """A write transaction; nested calls join the outer one. Writes are serialized."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def warm(self, keep_on: Callable[[], bool]) -> None:
        """Reads ahead what the first searches after a start would otherwise wait for,
        while `keep_on()` (in the caller's thread, at start)."""

    @abstractmethod
    def open_connections(self) -> int: ...

    @abstractmethod
    def describe(self) -> str:
        """Where the store is, for messages (never a password)."""

    @abstractmethod
    def secret(self, name: str) -> bytes:
        """32 random bytes made once per store and kept with it (every replica of a shared
        store gets the same ones)."""

    @abstractmethod
    def claim_pending_vectors(
        self, limit: int, sessions: Sequence[int] | None = None, ids: Sequence[int] | None = None
    ) -> AbstractContextManager[list[int]]:
        """Up to `limit` episodes waiting for a vector, oldest first, of `sessions` and
        among `ids` (all when None), which no one else indexes until the block ends (reads
        and writes inside it join its transaction)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def disk_full(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return "database or disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno == errno.ENOSPC
