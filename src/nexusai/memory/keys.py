"""Project API keys: made once, stored only as a keyed hash, revoked by id.

A key reads `nxk_<id>_<secret>`: the id finds its row, and the secret's HMAC-SHA256 (keyed
with the store's `secret`: for SQLite a file beside it, `api-keys.secret`, readable by its
owner only, so the database alone lets nobody check a guess; for PostgreSQL a row every
replica reads) is compared in constant time with the stored one. The secret is 32 random
bytes either way, so there is nothing to guess.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from nexusai.access import Principal
from nexusai.errors import NotFound
from nexusai.memory.dbapi import inserted_id
from nexusai.memory.store import EpisodeStore
from nexusai.models import now_text

PREFIX = "nxk_"
SECRET_FILE = "api-keys.secret"


@dataclass(frozen=True)
class ApiKey:
    id: int
    name: str | None
    project_id: int
    project_name: str
    read_only: bool
    created_at: str
    revoked_at: str | None


class KeyStore:
    def __init__(self, store: EpisodeStore) -> None:
        self.store = store
        self._secret: bytes | None = None

    def create(self, project: str, read_only: bool = False, name: str | None = None) -> str:
        """A new key for the named project (which must exist); the only time it is shown."""
        found = self.store.find_project(project)
        if found is None:
            raise NotFound(f"project {project!r} does not exist")
        secret = secrets.token_urlsafe(32)
        with self.store.atomic() as conn:
            cursor = conn.execute(
                "INSERT INTO api_keys (name, project_id, read_only, hash, created_at)"
                " VALUES (?, ?, ?, '', ?) RETURNING id",
                (name, found.id, read_only, now_text()),
            )
            key_id = inserted_id(cursor)
            conn.execute("UPDATE api_keys SET hash = ? WHERE id = ?", (self._hash(secret), key_id))
        return f"{PREFIX}{key_id}_{secret}"

    def list(self) -> list[ApiKey]:
        rows = self.store.connection().execute(
            "SELECT k.id, k.name, k.project_id, p.name, k.read_only, k.created_at, k.revoked_at"
            " FROM api_keys k JOIN projects p ON p.id = k.project_id ORDER BY k.id"
        )
        return [ApiKey(r[0], r[1], r[2], r[3], bool(r[4]), r[5], r[6]) for r in rows]

    def revoke(self, key_id: int) -> None:
        with self.store.atomic() as conn:
            changed = conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (now_text(), key_id),
            ).rowcount
        if not changed:
            raise NotFound(f"key {key_id} does not exist or is revoked already")

    def any_active(self) -> bool:
        row = (
            self.store.connection()
            .execute("SELECT 1 FROM api_keys WHERE revoked_at IS NULL LIMIT 1")
            .fetchone()
        )
        return row is not None

    def verify(self, presented: str) -> Principal | None:
        """The key's principal, or None for anything that is not a live key."""
        key_id, secret = _parts(presented)
        if key_id is None:
            return None
        row = (
            self.store.connection()
            .execute(
                "SELECT k.hash, k.project_id, p.name, k.read_only FROM api_keys k"
                " JOIN projects p ON p.id = k.project_id WHERE k.id = ? AND k.revoked_at IS NULL",
                (key_id,),
            )
            .fetchone()
        )
        if row is None or not hmac.compare_digest(self._hash(secret), row[0]):
            return None
        return Principal(row[1], row[2], bool(row[3]), key_id)

    def _hash(self, secret: str) -> str:
        return hmac.new(self._key(), secret.encode(), hashlib.sha256).hexdigest()

    def _key(self) -> bytes:
        if self._secret is None:
            self._secret = self.store.secret(SECRET_FILE)
        return self._secret


def _parts(presented: str) -> tuple[int | None, str]:
    if not presented.startswith(PREFIX):
        return None, ""
    ident, _, secret = presented[len(PREFIX) :].partition("_")
    if not (ident.isascii() and ident.isdigit() and secret) or len(ident) > 18:
        return None, ""
    return int(ident), secret
