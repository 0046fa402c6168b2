"""When episodes stop being returned: their own expiry and their project's retention,
read and set in the caller's transaction."""

from __future__ import annotations

from nexusai.memory.dbapi import Connection
from nexusai.memory.repositories.columns import live
from nexusai.memory.repositories.dialect import Dialect
from nexusai.memory.repositories.validation import deadline
from nexusai.models import now_text


def retention(conn: Connection, dialect: Dialect, session_id: int) -> int | None:
    """The days the session's project keeps its episodes (None: no retention)."""
    found = conn.execute(
        dialect.sql(
            "SELECT p.retention_days FROM sessions s JOIN projects p ON p.id = s.project_id"
            " WHERE s.id = ?"
        ),
        (session_id,),
    ).fetchone()
    return None if found is None or found[0] is None else int(found[0])


def renew_deadlines(conn: Connection, dialect: Dialect, where: str, params: list[object]) -> None:
    """Each chosen episode's deadline (`e` in `where`) from its own expiry, its time and
    its project's retention: after either changes. An episode already past its deadline
    stays gone, whether or not the upkeep has deleted it yet: lifting a retention brings
    back nothing it hid."""
    rows = conn.execute(
        dialect.sql(
            "SELECT e.id, e.occurred_at, e.expiry_asked, p.retention_days FROM episodes e"
            " JOIN sessions s ON s.id = e.session_id LEFT JOIN projects p ON p.id = s.project_id"
            f" WHERE ({where}) AND {live('e')}"
        ),
        [*params, now_text()],
    ).fetchall()
    changed = [(deadline(asked, when, days), episode_id) for episode_id, when, asked, days in rows]
    conn.executemany(dialect.sql("UPDATE episodes SET expires_at = ? WHERE id = ?"), changed)
