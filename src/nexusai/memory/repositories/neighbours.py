"""Neighbour context: each turn is indexed with the end of the turn before it in its session
(`texts.compose_context_text`), so a turn inserted before, edited under or deleted from
under another changes what that one is indexed with, and it gets a new vector.

Deleting many at once (`refresh_after_deleting`) reads and writes in a handful of
statements whatever their number. Each row a statement hands back takes the GIL again,
and beside a thread busy in Python each such wait lasts up to a switch interval (5 ms): a
forget's chunk of 50 deleted a row at a time (each neighbour read and written anew) took
10 ms quiet and 2.1 s beside a busy thread, holding every write behind it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from nexusai.memory.dbapi import Connection, joined_ids
from nexusai.memory.repositories.derived import VectorState, set_vectors
from nexusai.memory.repositories.dialect import Dialect
from nexusai.memory.texts import compose_context_text

# The first turn after each of the listed ones in its session, among those not listed.
_NEXT_UNLISTED = (
    "SELECT {id_list} FROM episodes WHERE id IN ("
    " SELECT (SELECT n.id FROM episodes n WHERE n.session_id = d.session_id"
    "  AND (n.occurred_at > d.occurred_at OR (n.occurred_at = d.occurred_at AND n.id > d.id))"
    "  AND n.id NOT IN {ids} ORDER BY n.occurred_at, n.id LIMIT 1)"
    " FROM episodes d WHERE d.id IN {ids})"
)
# Each listed turn's indexed context and the turn now just before it (none for a first).
_WITH_PREVIOUS = (
    "SELECT {{rows}} FROM episodes n LEFT JOIN episodes p ON p.id = ("
    " SELECT q.id FROM episodes q WHERE q.session_id = n.session_id"
    "  AND (q.occurred_at < n.occurred_at OR (q.occurred_at = n.occurred_at AND q.id < n.id))"
    "  ORDER BY q.occurred_at DESC, q.id DESC LIMIT 1)"
    " WHERE n.id IN {ids}"
)
# Turns given new contexts a statement, two bound values each: well within either
# engine's limit on a statement's values.
UPDATED_AT_ONCE = 1000


def context_before(
    conn: Connection, dialect: Dialect, session_id: int, occurred_at: str, episode_id: int | None
) -> str:
    """The context text for a turn at this place in its session: the end of the turn just
    before it (by time, then id), or "" for a session's first turn."""
    if episode_id is None:
        sql = "SELECT speaker, content FROM episodes WHERE session_id = ? AND occurred_at <= ?"
        params: tuple[object, ...] = (session_id, occurred_at)
    else:
        sql = (
            "SELECT speaker, content FROM episodes WHERE session_id = ?"
            " AND (occurred_at < ? OR (occurred_at = ? AND id < ?))"
        )
        params = (session_id, occurred_at, occurred_at, episode_id)
    sql += " ORDER BY occurred_at DESC, id DESC LIMIT 1"
    row = conn.execute(dialect.sql(sql), params).fetchone()
    return compose_context_text(row[0], row[1]) if row else ""


def refresh_context_after(
    conn: Connection, dialect: Dialect, session_id: int, occurred_at: str, episode_id: int
) -> None:
    """The turn after this place in its session gets its new context and a new vector."""
    row = conn.execute(
        dialect.sql(
            "SELECT id, occurred_at, context_text FROM episodes WHERE session_id = ?"
            " AND (occurred_at > ? OR (occurred_at = ? AND id > ?))"
            " ORDER BY occurred_at, id LIMIT 1"
        ),
        (session_id, occurred_at, occurred_at, episode_id),
    ).fetchone()
    if row is None:
        return
    context = context_before(conn, dialect, session_id, row[1], row[0])
    if context != row[2]:
        sql = dialect.sql("UPDATE episodes SET context_text = ? WHERE id = ?")
        conn.execute(sql, (context, row[0]))
        set_vectors(conn, dialect, [row[0]], VectorState.PENDING)


def turns_after(conn: Connection, dialect: Dialect, listed: Sequence[int]) -> list[int]:
    """The turns just after the listed ones that are not listed themselves: whose context
    inserting the listed ones changed, or deleting them will change (read before)."""
    ids = dialect.id_param(listed)
    return joined_ids(conn.execute(dialect.sql(_NEXT_UNLISTED), (ids, ids)))


def refresh_after_deleting(conn: Connection, dialect: Dialect, turns: Sequence[int]) -> None:
    """`turns` (from `turns_after`, once the listed ones are deleted) get their new
    context and a new vector where it changed."""
    if not turns:
        return
    columns = "n.id, n.context_text, p.speaker, p.content"
    sql = dialect.sql(_WITH_PREVIOUS).format(rows=dialect.rows_as_json.format(columns))
    found = conn.execute(sql, (dialect.id_param(turns),)).fetchone()[0]
    changed: dict[int, str] = {}
    for turn, indexed, speaker, content in json.loads(found or "[]"):
        context = "" if speaker is None else compose_context_text(speaker, content)
        if context != indexed:
            changed[int(turn)] = context
    pairs = list(changed.items())
    for start in range(0, len(pairs), UPDATED_AT_ONCE):
        _set_contexts(conn, dialect, pairs[start : start + UPDATED_AT_ONCE])
    if changed:
        set_vectors(conn, dialect, list(changed), VectorState.PENDING)


def _set_contexts(conn: Connection, dialect: Dialect, pairs: Sequence[tuple[int, str]]) -> None:
    cases = " ".join("WHEN ? THEN ?" for _ in pairs)
    conn.execute(
        dialect.sql(f"UPDATE episodes SET context_text = CASE id {cases} END WHERE id IN {{ids}}"),
        (*(value for pair in pairs for value in pair), dialect.id_param(i for i, _ in pairs)),
    )
