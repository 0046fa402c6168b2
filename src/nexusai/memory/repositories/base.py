"""What every repository stands on: the store's connections and transactions, and its
engine's dialect."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from nexusai.memory.dbapi import Connection
from nexusai.memory.repositories.dialect import Dialect


class Database(Protocol):
    """The store as its repositories see it."""

    dialect: Dialect

    def connection(self) -> Connection:
        """A connection to read with (this thread's transaction's, inside `atomic`)."""
        ...

    def atomic(self) -> AbstractContextManager[Connection]:
        """A write transaction; nested calls join the outer one."""
        ...


class Repository:
    """One aggregate's SQL over the store's connections, in its engine's dialect."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.dialect = db.dialect

    def sql(self, template: str) -> str:
        return self.dialect.sql(template)

    def _rows(self, template: str, params: Sequence[object] = ()) -> list[Any]:
        return self.db.connection().execute(self.sql(template), params).fetchall()

    def _one(self, template: str, params: Sequence[object] = ()) -> Any:
        return self.db.connection().execute(self.sql(template), params).fetchone()

    def _count(self, template: str, params: Sequence[object] = ()) -> int:
        return int(self._one(template, params)[0])


def ids_of(rows: Iterable[Any]) -> list[int]:
    """The first column of each row, as ids."""
    return [int(row[0]) for row in rows]
