"""Entities: one per name in a scope (a project, or a session without one), their
mentions, what extraction left unread, and whether each has its vector. The triggers that
keep mention counts and dates right however mentions go are in migration m005."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nexusai.memory.dbapi import Connection, inserted_id
from nexusai.memory.repositories.base import Repository, ids_of
from nexusai.memory.repositories.columns import live
from nexusai.memory.repositories.derived import VectorState, set_extracted
from nexusai.models import Entity, now_text


class Entities(Repository):
    # -- writes, in the caller's transaction (`record`) or each in its own ---------------

    def record(
        self, conn: Connection, episode_id: int, session_id: int, seen: str, found: Sequence[Found]
    ) -> list[int]:
        """Links the episode to its entities, one per name in its scope (created when new);
        each mention keeps the type it was given, and the episode is marked extracted.
        Returns the entities' ids."""
        scope = self._scope_key(conn, session_id)
        ids = []
        for name, normalized, kind in found:
            entity_id = self._entity_for(conn, scope, name, normalized, kind, seen)
            conn.execute(
                self.sql(
                    "INSERT INTO entity_mentions (entity_id, episode_id, type) VALUES (?, ?, ?)"
                    " ON CONFLICT DO NOTHING"
                ),
                (entity_id, episode_id, kind),
            )
            self._settle_type(conn, entity_id)
            ids.append(entity_id)
        set_extracted(conn, self.dialect, episode_id)
        return ids

    def note(self, conn: Connection, episode_id: int, outcome: str, detail: str | None) -> None:
        """What extraction left unread of a message."""
        conn.execute(
            self.sql(
                "INSERT INTO extraction_notes (episode_id, outcome, detail) VALUES (?, ?, ?)"
                " ON CONFLICT (episode_id) DO UPDATE SET outcome = excluded.outcome,"
                " detail = excluded.detail"
            ),
            (episode_id, outcome, detail),
        )

    def set_vectors(self, ids: Sequence[int] | None, state: VectorState) -> None:
        """These entities' vectors are in the index, or to be made (all when None)."""
        with self.db.atomic() as conn:
            if ids is None:
                conn.execute(self.sql("UPDATE entities SET vector_state = ?"), (state.value,))
                return
            conn.executemany(
                self.sql("UPDATE entities SET vector_state = ? WHERE id = ?"),
                [(state.value, i) for i in ids],
            )

    # -- reads ---------------------------------------------------------------------------

    def count_vectors(self, state: VectorState) -> int:
        sql = "SELECT count(*) FROM entities WHERE vector_state = ?"
        return self._count(sql, [state.value])

    def needing_vectors(self, ids: Sequence[int] | None) -> list[int]:
        sql = "SELECT id FROM entities WHERE vector_state = ?"
        params: list[object] = [VectorState.PENDING.value]
        if ids is not None:
            sql += " AND id IN {ids}"
            params.append(self.dialect.id_param(ids))
        return ids_of(self._rows(sql, params))

    def get(self, ids: Sequence[int]) -> list[Entity]:
        """Entities in the order of `ids`; an id with no row is skipped, and so is one
        mentioned only by expired episodes the upkeep has yet to delete. Nothing derived
        from an expired episode is returned: while one waits, counts and dates are read
        from the live mentions alone."""
        listed = self.dialect.id_param(ids)
        found = self._rows("SELECT * FROM entities WHERE id IN {ids}", (listed,))
        rows = {row["id"]: dict(row) for row in found}
        if self._expired_waiting():
            rows = self._live_counts(rows, listed)
        return [self._entity_from_row(rows[i]) for i in ids if i in rows]

    def by_prefix(self, like: str, session_ids: Sequence[int], limit: int) -> list[int]:
        """Entities of the scope whose normalized name is LIKE `like` (escaped with `\\`),
        most mentioned first."""
        rows = self._rows(
            "SELECT DISTINCT n.id, n.mention_count FROM entities n"
            " JOIN entity_mentions m ON m.entity_id = n.id JOIN episodes e ON e.id = m.episode_id"
            " WHERE n.normalized LIKE ? ESCAPE '\\'"
            f" AND e.session_id IN {{ids}} AND {live('e')}"
            " ORDER BY n.mention_count DESC, n.id LIMIT ?",
            [like, self.dialect.id_param(session_ids), now_text(), limit],
        )
        return ids_of(rows)

    def mentions(self, entity_id: int, limit: int, offset: int) -> list[int]:
        """The episodes that mention an entity, newest first."""
        rows = self._rows(
            "SELECT m.episode_id FROM entity_mentions m JOIN episodes e ON e.id = m.episode_id"
            f" WHERE m.entity_id = ? AND {live('e')}"
            " ORDER BY e.occurred_at DESC, e.id DESC LIMIT ? OFFSET ?",
            [entity_id, now_text(), limit, offset],
        )
        return ids_of(rows)

    def scope_of(self, entity_id: int) -> str | None:
        """`p:<project>` or `s:<session>`; None when there is no such entity."""
        row = self._one("SELECT scope FROM entities WHERE id = ?", (entity_id,))
        return None if row is None else str(row[0])

    def names_by_episode(self, episode_ids: Sequence[int]) -> dict[int, list[str]]:
        """The names of the entities each episode mentions, most mentioned first."""
        rows = self._rows(
            "SELECT m.episode_id, n.name FROM entity_mentions m JOIN entities n"
            " ON n.id = m.entity_id WHERE m.episode_id IN {ids}"
            " ORDER BY n.mention_count DESC, n.id",
            [self.dialect.id_param(episode_ids)],
        )
        names: dict[int, list[str]] = {}
        for episode_id, name in rows:
            names.setdefault(int(episode_id), []).append(str(name))
        return names

    def sessions_of(self, entity_id: int) -> list[int]:
        """The sessions an entity is visible to: those of the episodes that mention it."""
        rows = self._rows(
            "SELECT DISTINCT e.session_id FROM entity_mentions m"
            " JOIN episodes e ON e.id = m.episode_id WHERE m.entity_id = ? ORDER BY 1",
            (entity_id,),
        )
        return ids_of(rows)

    def count(self) -> int:
        return self._count("SELECT count(*) FROM entities")

    # -- parts --------------------------------------------------------------------------

    def _scope_key(self, conn: Connection, session_id: int) -> str:
        sql = self.sql("SELECT project_id FROM sessions WHERE id = ?")
        row = conn.execute(sql, (session_id,)).fetchone()
        return f"p:{row[0]}" if row and row[0] is not None else f"s:{session_id}"

    def _entity_for(
        self, conn: Connection, scope: str, name: str, normalized: str, kind: str | None, seen: str
    ) -> int:
        row = conn.execute(
            self.sql(
                "SELECT id FROM entities WHERE scope = ? AND normalized = ?"
                " ORDER BY mention_count DESC, id LIMIT 1"
            ),
            (scope, normalized),
        ).fetchone()
        if row is not None:
            return int(row[0])
        cursor = conn.execute(
            self.sql(
                "INSERT INTO entities (scope, name, normalized, type, first_seen, last_seen)"
                " VALUES (?, ?, ?, ?, ?, ?) RETURNING id"
            ),
            (scope, name, normalized, kind, seen, seen),
        )
        return inserted_id(cursor)

    def _settle_type(self, conn: Connection, entity_id: int) -> None:
        """A name is one entity whatever types the recognizer gives its mentions
        ("Caroline" as a person and a place): its type is the one most mentions give (on a
        tie, the one its earliest episode gave). A new type means a new vector: the type is
        embedded with the name."""
        row = conn.execute(
            self.sql(
                "SELECT type FROM entity_mentions WHERE entity_id = ? AND type IS NOT NULL"
                " GROUP BY type ORDER BY count(*) DESC, min(episode_id) LIMIT 1"
            ),
            (entity_id,),
        ).fetchone()
        if row is not None:
            conn.execute(
                self.sql(
                    "UPDATE entities SET type = ?, vector_state = ? WHERE id = ? AND type != ?"
                ),
                (row[0], VectorState.PENDING.value, entity_id, row[0]),
            )

    def _expired_waiting(self) -> bool:
        """Whether some episode is past its deadline but not deleted yet (one probe)."""
        sql = "SELECT 1 FROM episodes WHERE expires_at <= ? LIMIT 1"
        return self._one(sql, (now_text(),)) is not None

    def _live_counts(self, rows: dict[Any, Any], listed: str) -> dict[Any, Any]:
        """The entities among `rows` that a live episode mentions, their mention counts
        and dates counted over the live mentions only."""
        live_rows = self._rows(
            "SELECT m.entity_id, count(*), min(e.occurred_at), max(e.occurred_at)"
            " FROM entity_mentions m JOIN episodes e ON e.id = m.episode_id"
            f" WHERE m.entity_id IN {{ids}} AND {live('e')}"
            " GROUP BY m.entity_id",
            (listed, now_text()),
        )
        counted = {}
        for entity_id, count, first, last in live_rows:
            row = rows[entity_id]
            counted[entity_id] = {
                **row,
                "mention_count": count,
                "first_seen": first,
                "last_seen": last,
            }
        return counted

    def _entity_from_row(self, row: Any, latest: int = 3) -> Entity:
        mentions = self._rows(
            "SELECT m.episode_id FROM entity_mentions m JOIN episodes e ON e.id = m.episode_id"
            f" WHERE m.entity_id = ? AND {live('e')}"
            " ORDER BY e.occurred_at DESC, e.id DESC LIMIT ?",
            (row["id"], now_text(), latest),
        )
        return Entity(
            row["id"],
            row["name"],
            row["type"],
            row["first_seen"],
            row["last_seen"],
            row["mention_count"],
            row["summary"],
            ids_of(mentions),
        )


# A mention as the store keeps it: (name, normalized name, type).
Found = tuple[str, str, str | None]
