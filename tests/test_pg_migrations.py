"""The PostgreSQL store's schema on a real PostgreSQL: migrations recorded by name and
applied once, however many replicas start together; the triggers and cascades behave as
SQLite's do."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import psycopg
from psycopg_pool import ConnectionPool

from nexusai.memory.postgres import fts as pg_fts
from nexusai.memory.postgres.migrations import MIGRATIONS, apply_migrations

NAMES = [name for name, _ in MIGRATIONS]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_applied_once_and_recorded(pg_pool: ConnectionPool) -> None:
    with pg_pool.connection() as conn:
        assert apply_migrations(conn) == NAMES
        assert apply_migrations(conn) == []
        recorded = [row[0] for row in conn.execute("SELECT name FROM _migrations ORDER BY 1")]
    assert recorded == NAMES


def test_replicas_starting_together_apply_each_migration_once(pg_pool: ConnectionPool) -> None:
    url = str(pg_pool.conninfo)
    results: list[list[str]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def replica() -> None:
        try:
            with psycopg.connect(url) as conn:
                start.wait()
                results.append(apply_migrations(conn))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=replica) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(results, key=len) == [[], [], [], NAMES]


def _episode(conn: psycopg.Connection[tuple[object, ...]], session: int, hours: int) -> int:
    at = T0 + timedelta(hours=hours)
    row = conn.execute(
        "INSERT INTO episodes (session_id, speaker, content, occurred_at, created_at)"
        " VALUES (%s, 'user', 'hello', %s, %s) RETURNING id",
        [session, at, at],
    ).fetchone()
    assert row is not None
    return int(str(row[0]))


def _one(conn: psycopg.Connection[tuple[object, ...]], sql: str, *params: object) -> object:
    row = conn.execute(sql.encode(), params).fetchone()
    assert row is not None
    return row[0]


def _id(conn: psycopg.Connection[tuple[object, ...]], sql: str, *params: object) -> int:
    return int(str(_one(conn, sql, *params)))


def test_mentions_keep_counts_and_dates_and_cascade(pg_pool: ConnectionPool) -> None:
    with pg_pool.connection() as conn:
        apply_migrations(conn)
        project = _id(
            conn, "INSERT INTO projects (name, created_at) VALUES ('p', now()) RETURNING id"
        )
        s1, s2 = (
            _id(
                conn,
                "INSERT INTO sessions (project_id, created_at) VALUES (%s, now()) RETURNING id",
                project,
            )
            for _ in range(2)
        )
        e1, e2, e3 = _episode(conn, s1, 5), _episode(conn, s1, 1), _episode(conn, s2, 9)
        entity = _id(
            conn,
            "INSERT INTO entities (scope, name, normalized, type, first_seen, last_seen,"
            " vector_state) VALUES ('p', 'Biscuit', 'biscuit', 'PERSON', %s, %s, 'indexed')"
            " RETURNING id",
            T0 + timedelta(hours=5),
            T0 + timedelta(hours=5),
        )
        mention = "INSERT INTO entity_mentions (entity_id, episode_id) VALUES (%s, %s)"
        state = (
            "SELECT mention_count, first_seen, last_seen, vector_state FROM entities WHERE id = %s"
        )
        conn.execute(mention, [entity, e1])
        conn.execute("UPDATE entities SET vector_state = 'indexed' WHERE id = %s", [entity])
        conn.execute(mention, [entity, e2])  # same session: the vector's payload holds
        assert conn.execute(state, [entity]).fetchone() == (
            2,
            T0 + timedelta(hours=1),
            T0 + timedelta(hours=5),
            "indexed",
        )
        conn.execute(mention, [entity, e3])  # a new session may see it: a new vector
        assert conn.execute(state, [entity]).fetchone() == (
            3,
            T0 + timedelta(hours=1),
            T0 + timedelta(hours=9),
            "pending",
        )
        keywords = f"SELECT count(*) FROM {pg_fts.TABLE}"
        assert _one(conn, keywords) == 3  # a trigger indexes every episode written
        conn.execute("DELETE FROM sessions WHERE id = %s", [s2])  # its episodes, mentions, keywords
        assert conn.execute(state, [entity]).fetchone() == (
            2,
            T0 + timedelta(hours=1),
            T0 + timedelta(hours=5),
            "pending",
        )
        assert _one(conn, keywords) == 2
        conn.execute("DELETE FROM episodes WHERE id = ANY(%s)", [[e1, e2]])
        assert _one(conn, keywords) == 0
        assert _one(conn, "SELECT count(*) FROM entities") == 0  # the last mention took it
        again = _episode(conn, s1, 2)
        assert again > e3  # ids are never reused
