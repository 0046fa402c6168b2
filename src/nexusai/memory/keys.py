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

from nexusai.access import Principal
from nexusai.errors import NotFound
from nexusai.memory.repositories.api_keys import ApiKey
from nexusai.memory.store import EpisodeStore

PREFIX = "nxk_"
SECRET_FILE = "api-keys.secret"


class KeyStore:
    def __init__(self, store: EpisodeStore) -> None:
        self.store = store
        self._secret: bytes | None = None

    def create(self, project: str, read_only: bool = False, name: str | None = None) -> str:
        """A new key for the named project (which must exist); the only time it is shown."""
        found = self.store.projects.find(project)
        if found is None:
            raise NotFound(f"project {project!r} does not exist")
        secret = secrets.token_urlsafe(32)
        key_id = self.store.api_keys.add(found.id, read_only, name, self._hash(secret))
        return f"{PREFIX}{key_id}_{secret}"

    def list(self) -> list[ApiKey]:
        return self.store.api_keys.all()

    def revoke(self, key_id: int) -> None:
        if not self.store.api_keys.revoke(key_id):
            raise NotFound(f"key {key_id} does not exist or is revoked already")

    def any_active(self) -> bool:
        return self.store.api_keys.any_live()

    def verify(self, presented: str) -> Principal | None:
        """The key's principal, or None for anything that is not a live key."""
        key_id, secret = _parts(presented)
        if key_id is None:
            return None
        row = self.store.api_keys.live(key_id)
        if row is None or not hmac.compare_digest(self._hash(secret), row.hash):
            return None
        return Principal(row.project_id, row.project_name, row.read_only, key_id)

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
