"""The store's own notes: a key and a text each (what the store was made from, marks a
migration or a copy leaves)."""

from __future__ import annotations

from nexusai.memory.repositories.base import Repository


class Meta(Repository):
    def get(self, key: str) -> str | None:
        row = self._one("SELECT value FROM meta WHERE key = ?", [key])
        return None if row is None else str(row[0])

    def set(self, key: str, value: str) -> None:
        with self.db.atomic() as conn:
            conn.execute(
                self.sql(
                    "INSERT INTO meta (key, value) VALUES (?, ?)"
                    " ON CONFLICT(key) DO UPDATE SET value = excluded.value"
                ),
                (key, value),
            )

    def add(self, key: str, value: str) -> str:
        """The key's value: `value` if it had none, else the one kept (whoever wrote
        first, of several processes, wins)."""
        with self.db.atomic() as conn:
            conn.execute(
                self.sql("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING"),
                (key, value),
            )
            row = conn.execute(self.sql("SELECT value FROM meta WHERE key = ?"), (key,)).fetchone()
        return str(row[0])
