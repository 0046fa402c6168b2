"""Sessions: one conversation each, in a project or in none, and the scope a search
from one of them sees."""

from __future__ import annotations

from typing import Literal

from nexusai.errors import Conflict, NotFound
from nexusai.memory.dbapi import inserted_id
from nexusai.memory.repositories.base import Database, Repository, ids_of
from nexusai.memory.repositories.columns import SESSION_COLUMNS
from nexusai.memory.repositories.projects import Projects
from nexusai.memory.repositories.validation import UNSET, Unset, optional_text, required_text
from nexusai.models import Scope, Session, now_text


class Sessions(Repository):
    def __init__(self, db: Database, projects: Projects) -> None:
        super().__init__(db)
        self.projects = projects

    def create(self, project_id: int | None = None, title: str | None = None) -> Session:
        with self.db.atomic() as conn:
            if project_id is not None:
                self.projects.get(project_id)
            cur = conn.execute(
                self.sql(
                    "INSERT INTO sessions (project_id, title, created_at) VALUES (?, ?, ?)"
                    " RETURNING id"
                ),
                (project_id, optional_text("title", title, 500), now_text()),
            )
            session_id = inserted_id(cur)
        return self.get(session_id)

    def get(self, session_id: int) -> Session:
        row = self._one(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", [session_id])
        if row is None:
            raise NotFound(f"session {session_id} does not exist")
        return Session(**dict(row))

    def page(
        self,
        project_id: int | None = None,
        limit: int = 100,
        offset: int = 0,
        order: Literal["id", "started"] = "id",
    ) -> list[Session]:
        """A page of sessions, by id (when each was made) or by when each conversation
        began (its earliest episode; sessions with none last)."""
        where, params = (
            ("WHERE project_id = ?", [project_id]) if project_id is not None else ("", [])
        )
        by = "started_at IS NULL, started_at, id" if order == "started" else "id"
        # Ordered outside: PostgreSQL orders by an alias only when it stands alone.
        listed = f"SELECT {SESSION_COLUMNS} FROM sessions {where}"
        sql = f"SELECT * FROM ({listed}) AS listed ORDER BY {by} LIMIT ? OFFSET ?"
        return [Session(**dict(row)) for row in self._rows(sql, [*params, limit, offset])]

    def count(self, project_id: int | None = None) -> int:
        if project_id is None:
            return self._count("SELECT count(*) FROM sessions")
        return self._count("SELECT count(*) FROM sessions WHERE project_id = ?", [project_id])

    def update(
        self,
        session_id: int,
        *,
        title: str | Unset | None = UNSET,
        project_id: int | Unset | None = UNSET,
    ) -> Session:
        """Renames a session or moves it into (or, with project_id=None, out of) a project."""
        with self.db.atomic() as conn:
            self.get(session_id)
            if not isinstance(title, Unset):
                conn.execute(
                    self.sql("UPDATE sessions SET title = ? WHERE id = ?"),
                    (optional_text("title", title, 500), session_id),
                )
            if not isinstance(project_id, Unset):
                if project_id is not None:
                    self.projects.get(project_id)
                conn.execute(
                    self.sql("UPDATE sessions SET project_id = ? WHERE id = ?"),
                    (project_id, session_id),
                )
        return self.get(session_id)

    def delete(self, session_id: int) -> list[int]:
        """Deletes the session and its episodes; returns the episode ids."""
        with self.db.atomic() as conn:
            self.get(session_id)
            sql = self.sql("SELECT id FROM episodes WHERE session_id = ?")
            ids = ids_of(conn.execute(sql, (session_id,)))
            conn.execute(self.sql("DELETE FROM sessions WHERE id = ?"), (session_id,))
        return ids

    def resolve(self, project: str | None, title: str) -> Session:
        """The session with this title in the project of this name (or in none), created
        with the project when missing: how a face that names conversations finds one."""
        title = required_text("title", title, 500)
        with self.db.atomic():
            project_id = self.projects.ensure(project) if project else None
            where = "project_id = ?" if project_id is not None else "project_id IS NULL"
            params = [title] + ([project_id] if project_id is not None else [])
            named = ids_of(
                self._rows(
                    f"SELECT id FROM sessions WHERE title = ? AND {where} ORDER BY id", params
                )
            )
            if len(named) > 1:  # never the lowest id in silence: which one is the caller's
                raise Conflict(
                    f"several sessions are named {title!r} here:"
                    f" {', '.join(map(str, named))}; give the session's id (sessionId), or"
                    " rename all but one"
                )
            return self.get(named[0]) if named else self.create(project_id, title)

    def scope(self, session_id: int) -> Scope:
        """The sessions a search from this session may see (its project's, or just itself),
        and whether they are every session in the store (read in one statement, so from
        one snapshot)."""
        session = self.get(session_id)
        if session.project_id is None:
            return Scope([session.id], self._count("SELECT count(*) FROM sessions") == 1)
        rows = self._rows(
            "SELECT id, (SELECT count(*) FROM sessions) FROM sessions WHERE project_id = ?"
            " ORDER BY id",
            [session.project_id],
        )
        every = bool(rows) and len(rows) == rows[0][1]
        return Scope(ids_of(rows), every, session.project_id)

    def of_project(self, project_id: int) -> list[int]:
        """Every session of the project, oldest first."""
        sql = "SELECT id FROM sessions WHERE project_id = ? ORDER BY id"
        return ids_of(self._rows(sql, [project_id]))
