"""Projects: a name, a retention, and the sessions they hold."""

from __future__ import annotations

from nexusai.errors import Conflict, NotFound
from nexusai.memory.dbapi import inserted_id
from nexusai.memory.repositories.base import Repository, ids_of
from nexusai.memory.repositories.deadlines import renew_deadlines
from nexusai.memory.repositories.validation import check_retention, required_text
from nexusai.models import Project, now_text


class Projects(Repository):
    def create(self, name: str, retention_days: int | None = None) -> Project:
        name = required_text("name", name, 200)
        check_retention(retention_days)
        with self.db.atomic() as conn:
            if conn.execute(self.sql("SELECT 1 FROM projects WHERE name = ?"), (name,)).fetchone():
                raise Conflict(f"a project named {name!r} exists already")
            cur = conn.execute(
                self.sql(
                    "INSERT INTO projects (name, created_at, retention_days) VALUES (?, ?, ?)"
                    " RETURNING id"
                ),
                (name, now_text(), retention_days),
            )
            project_id = inserted_id(cur)
        return self.get(project_id)

    def ensure(self, name: str, retention_days: int | None = None) -> int:
        """The project's id, made (with this retention) when there is none of that name."""
        with self.db.atomic():
            found = self.find(name)
            return found.id if found else self.create(name, retention_days).id

    def get(self, project_id: int) -> Project:
        row = self._one("SELECT * FROM projects WHERE id = ?", [project_id])
        if row is None:
            raise NotFound(f"project {project_id} does not exist")
        return Project(**dict(row))

    def find(self, name: str) -> Project | None:
        row = self._one("SELECT * FROM projects WHERE name = ?", [name])
        return None if row is None else Project(**dict(row))

    def page(self, limit: int = 100, offset: int = 0) -> list[Project]:
        rows = self._rows("SELECT * FROM projects ORDER BY id LIMIT ? OFFSET ?", [limit, offset])
        return [Project(**dict(row)) for row in rows]

    def count(self) -> int:
        return self._count("SELECT count(*) FROM projects")

    def set_retention(self, project_id: int, days: int | None) -> Project:
        """Keeps the project's episodes `days` after they were said (None: as long as each
        episode's own expiry says); every episode's deadline is set anew, at once."""
        check_retention(days)
        with self.db.atomic() as conn:
            self.get(project_id)
            conn.execute(
                self.sql("UPDATE projects SET retention_days = ? WHERE id = ?"), (days, project_id)
            )
            where = "e.session_id IN (SELECT id FROM sessions WHERE project_id = ?)"
            renew_deadlines(conn, self.dialect, where, [project_id])
        return self.get(project_id)

    def delete(self, project_id: int) -> list[int]:
        """Deletes the project, its sessions and their episodes; returns the episode ids."""
        with self.db.atomic() as conn:
            self.get(project_id)
            ids = ids_of(
                conn.execute(
                    self.sql(
                        "SELECT e.id FROM episodes e JOIN sessions s ON s.id = e.session_id"
                        " WHERE s.project_id = ?"
                    ),
                    (project_id,),
                )
            )
            conn.execute(self.sql("DELETE FROM projects WHERE id = ?"), (project_id,))
        return ids
