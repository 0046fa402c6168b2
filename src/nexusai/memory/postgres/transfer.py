"""`nexus migrate --to postgresql://...`: a SQLite store copied into PostgreSQL (issue #18).

Table by table, in batches that each commit, ids kept (`OVERRIDING SYSTEM VALUE`, then the
identities moved past them). A batch already there is skipped (`ON CONFLICT DO NOTHING`),
so a copy stopped midway is resumed by running it again. The target's triggers build its
keyword index and recount entity mentions as rows arrive (entities arrive with no mentions
counted). Vectors are not copied: every episode and entity arrives `pending`, and its
vector is made again from the copied text with the configured embedder (the command does
it; a service started on the target would too). At the end, the rows of every table are
counted on both sides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from nexusai.errors import Conflict
from nexusai.memory.keys import SECRET_FILE
from nexusai.memory.postgres.store import SECRET_PREFIX, PgStore
from nexusai.memory.repositories.derived import VectorState
from nexusai.memory.sqlite.store import SqliteStore

BATCH = 1000
SOURCE_KEY = "migrated_from"


# Made again on the target: vectors by its embedder, mention counts by its trigger as the
# mentions arrive.
VECTOR_PENDING = (("vector_state", VectorState.PENDING.value),)


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]  # copied as they are
    key: tuple[str, ...] = ("id",)
    identity: bool = False
    booleans: tuple[str, ...] = ()  # SQLite keeps them as 0 and 1
    set_on_target: tuple[tuple[str, object], ...] = ()  # columns given these values


TABLES = (
    Table("projects", ("id", "name", "created_at", "retention_days"), identity=True),
    Table("sessions", ("id", "project_id", "title", "created_at"), identity=True),
    Table(
        "episodes",
        (
            "id",
            "session_id",
            "speaker",
            "content",
            "occurred_at",
            "created_at",
            "metadata",
            "image_caption",
            "entity_state",
            "search_text",
            "context_text",
            "search_cjk",
            "standing",
            "pinned",
            "expires_at",
            "expiry_asked",
        ),
        identity=True,
        booleans=("pinned",),
        set_on_target=VECTOR_PENDING,
    ),
    Table("import_sessions", ("key", "session_id"), key=("key",)),
    Table("import_episodes", ("key", "episode_id"), key=("key",)),
    Table(
        "entities",
        ("id", "scope", "name", "normalized", "type", "first_seen", "last_seen", "summary"),
        identity=True,
        set_on_target=(*VECTOR_PENDING, ("mention_count", 0)),
    ),
    Table("entity_mentions", ("entity_id", "episode_id", "type"), key=("entity_id", "episode_id")),
    Table("extraction_notes", ("episode_id", "outcome", "detail"), key=("episode_id",)),
    Table(
        "api_keys",
        ("id", "name", "project_id", "read_only", "hash", "created_at", "revoked_at"),
        identity=True,
        booleans=("read_only",),
    ),
    Table("meta", ("key", "value"), key=("key",)),
    Table("settings", ("key", "value"), key=("key",)),
)

Progress = Callable[[str, int], None]


def plan(source: SqliteStore) -> dict[str, int]:
    """Rows per table in the source: what a progress bar counts to."""
    return {t.name: _count(source, t.name) for t in TABLES}


def copy_store(source: SqliteStore, target: PgStore, progress: Progress | None = None) -> None:
    """Copies every table not yet copied; safe to run again after a stop."""
    _claim_target(source, target)
    for table in TABLES:
        for rows in _batches(source, table, _copied_up_to(target, table)):
            _insert(target, table, rows)
            if progress:
                progress(table.name, len(rows))
    with target.atomic() as conn:
        for table in TABLES:
            if table.identity:
                conn.execute(
                    target.dialect.sql(
                        f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'),"
                        f" greatest((SELECT max(id) FROM {table.name}), 1))"
                    )
                )


def compare_counts(source: SqliteStore, target: PgStore) -> list[tuple[str, int, int]]:
    """(table, rows in SQLite, rows in PostgreSQL) for every table copied."""
    return [(t.name, _count(source, t.name), _count(target, t.name, copied=True)) for t in TABLES]


def _claim_target(source: SqliteStore, target: PgStore) -> None:
    """The target is empty, or a copy of this same source stopped midway; its key for
    project API keys becomes the source's, so the keys made on SQLite keep working."""
    marker = target.meta.get(SOURCE_KEY)
    if marker is None and _count(target, "sessions") + _count(target, "projects") > 0:
        raise Conflict(f"{target.describe()} holds a store already; migrate into an empty database")
    if marker is not None and marker != source.describe():
        raise Conflict(f"{target.describe()} is a copy of {marker}, not of {source.describe()}")
    target.adopt_secret(SECRET_FILE, source.secret(SECRET_FILE))
    target.meta.set(SOURCE_KEY, source.describe())


def _copied_up_to(target: PgStore, table: Table) -> Sequence[Any] | None:
    """Where a stopped copy of an id table got to: it resumes after its last batch."""
    if not table.identity:
        return None  # small tables: read again, what is there is skipped
    sql = target.dialect.sql(f"SELECT max(id) FROM {table.name}")
    row = target.connection().execute(sql).fetchone()
    return None if row[0] is None else [row[0]]


def _batches(source: SqliteStore, table: Table, after: Sequence[Any] | None) -> Iterator[list[Any]]:
    """The table's rows in key order, a batch at a time (keyset paging: no OFFSET)."""
    columns, key = ", ".join(table.columns), ", ".join(table.key)
    while True:
        where = f"WHERE ({key}) > ({', '.join('?' * len(table.key))})" if after else ""
        sql = f"SELECT {columns} FROM {table.name} {where} ORDER BY {key} LIMIT {BATCH}"
        rows = source.connection().execute(source.dialect.sql(sql), list(after or [])).fetchall()
        if not rows:
            return
        yield [tuple(row) for row in rows]
        after = [rows[-1][table.columns.index(k)] for k in table.key]


def _insert(target: PgStore, table: Table, rows: list[Any]) -> None:
    names, fixed = zip(*table.set_on_target, strict=True) if table.set_on_target else ((), ())
    columns = [*table.columns, *names]
    values = [(*_adapted(table, row), *fixed) for row in rows]
    overriding = "OVERRIDING SYSTEM VALUE" if table.identity else ""
    sql = (
        f"INSERT INTO {table.name} ({', '.join(columns)}) {overriding}"
        f" VALUES ({', '.join('?' * len(columns))}) ON CONFLICT DO NOTHING"
    )
    with target.atomic() as conn:
        conn.executemany(target.dialect.sql(sql), values)


def _adapted(table: Table, row: tuple[Any, ...]) -> tuple[Any, ...]:
    if not table.booleans:
        return row
    return tuple(
        bool(value) if name in table.booleans else value
        for name, value in zip(table.columns, row, strict=True)
    )


def _count(store: SqliteStore | PgStore, table: str, *, copied: bool = False) -> int:
    """Rows in a table; with `copied`, only those a copy brings (not the target's own
    bookkeeping in meta)."""
    where = ""
    if copied and table == "meta":
        where = f" WHERE key <> '{SOURCE_KEY}' AND key NOT LIKE '{SECRET_PREFIX}%'"
    sql = store.dialect.sql(f"SELECT count(*) FROM {table}{where}")
    return int(store.connection().execute(sql).fetchone()[0])
