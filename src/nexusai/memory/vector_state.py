"""Whether each episode's derived data has been made: its vectors (`vector_state`) and its
entities (`entity_state`). SQLite records both, so a crash or an outage between the write
and the derivation loses nothing: pending rows are found here and retried.

Every read and write of these two columns lives in this module; a write takes the
connection of the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import StrEnum

from nexusai.memory.dbapi import Connection, Cursor
from nexusai.models import Episode


class VectorState(StrEnum):
    PENDING = "pending"
    INDEXED = "indexed"


class EntityState(StrEnum):
    PENDING = "pending"
    DONE = "done"


def pending_vectors(
    conn: Connection,
    limit: int,
    claim: str = "",
    sessions: Sequence[int] | None = None,
    ids: Sequence[int] | None = None,
) -> list[int]:
    """Episodes whose vectors are not (yet) in the index, oldest first, of `sessions` and
    among `ids` (all when None); `claim` is a locking clause for engines that have one
    (`FOR UPDATE SKIP LOCKED`)."""
    where, params = "vector_state = ?", [VectorState.PENDING.value]
    for column, values in (("session_id", sessions), ("id", ids)):
        if values is not None:
            where += f" AND {column} IN (SELECT value FROM json_each(?))"
            params.append(json.dumps([int(v) for v in values]))
    sql = f"SELECT id FROM episodes WHERE {where} ORDER BY id LIMIT ? {claim}"
    return _ids(conn.execute(sql, (*params, limit)))


def count_pending_vectors(conn: Connection) -> int:
    sql = "SELECT count(*) FROM episodes WHERE vector_state = ?"
    return int(conn.execute(sql, (VectorState.PENDING.value,)).fetchone()[0])


def count_indexed_vectors(conn: Connection) -> int:
    sql = "SELECT count(*) FROM episodes WHERE vector_state = ?"
    return int(conn.execute(sql, (VectorState.INDEXED.value,)).fetchone()[0])


def indexed_episodes(conn: Connection) -> set[int]:
    sql = "SELECT id FROM episodes WHERE vector_state = ?"
    return set(_ids(conn.execute(sql, (VectorState.INDEXED.value,))))


def vector_states(conn: Connection, ids: Sequence[int]) -> dict[int, VectorState]:
    rows = conn.execute(
        "SELECT id, vector_state FROM episodes WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps([int(i) for i in ids]),),
    )
    return {int(row[0]): VectorState(row[1]) for row in rows}


def set_vectors(conn: Connection, ids: Sequence[int], state: VectorState) -> None:
    conn.execute(
        "UPDATE episodes SET vector_state = ? WHERE id IN (SELECT value FROM json_each(?))",
        (state.value, json.dumps([int(i) for i in ids])),
    )


def mark_indexed(conn: Connection, episodes: Sequence[Episode]) -> None:
    """The episodes' vectors are in the index, unless their text changed since it was read
    (then the change left them pending, and the vector just made is replaced next time)."""
    conn.executemany(
        "UPDATE episodes SET vector_state = ? WHERE id = ? AND search_text = ?"
        " AND context_text = ?",
        [(VectorState.INDEXED.value, e.id, e.search_text, e.context_text) for e in episodes],
    )


def mark_all_vectors_pending(conn: Connection) -> None:
    conn.execute("UPDATE episodes SET vector_state = ?", (VectorState.PENDING.value,))


def pending_extraction(conn: Connection, limit: int) -> list[int]:
    """Episodes not yet through entity extraction, oldest first."""
    sql = "SELECT id FROM episodes WHERE entity_state = ? ORDER BY id LIMIT ?"
    return _ids(conn.execute(sql, (EntityState.PENDING.value, limit)))


def count_pending_extraction(conn: Connection) -> int:
    sql = "SELECT count(*) FROM episodes WHERE entity_state = ?"
    return int(conn.execute(sql, (EntityState.PENDING.value,)).fetchone()[0])


def set_extracted(conn: Connection, episode_id: int) -> None:
    sql = "UPDATE episodes SET entity_state = ? WHERE id = ?"
    conn.execute(sql, (EntityState.DONE.value, episode_id))


def _ids(rows: Cursor) -> list[int]:
    return [int(row[0]) for row in rows]
