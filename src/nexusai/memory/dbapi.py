"""The little of DB-API that memory's SQL is written against, so that one body of SQL runs on
SQLite's `sqlite3` and on PostgreSQL's psycopg (through `postgres.store`'s adapter).

The SQL is SQLite's with `?` placeholders, kept to what both engines read the same way:
`RETURNING id` rather than `lastrowid`, `ON CONFLICT ... DO NOTHING` rather than
`INSERT OR IGNORE`. Rows are read by position or by column name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any: ...


def inserted_id(cursor: Cursor) -> int:
    """The id an `INSERT ... RETURNING id` made."""
    return int(cursor.fetchone()[0])


def joined_ids(cursor: Cursor) -> list[int]:
    """The ids a query read as one comma-separated text (the store's `ID_LIST`): one row
    handed back, where a row an id would take the GIL again at each."""
    joined = cursor.fetchone()[0]
    return [int(i) for i in joined.split(",")] if joined else []
