"""Project API keys as stored: a keyed hash each, revoked by id (`memory.keys` makes and
checks them)."""

from __future__ import annotations

from dataclasses import dataclass

from nexusai.memory.dbapi import inserted_id
from nexusai.memory.repositories.base import Repository
from nexusai.models import now_text


@dataclass(frozen=True)
class ApiKey:
    id: int
    name: str | None
    project_id: int
    project_name: str
    read_only: bool
    created_at: str
    revoked_at: str | None


@dataclass(frozen=True)
class LiveKey:
    """What checking a presented key needs of its row."""

    hash: str
    project_id: int
    project_name: str
    read_only: bool


class ApiKeys(Repository):
    def add(self, project_id: int, read_only: bool, name: str | None, hashed: str) -> int:
        """A new key's row, with its secret's keyed hash."""
        with self.db.atomic() as conn:
            cursor = conn.execute(
                self.sql(
                    "INSERT INTO api_keys (name, project_id, read_only, hash, created_at)"
                    " VALUES (?, ?, ?, ?, ?) RETURNING id"
                ),
                (name, project_id, read_only, hashed, now_text()),
            )
            return inserted_id(cursor)

    def all(self) -> list[ApiKey]:
        rows = self._rows(
            "SELECT k.id, k.name, k.project_id, p.name, k.read_only, k.created_at, k.revoked_at"
            " FROM api_keys k JOIN projects p ON p.id = k.project_id ORDER BY k.id"
        )
        return [ApiKey(r[0], r[1], r[2], r[3], bool(r[4]), r[5], r[6]) for r in rows]

    def revoke(self, key_id: int) -> bool:
        """Whether a live key of this id was revoked."""
        with self.db.atomic() as conn:
            sql = self.sql("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
            return bool(conn.execute(sql, (now_text(), key_id)).rowcount)

    def any_live(self) -> bool:
        return self._one("SELECT 1 FROM api_keys WHERE revoked_at IS NULL LIMIT 1") is not None

    def live(self, key_id: int) -> LiveKey | None:
        row = self._one(
            "SELECT k.hash, k.project_id, p.name, k.read_only FROM api_keys k"
            " JOIN projects p ON p.id = k.project_id WHERE k.id = ? AND k.revoked_at IS NULL",
            (key_id,),
        )
        return None if row is None else LiveKey(row[0], row[1], row[2], bool(row[3]))
