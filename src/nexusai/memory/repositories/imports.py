"""What was imported, by its source's key: a file imported again writes only what is new."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from nexusai.memory.dbapi import Connection
from nexusai.memory.repositories.base import Database, Repository
from nexusai.memory.repositories.deadlines import retention
from nexusai.memory.repositories.episodes import Episodes
from nexusai.memory.repositories.validation import deadline, validated
from nexusai.models import NewEpisode, now_text


class ImportedEpisode(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def episode(self) -> NewEpisode: ...


class ImportedSession(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def title(self) -> str | None: ...

    @property
    def episodes(self) -> Sequence[ImportedEpisode]: ...


class Imports(Repository):
    def __init__(self, db: Database, episodes: Episodes) -> None:
        super().__init__(db)
        self.episodes = episodes

    def add(
        self, sessions: Sequence[ImportedSession], project_id: int | None
    ) -> tuple[int, list[int], int]:
        """Writes a conversation's sessions in one transaction, skipping every session and
        episode whose source key was imported before. Returns (new sessions, new episode
        ids, episodes skipped)."""
        new_sessions, new_ids, skipped = 0, [], 0
        with self.db.atomic() as conn:
            for session in sessions:
                is_new, ids, already = self._session(conn, session, project_id)
                new_sessions += is_new
                new_ids += ids
                skipped += already
        return new_sessions, new_ids, skipped

    def episode_ids(self, prefix: str) -> dict[str, int]:
        """Source key -> episode id for everything imported under keys starting with prefix."""
        rows = self._rows(
            "SELECT key, episode_id FROM import_episodes WHERE key >= ? AND key < ?",
            [prefix, prefix + "\U0010ffff"],
        )
        return {row[0]: int(row[1]) for row in rows}

    def _session(
        self, conn: Connection, session: ImportedSession, project_id: int | None
    ) -> tuple[bool, list[int], int]:
        rows = validated([source.episode for source in session.episodes], self.episodes.limits)
        sql = self.sql("SELECT session_id FROM import_sessions WHERE key = ?")
        found = conn.execute(sql, (session.key,)).fetchone()
        if found:
            session_id = int(found[0])
        else:
            title = None if session.title is None else session.title[:500]
            session_id = self.episodes.sessions.create(project_id, title).id
            sql = self.sql("INSERT INTO import_sessions VALUES (?, ?)")
            conn.execute(sql, (session.key, session_id))
        ids, skipped = [], 0
        kept_for, now = retention(conn, self.dialect, session_id), now_text()
        seen = self.sql("SELECT 1 FROM import_episodes WHERE key = ?")
        for source, row in zip(session.episodes, rows, strict=True):
            gone = deadline(row.expires_at, row.occurred_at, kept_for)
            if (gone is not None and gone <= now) or conn.execute(seen, (source.key,)).fetchone():
                skipped += 1  # imported before, or past its deadline already: no read has it
                continue
            ids.append(self.episodes.insert(conn, session_id, row))
            sql = self.sql("INSERT INTO import_episodes VALUES (?, ?)")
            conn.execute(sql, (source.key, ids[-1]))
        return found is None, ids, skipped
