"""Whether each episode's derived data has been made: its vectors (`vector_state`) and its
entities (`entity_state`). The store records both, so a crash or an outage between the
write and the derivation loses nothing: pending rows are found here and retried.

Every read and write of these two columns lives in this module. `DerivedState` reads and
writes them in the store's current transaction, if there is one; the functions take the
connection of a caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from nexusai.memory.dbapi import Connection
from nexusai.memory.repositories.base import Repository, ids_of
from nexusai.memory.repositories.dialect import Dialect
from nexusai.models import Episode


class VectorState(StrEnum):
    PENDING = "pending"
    INDEXED = "indexed"


class EntityState(StrEnum):
    PENDING = "pending"
    DONE = "done"


class DerivedState(Repository):
    """The episodes' vector and entity states."""

    def pending_vectors(
        self, limit: int, sessions: Sequence[int] | None = None, ids: Sequence[int] | None = None
    ) -> list[int]:
        """Episodes whose vectors are not (yet) in the index, oldest first, of `sessions`
        and among `ids` (all when None), claimed where the engine claims rows (inside
        the caller's transaction, until it ends)."""
        where, params = "vector_state = ?", [VectorState.PENDING.value]
        for column, values in (("session_id", sessions), ("id", ids)):
            if values is not None:
                where += f" AND {column} IN {{ids}}"
                params.append(self.dialect.id_param(values))
        sql = f"SELECT id FROM episodes WHERE {where} ORDER BY id LIMIT ? {{claim}}"
        return ids_of(self._rows(sql, (*params, limit)))

    def count_vectors(self, state: VectorState) -> int:
        sql = "SELECT count(*) FROM episodes WHERE vector_state = ?"
        return self._count(sql, (state.value,))

    def indexed(self) -> set[int]:
        sql = "SELECT id FROM episodes WHERE vector_state = ?"
        return set(ids_of(self._rows(sql, (VectorState.INDEXED.value,))))

    def vector_states(self, ids: Sequence[int]) -> dict[int, VectorState]:
        rows = self._rows(
            "SELECT id, vector_state FROM episodes WHERE id IN {ids}",
            (self.dialect.id_param(ids),),
        )
        return {int(row[0]): VectorState(row[1]) for row in rows}

    def set_vectors(self, ids: Sequence[int], state: VectorState) -> None:
        with self.db.atomic() as conn:
            set_vectors(conn, self.dialect, ids, state)

    def mark_indexed(self, episodes: Sequence[Episode]) -> None:
        """The episodes' vectors are in the index, unless their text changed since it was
        read (then the change left them pending, and the vector just made is replaced next
        time)."""
        with self.db.atomic() as conn:
            conn.executemany(
                self.sql(
                    "UPDATE episodes SET vector_state = ? WHERE id = ? AND search_text = ?"
                    " AND context_text = ?"
                ),
                [
                    (VectorState.INDEXED.value, e.id, e.search_text, e.context_text)
                    for e in episodes
                ],
            )

    def mark_all_vectors_pending(self) -> None:
        with self.db.atomic() as conn:
            sql = self.sql("UPDATE episodes SET vector_state = ?")
            conn.execute(sql, (VectorState.PENDING.value,))

    def pending_extraction(self, limit: int) -> list[int]:
        """Episodes not yet through entity extraction, oldest first."""
        sql = "SELECT id FROM episodes WHERE entity_state = ? ORDER BY id LIMIT ?"
        return ids_of(self._rows(sql, (EntityState.PENDING.value, limit)))

    def count_pending_extraction(self) -> int:
        sql = "SELECT count(*) FROM episodes WHERE entity_state = ?"
        return self._count(sql, (EntityState.PENDING.value,))


def set_vectors(conn: Connection, dialect: Dialect, ids: Sequence[int], state: VectorState) -> None:
    conn.execute(
        dialect.sql("UPDATE episodes SET vector_state = ? WHERE id IN {ids}"),
        (state.value, dialect.id_param(ids)),
    )


def set_extracted(conn: Connection, dialect: Dialect, episode_id: int) -> None:
    sql = dialect.sql("UPDATE episodes SET entity_state = ? WHERE id = ?")
    conn.execute(sql, (EntityState.DONE.value, episode_id))
