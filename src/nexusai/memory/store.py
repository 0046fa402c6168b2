"""The episode store: projects, sessions and episodes, the source of truth.

`EpisodeStore` is the contract and everything the two engines share: the SQL (written
against `dbapi`), validation and the neighbour-context bookkeeping. The engines are
`sqlite.store.SqliteStore`, the embedded default, and `postgres.store.PgStore`, for several
replicas on one database.
"""

from __future__ import annotations

import errno
import json
import math
import re
import sqlite3
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final, Literal, Protocol, Self

from nexusai import keywords
from nexusai.errors import (
    ConfigError,
    Conflict,
    InvalidInput,
    NexusError,
    NotFound,
    TooLarge,
)
from nexusai.memory import neighbours, vector_state
from nexusai.memory.dbapi import Connection, inserted_id, joined_ids
from nexusai.memory.standing import standing_kind
from nexusai.memory.texts import compose_search_text
from nexusai.memory.vector_state import VectorState
from nexusai.models import (
    Episode,
    EpisodeFilter,
    NewEpisode,
    Project,
    Scope,
    Session,
    finds_nothing,
    now_text,
    to_utc_text,
    unstorable,
)


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


class StoreDamaged(ConfigError):
    """The SQLite file fails SQLite's own check: the store is not opened."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(
            f"the store at {path} is damaged ({reason[:200]}) and was not opened: restore a"
            " backup with `nexus restore BACKUP --data-dir EMPTY_DIR` and point NEXUS_DATA_DIR"
            " there, or move the file aside to start with an empty store"
        )


class _Unset:
    """Marks an argument that was not given, where None is a meaningful value."""


UNSET: Final = _Unset()
# What every read of episodes keeps (its one parameter: now): an episode past its
# `expires_at` is never returned, though the upkeep has yet to delete it.
LIVE = "(expires_at IS NULL OR expires_at > ?)"
# An `Episode`'s fields are the episodes table's columns of the same names, less the score a
# search gives: every read that makes episodes selects these and reads them by place.
# `SELECT *` also read what only the indexes use, and a row read by name searches its
# columns for each field: a turn makes a hundred of them.
EPISODE_FIELDS: Final = tuple(field.name for field in fields(Episode) if field.name != "score")
EPISODE_COLUMNS: Final = ", ".join(EPISODE_FIELDS)
SCORE_AT: Final = len(EPISODE_FIELDS)  # where a search's score follows them


def episode_columns(table: str) -> str:
    """`EPISODE_COLUMNS` of the table (or alias) `table`, for a read that joins it."""
    return ", ".join(f"{table}.{name}" for name in EPISODE_FIELDS)


# A filter as SQL over the episodes table: clauses to AND, with their `?` parameters.
Where = tuple[list[str], list[object]]


# A session's row and when its conversation began (the index on episodes' session and time
# answers the min).
SESSION_COLUMNS = (
    "sessions.*, (SELECT min(occurred_at) FROM episodes"
    " WHERE episodes.session_id = sessions.id) AS started_at"
)


class EpisodeStore(ABC):
    """One store interface, two engines: each gives connections and transactions, its
    keyword index and its secrets; the SQL over them is here, once."""

    max_content_bytes: int
    max_metadata_bytes: int
    # A connection pool the vector index may share (PostgreSQL's, for pgvector).
    pool: Any = None
    migrations_applied: list[str]

    @abstractmethod
    def connection(self) -> Connection:
        """A connection to read with (this thread's transaction's, inside `atomic`)."""

    @abstractmethod
    def atomic(self) -> AbstractContextManager[Connection]:
        """A write transaction; nested calls join the outer one. Writes are serialized."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def warm(self, keep_on: Callable[[], bool]) -> None:
        """Reads ahead what the first searches after a start would otherwise wait for,
        while `keep_on()` (in the caller's thread, at start)."""

    @abstractmethod
    def open_connections(self) -> int: ...

    @abstractmethod
    def describe(self) -> str:
        """Where the store is, for messages (never a password)."""

    @abstractmethod
    def secret(self, name: str) -> bytes:
        """32 random bytes made once per store and kept with it (every replica of a shared
        store gets the same ones)."""

    @abstractmethod
    def claim_pending_vectors(
        self, limit: int, sessions: Sequence[int] | None = None, ids: Sequence[int] | None = None
    ) -> AbstractContextManager[list[int]]:
        """Up to `limit` episodes waiting for a vector, oldest first, of `sessions` and
        among `ids` (all when None), which no one else indexes until the block ends (reads
        and writes inside it join its transaction)."""

    @abstractmethod
    def keyword_index_ok(self) -> bool: ...

    @abstractmethod
    def rebuild_keyword_index(self) -> None: ...

    @abstractmethod
    def _keyword_search(
        self,
        query: str,
        limit: int,
        session_ids: Sequence[int] | None,
        budget: int,
        where: Where | None,
    ) -> list[Episode]:
        """`where`: a filter's SQL over the episodes table (`_filter_sql`), applied inside
        the search."""

    @abstractmethod
    def own_text_matches(self, query: str, ids: Sequence[int]) -> set[int]:
        """Which of these episodes a keyword search for `query` finds by their own text;
        the others it found by the end of the turn before them, indexed with each."""

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        return self.connection().execute(sql, params).fetchall()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- meta ---------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE key = ?", [key])
        return rows[0]["value"] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self.atomic() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- projects -----------------------------------------------------------------------

    def create_project(self, name: str, retention_days: int | None = None) -> Project:
        name = _required_text("name", name, 200)
        _check_retention(retention_days)
        with self.atomic() as conn:
            if conn.execute("SELECT 1 FROM projects WHERE name = ?", (name,)).fetchone():
                raise Conflict(f"a project named {name!r} exists already")
            cur = conn.execute(
                "INSERT INTO projects (name, created_at, retention_days) VALUES (?, ?, ?)"
                " RETURNING id",
                (name, now_text(), retention_days),
            )
            project_id = inserted_id(cur)
        return self.get_project(project_id)

    def ensure_project(self, name: str, retention_days: int | None = None) -> int:
        """The project's id, made (with this retention) when there is none of that name."""
        with self.atomic():
            found = self.find_project(name)
            return found.id if found else self.create_project(name, retention_days).id

    def get_project(self, project_id: int) -> Project:
        rows = self._rows("SELECT * FROM projects WHERE id = ?", [project_id])
        if not rows:
            raise NotFound(f"project {project_id} does not exist")
        return Project(**dict(rows[0]))

    def find_project(self, name: str) -> Project | None:
        rows = self._rows("SELECT * FROM projects WHERE name = ?", [name])
        return Project(**dict(rows[0])) if rows else None

    def list_projects(self, limit: int = 100, offset: int = 0) -> list[Project]:
        rows = self._rows("SELECT * FROM projects ORDER BY id LIMIT ? OFFSET ?", [limit, offset])
        return [Project(**dict(row)) for row in rows]

    def set_retention(self, project_id: int, days: int | None) -> Project:
        """Keeps the project's episodes `days` after they were said (None: as long as each
        episode's own expiry says); every episode's deadline is set anew, at once."""
        _check_retention(days)
        with self.atomic() as conn:
            self.get_project(project_id)
            sql = "UPDATE projects SET retention_days = ? WHERE id = ?"
            conn.execute(sql, (days, project_id))
            where = "e.session_id IN (SELECT id FROM sessions WHERE project_id = ?)"
            _renew_deadlines(conn, where, [project_id])
        return self.get_project(project_id)

    def delete_project(self, project_id: int) -> list[int]:
        """Deletes the project, its sessions and their episodes; returns the episode ids."""
        with self.atomic() as conn:
            self.get_project(project_id)
            ids = _ids(
                conn.execute(
                    "SELECT e.id FROM episodes e JOIN sessions s ON s.id = e.session_id"
                    " WHERE s.project_id = ?",
                    (project_id,),
                )
            )
            conn.execute("DELETE FROM projects WHERE id = ?", (project_id,))
        return ids

    # -- sessions -----------------------------------------------------------------------

    def create_session(self, project_id: int | None = None, title: str | None = None) -> Session:
        with self.atomic() as conn:
            if project_id is not None:
                self.get_project(project_id)
            cur = conn.execute(
                "INSERT INTO sessions (project_id, title, created_at) VALUES (?, ?, ?)"
                " RETURNING id",
                (project_id, _optional_text("title", title, 500), now_text()),
            )
            session_id = inserted_id(cur)
        return self.get_session(session_id)

    def get_session(self, session_id: int) -> Session:
        rows = self._rows(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", [session_id])
        if not rows:
            raise NotFound(f"session {session_id} does not exist")
        return Session(**dict(rows[0]))

    def list_sessions(
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

    def update_session(
        self,
        session_id: int,
        *,
        title: str | _Unset | None = UNSET,
        project_id: int | _Unset | None = UNSET,
    ) -> Session:
        """Renames a session or moves it into (or, with project_id=None, out of) a project."""
        with self.atomic() as conn:
            self.get_session(session_id)
            if not isinstance(title, _Unset):
                conn.execute(
                    "UPDATE sessions SET title = ? WHERE id = ?",
                    (_optional_text("title", title, 500), session_id),
                )
            if not isinstance(project_id, _Unset):
                if project_id is not None:
                    self.get_project(project_id)
                conn.execute(
                    "UPDATE sessions SET project_id = ? WHERE id = ?", (project_id, session_id)
                )
        return self.get_session(session_id)

    def delete_session(self, session_id: int) -> list[int]:
        """Deletes the session and its episodes; returns the episode ids."""
        with self.atomic() as conn:
            self.get_session(session_id)
            ids = _ids(conn.execute("SELECT id FROM episodes WHERE session_id = ?", (session_id,)))
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        return ids

    def resolve_session(self, project: str | None, title: str) -> Session:
        """The session with this title in the project of this name (or in none), created
        with the project when missing: how a face that names conversations finds one."""
        title = _required_text("title", title, 500)
        with self.atomic():
            project_id = self.ensure_project(project) if project else None
            where = "project_id = ?" if project_id is not None else "project_id IS NULL"
            params = [title] + ([project_id] if project_id is not None else [])
            rows = self._rows(
                f"SELECT id FROM sessions WHERE title = ? AND {where} ORDER BY id LIMIT 2", params
            )
            if len(rows) > 1:  # never the lowest id in silence: which one is the caller's
                named = ", ".join(
                    str(row[0])
                    for row in self._rows(
                        f"SELECT id FROM sessions WHERE title = ? AND {where} ORDER BY id", params
                    )
                )
                raise Conflict(
                    f"several sessions are named {title!r} here: {named}; give the session's id"
                    " (sessionId), or rename all but one"
                )
            return self.get_session(rows[0][0]) if rows else self.create_session(project_id, title)

    def scope_session_ids(self, session_id: int) -> list[int]:
        """The sessions a search from this session may see: its project's, or just itself."""
        return self.scope(session_id).session_ids

    def scope(self, session_id: int) -> Scope:
        """`scope_session_ids`, and whether they are every session in the store (read in
        one statement, so from one snapshot)."""
        session = self.get_session(session_id)
        if session.project_id is None:
            return Scope([session.id], self._rows("SELECT count(*) FROM sessions")[0][0] == 1)
        rows = self._rows(
            "SELECT id, (SELECT count(*) FROM sessions) FROM sessions WHERE project_id = ?"
            " ORDER BY id",
            [session.project_id],
        )
        every = bool(rows) and len(rows) == rows[0][1]
        return Scope(_ids(rows), every, session.project_id)

    def project_session_ids(self, project_id: int) -> list[int]:
        """Every session of the project, oldest first."""
        sql = "SELECT id FROM sessions WHERE project_id = ? ORDER BY id"
        return _ids(self._rows(sql, [project_id]))

    # -- episodes -----------------------------------------------------------------------

    def add_episodes(self, session_id: int, episodes: Sequence[NewEpisode]) -> list[Episode]:
        """Stores the episodes in one transaction: all of them, or (on bad input) none."""
        rows = self._validated(episodes)
        with self.atomic() as conn:
            self.get_session(session_id)
            ids = [self._insert(conn, session_id, row) for row in rows]
        return self.get_episodes(ids, expired=True)  # what was stored, already past or not

    def add_episodes_named(
        self, project: str | None, title: str, episodes: Sequence[NewEpisode]
    ) -> list[Episode]:
        """`add_episodes` into the session `resolve_session` names, in one transaction: a
        batch that is refused leaves no project or session behind."""
        rows = self._validated(episodes)
        with self.atomic() as conn:
            session_id = self.resolve_session(project, title).id
            ids = [self._insert(conn, session_id, row) for row in rows]
        return self.get_episodes(ids, expired=True)  # what was stored, already past or not

    def import_sessions(
        self, sessions: Sequence[ImportedSession], project_id: int | None
    ) -> tuple[int, list[int], int]:
        """Writes a conversation's sessions in one transaction, skipping every session and
        episode whose source key was imported before. Returns (new sessions, new episode
        ids, episodes skipped)."""
        new_sessions, new_ids, skipped = 0, [], 0
        with self.atomic() as conn:
            for session in sessions:
                is_new, ids, already = self._import_session(conn, session, project_id)
                new_sessions += is_new
                new_ids += ids
                skipped += already
        return new_sessions, new_ids, skipped

    def imported_episode_ids(self, prefix: str) -> dict[str, int]:
        """Source key -> episode id for everything imported under keys starting with prefix."""
        rows = self._rows(
            "SELECT key, episode_id FROM import_episodes WHERE key >= ? AND key < ?",
            [prefix, prefix + "\U0010ffff"],
        )
        return {row[0]: int(row[1]) for row in rows}

    def _import_session(
        self, conn: Connection, session: ImportedSession, project_id: int | None
    ) -> tuple[bool, list[int], int]:
        rows = self._validated([source.episode for source in session.episodes])
        sql = "SELECT session_id FROM import_sessions WHERE key = ?"
        found = conn.execute(sql, (session.key,)).fetchone()
        if found:
            session_id = int(found[0])
        else:
            title = None if session.title is None else session.title[:500]
            session_id = self.create_session(project_id, title).id
            conn.execute("INSERT INTO import_sessions VALUES (?, ?)", (session.key, session_id))
        ids, skipped = [], 0
        kept_for, now = _retention(conn, session_id), now_text()
        for source, row in zip(session.episodes, rows, strict=True):
            gone = deadline(row.expires_at, row.occurred_at, kept_for)
            if (gone is not None and gone <= now) or conn.execute(
                "SELECT 1 FROM import_episodes WHERE key = ?", (source.key,)
            ).fetchone():
                skipped += 1  # imported before, or past its deadline already: no read has it
                continue
            ids.append(self._insert(conn, session_id, row))
            conn.execute("INSERT INTO import_episodes VALUES (?, ?)", (source.key, ids[-1]))
        return found is None, ids, skipped

    def check_episodes(self, episodes: Sequence[NewEpisode]) -> None:
        """Refuses, as `add_episodes` would, what it would refuse; writes nothing (an
        import checks a whole file so before it writes any of it)."""
        self._validated(episodes)

    def _validated(self, episodes: Sequence[NewEpisode]) -> list[_Row]:
        rows = []
        for index, episode in enumerate(episodes):
            try:
                rows.append(self._row(episode))
            except NexusError as exc:
                if len(episodes) == 1:
                    raise
                raise type(exc)(f"episodes[{index}]: {exc}") from None
        return rows

    def _insert(self, conn: Connection, session_id: int, row: _Row) -> int:
        previous = neighbours.context_before(conn, session_id, row.occurred_at, None)
        text = _search_text(row)  # once: both the text and its CJK bigrams are stored
        kept_for = _retention(conn, session_id)
        cursor = conn.execute(
            "INSERT INTO episodes (session_id, speaker, content, occurred_at, created_at,"
            " metadata, search_text, context_text, image_caption, search_cjk, standing,"
            " pinned, expires_at, expiry_asked)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                session_id,
                row.speaker,
                row.content,
                row.occurred_at,
                now_text(),
                json.dumps(row.metadata, ensure_ascii=False),
                text,
                previous,
                row.image_caption,
                keywords.cjk_text(text),
                standing_kind(row.speaker, row.content),
                row.pinned,
                deadline(row.expires_at, row.occurred_at, kept_for),
                row.expires_at,
            ),
        )
        episode_id = inserted_id(cursor)
        neighbours.refresh_context_after(conn, session_id, row.occurred_at, episode_id)
        return episode_id

    def _row(self, episode: NewEpisode) -> _Row:
        for name, value in _texts(episode):
            if (fault := unstorable(value)) is not None:
                raise InvalidInput(f"{name}: {fault}")
        content = _required_text("content", episode.content, None)
        size = len(episode.content.encode("utf-8"))
        if size > self.max_content_bytes:
            raise TooLarge(
                f"content is {size} bytes; the limit is {self.max_content_bytes} bytes"
                " (NEXUS_MAX_CONTENT_BYTES)"
            )
        metadata = dict(episode.metadata or {})
        if any(not str(key).strip() for key in metadata):
            raise InvalidInput(
                'metadata: a key is a name, as {"topic": "travel"}; an empty key could never'
                " be filtered on"
            )
        held = len(_metadata_json(metadata).encode("utf-8"))
        if held > self.max_metadata_bytes:
            raise TooLarge(
                f"metadata is {held} bytes as JSON; the limit is {self.max_metadata_bytes} bytes"
                " (NEXUS_MAX_METADATA_BYTES)"
            )
        occurred = to_utc_text(episode.occurred_at) if episode.occurred_at else now_text()
        speaker = _speaker(episode.speaker)
        caption = _optional_text("imageCaption", episode.image_caption, 2000)
        expires = None if episode.expires_at is None else to_utc_text(episode.expires_at)
        return _Row(speaker, content, occurred, metadata, caption, episode.pinned, expires)

    def get_episode(self, episode_id: int) -> Episode:
        sql = f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE id = ? AND {LIVE}"
        rows = self._rows(sql, [episode_id, now_text()])
        if not rows:
            raise NotFound(f"episode {episode_id} does not exist")
        return self._episode_from_row(rows[0])

    def get_episodes(
        self,
        ids: Sequence[int],
        scores: Mapping[int, float] | None = None,
        expired: bool = False,
    ) -> list[Episode]:
        """Episodes in the order of `ids`; an id with no row (or, unless `expired`, one
        past its `expires_at`) is skipped. With `scores`, each carries its own (a
        search's)."""
        if not ids:
            return []
        live, params = ("", []) if expired else (f" AND {LIVE}", [now_text()])
        rows = self._rows(
            f"SELECT {EPISODE_COLUMNS} FROM episodes"
            f" WHERE id IN (SELECT value FROM json_each(?)){live}",
            [json.dumps([int(i) for i in ids]), *params],
        )
        scored = scores or {}
        by_id = {row[0]: self._episode_from_row(row, scored.get(row[0])) for row in rows}
        return [by_id[i] for i in ids if i in by_id]

    def list_episodes(
        self,
        session_id: int,
        limit: int = 100,
        offset: int = 0,
        rule: EpisodeFilter | None = None,
    ) -> list[Episode]:
        """A session's episodes in time order (ties in insertion order); with `rule`, only
        those it keeps (a metadata value is found through the labels index)."""
        self.get_session(session_id)
        where, params = self._session_where(session_id, rule)
        rows = self._rows(
            f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE {where}"
            " ORDER BY occurred_at, id LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [self._episode_from_row(row) for row in rows]

    def _session_where(self, session_id: int, rule: EpisodeFilter | None) -> tuple[str, list[Any]]:
        """A session's live episodes that `rule` keeps, as SQL and its parameters."""
        where, params = self._filter_sql(rule) if rule is not None else ([], [])
        clauses = ["session_id = ?", LIVE, *where]
        return " AND ".join(clauses), [session_id, now_text(), *params]

    def recent_episodes(self, session_id: int, limit: int) -> list[Episode]:
        """The last `limit` episodes of a session, oldest first."""
        rows = self._rows(
            f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE session_id = ? AND {LIVE}"
            " ORDER BY occurred_at DESC, id DESC LIMIT ?",
            [session_id, now_text(), limit],
        )
        return [self._episode_from_row(row) for row in reversed(rows)]

    def update_episode(
        self,
        episode_id: int,
        *,
        content: str | None = None,
        speaker: str | None = None,
        metadata: dict[str, Any] | _Unset | None = UNSET,
        image_caption: str | _Unset | None = UNSET,
        occurred_at: datetime | None = None,
        pinned: bool | None = None,
        expires_at: datetime | _Unset | None = UNSET,
    ) -> Episode:
        """Changes what is given. `metadata` is a JSON merge patch (RFC 7396) over the
        stored metadata (None clears it); `image_caption` None removes the caption. A new
        text or time re-indexes the episode and the turns it is now read with."""
        with self.atomic() as conn:
            # Read inside the write: a merge patch over a row another write just changed
            # would undo that write.
            current = self.get_episode(episode_id)
            if pinned is not None:
                conn.execute("UPDATE episodes SET pinned = ? WHERE id = ?", (pinned, episode_id))
            if not isinstance(expires_at, _Unset):
                when = None if expires_at is None else to_utc_text(expires_at)
                sql = "UPDATE episodes SET expiry_asked = ? WHERE id = ?"
                conn.execute(sql, (when, episode_id))
            texts = (content, speaker, occurred_at)
            marks = (metadata, image_caption)
            if any(v is not None for v in texts) or any(v is not UNSET for v in marks):
                edited = _edited(current, content, speaker, metadata, image_caption, occurred_at)
                self._edit(conn, current, edited, occurred_at is None)
            if not isinstance(expires_at, _Unset) or occurred_at is not None:
                _renew_deadlines(conn, "e.id = ?", [episode_id])
        [changed] = self.get_episodes([episode_id], expired=True)  # set to expire, it is
        return changed

    def _edit(
        self, conn: Connection, current: Episode, edited: NewEpisode, same_time: bool
    ) -> None:
        """An edit's row written, re-indexed, and the turns around it read anew. Only for
        an edit: a rewrite marks the row's keyword entries changed."""
        row = self._row(edited)
        if same_time:
            row = replace(row, occurred_at=current.occurred_at)
        episode_id = current.id
        _rewrite(conn, episode_id, row)
        context = neighbours.context_before(conn, current.session_id, row.occurred_at, episode_id)
        conn.execute("UPDATE episodes SET context_text = ? WHERE id = ?", (context, episode_id))
        if (_search_text(row), context) != (current.search_text, current.context_text):
            vector_state.set_vectors(conn, [episode_id], VectorState.PENDING)
        # The turns after its old place and after its new one are read with another now.
        neighbours.refresh_context_after(conn, current.session_id, current.occurred_at, episode_id)
        neighbours.refresh_context_after(conn, current.session_id, row.occurred_at, episode_id)

    def standing_episodes(
        self, session_ids: Sequence[int] | None, limit: int, rule: EpisodeFilter | None = None
    ) -> list[Episode]:
        """The pinned and standing episodes (`memory/standing.py`) within the sessions given
        (all when None) that `rule` keeps, pinned first, then the newest."""
        if finds_nothing(session_ids, limit):
            return []
        clauses, params = self._filter_sql(rule or EpisodeFilter())
        where = " AND ".join(["(standing IS NOT NULL OR pinned)", *clauses])
        if session_ids is not None:
            where += " AND session_id IN (SELECT value FROM json_each(?))"
            params.append(json.dumps([int(i) for i in session_ids]))
        # The ids sorted first, then their rows: sorting whole rows (long texts and what
        # the indexes see) took ten times as long at a thousand standing episodes.
        ids = self._rows(
            f"SELECT id FROM episodes WHERE {where}"
            " ORDER BY pinned DESC, occurred_at DESC, id DESC LIMIT ?",
            [*params, limit],
        )
        return self.get_episodes(_ids(ids))

    def delete_episode(self, episode_id: int) -> Episode:
        """Deletes the episode; returns it as it was."""
        with self.atomic() as conn:
            episode = self.get_episode(episode_id)
            self._delete(conn, episode)
        return episode

    def _delete(self, conn: Connection, episode: Episode) -> None:
        conn.execute("DELETE FROM episodes WHERE id = ?", (episode.id,))
        neighbours.refresh_context_after(conn, episode.session_id, episode.occurred_at, episode.id)

    def matching_ids(
        self, session_ids: Sequence[int] | None, rule: EpisodeFilter, live: bool = False
    ) -> list[int]:
        """The episodes within the sessions given (all when None) that `rule` keeps, oldest
        first; `live`: only those a read still returns (`matching`)."""
        return [i for i, shown in self.matching(session_ids, rule) if shown or not live]

    def matching(
        self, session_ids: Sequence[int] | None, rule: EpisodeFilter
    ) -> list[tuple[int, bool]]:
        """(id, whether a read still returns it: not past its expiry, nor hidden by its
        project's retention) of the episodes within the sessions given (all when None) that
        `rule` keeps, oldest first."""
        if session_ids is not None and not session_ids:
            return []
        where, params = self._filter_sql(rule)
        if session_ids is not None:
            where.append("session_id IN (SELECT value FROM json_each(?))")
            params.append(json.dumps([int(i) for i in session_ids]))
        sql = f"SELECT id, {LIVE} FROM episodes"
        sql += f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._rows(sql + " ORDER BY occurred_at, id", [now_text(), *params])
        return [(int(row[0]), bool(row[1])) for row in rows]

    # The engine's aggregate of ids as one comma-separated text.
    ID_LIST = "group_concat(id)"

    def kept_ids(self, session_ids: Sequence[int] | None, rule: EpisodeFilter) -> list[int]:
        """The live episodes within the sessions given (all when None) that `rule` keeps,
        in no order: what a search ranks among."""
        return self._kept_ids(session_ids, self._filter_sql(rule))

    def _kept_ids(self, session_ids: Sequence[int] | None, filtered: Where) -> list[int]:
        """`kept_ids` for a filter's SQL. Read as one text (a time window's from a covering
        index): half the time of a row each at 10,000 ids."""
        if session_ids is not None and not session_ids:
            return []
        where, params = [*filtered[0]], [*filtered[1]]
        where.append(LIVE)
        params.append(now_text())
        if session_ids is not None:
            where.append("session_id IN (SELECT value FROM json_each(?))")
            params.append(json.dumps([int(i) for i in session_ids]))
        sql = f"SELECT {self.ID_LIST} FROM episodes WHERE {' AND '.join(where)}"
        return joined_ids(self.connection().execute(sql, params))

    def turns_after(self, ids: Sequence[int]) -> list[int]:
        """The turn just after each of these in its session, where it is not one of them:
        whose context inserting them changed."""
        return neighbours.turns_after(self.connection(), ids, self.ID_LIST)

    # The engine's aggregate of rows as one JSON array of arrays (`{}`: the columns).
    ROWS_AS_JSON = "json_group_array(json_array({}))"

    def delete_episodes(self, ids: Sequence[int]) -> list[int]:
        """Deletes these episodes (and, by cascade, their index entries, entity links and
        import keys) in one transaction of a few statements (`neighbours`); returns those
        that were there."""
        listed = json.dumps([int(i) for i in ids])
        with self.atomic() as conn:
            sql = (
                f"SELECT {self.ID_LIST} FROM episodes WHERE id IN (SELECT value FROM json_each(?))"
            )
            found = set(joined_ids(conn.execute(sql, (listed,))))
            if not found:
                return []
            after = neighbours.turns_after(conn, ids, self.ID_LIST)
            conn.execute(
                "DELETE FROM episodes WHERE id IN (SELECT value FROM json_each(?))", (listed,)
            )
            neighbours.refresh_after_deleting(conn, after, self.ROWS_AS_JSON)
        return [i for i in ids if i in found]

    def expired_ids(self, limit: int = 1000) -> list[int]:
        """Episodes past their `expires_at`, soonest first: what the upkeep deletes."""
        sql = "SELECT id FROM episodes WHERE expires_at <= ? ORDER BY expires_at, id LIMIT ?"
        return _ids(self._rows(sql, [now_text(), limit]))

    def _filter_sql(self, rule: EpisodeFilter) -> Where:
        where: list[str] = []
        params: list[object] = []
        if rule.after is not None:
            where.append("occurred_at >= ?")
            params.append(rule.after)
        if rule.before is not None:
            where.append("occurred_at < ?")
            params.append(rule.before)
        if rule.speakers:
            where.append(f"speaker IN ({_marks(rule.speakers)})")
            params += rule.speakers
        for key, values in rule.metadata:
            # The labels index holds each top-level value as text ('travel', '1', 'true'),
            # and a number's value as a number too, kept by the engine's triggers: no
            # episode's JSON is read, and 1 matches 1.0.
            numbers = [float(v) for v in values if _JSON_NUMBER.fullmatch(v)]
            numbers = [n for n in numbers if math.isfinite(n)]
            either = f" OR number IN ({_marks(numbers)})" if numbers else ""
            where.append(
                "id IN (SELECT episode_id FROM episode_labels"
                f" WHERE key = ? AND (value IN ({_marks(values)}){either}))"
            )
            params += [key, *values, *numbers]
        return where, params

    # -- keyword search -----------------------------------------------------------------

    def search_keyword(
        self,
        query: str,
        limit: int = 20,
        session_ids: Sequence[int] | None = None,
        budget: int = 0,
        rule: EpisodeFilter | None = None,
    ) -> list[Episode]:
        """Episodes matching the words of `query`, best BM25 first, within the sessions given
        (all when None; none when empty). Query syntax in `query` is searched for, never
        parsed. With a `budget`, the query's commonest terms are left out past that many
        index entries (`keywords.within_budget`); 0 searches every term, as the spec says.
        With a `rule`, only the episodes it keeps are ranked: `limit` of them come back
        whenever that many match."""
        where = None if rule is None or rule.is_empty() else self._filter_sql(rule)
        return self._keyword_search(query, limit, session_ids, budget, where)

    def episode_ids(self) -> list[int]:
        return _ids(self._rows("SELECT id FROM episodes ORDER BY id"))

    def count_episodes(
        self, session_id: int | None = None, rule: EpisodeFilter | None = None
    ) -> int:
        """The episodes a read can return: those past their deadline, which the upkeep has
        yet to delete, are not counted; of a session, those `rule` keeps."""
        now = now_text()
        if session_id is None:
            # The whole table less the expired ones, which a partial index counts.
            sql = (
                "SELECT (SELECT count(*) FROM episodes)"
                " - (SELECT count(*) FROM episodes WHERE expires_at <= ?)"
            )
            return int(self._rows(sql, [now])[0][0])
        where, params = self._session_where(session_id, rule)
        return int(self._rows(f"SELECT count(*) FROM episodes WHERE {where}", params)[0][0])

    def count_projects(self) -> int:
        return int(self._rows("SELECT count(*) FROM projects")[0][0])

    def count_sessions(self, project_id: int | None = None) -> int:
        if project_id is None:
            return int(self._rows("SELECT count(*) FROM sessions")[0][0])
        sql = "SELECT count(*) FROM sessions WHERE project_id = ?"
        return int(self._rows(sql, [project_id])[0][0])

    @staticmethod
    def _episode_from_row(row: Any, score: float | None = None) -> Episode:
        """An episode from a row of `EPISODE_COLUMNS`, by place; the empty metadata most
        episodes carry is not parsed."""
        episode_id, session_id, speaker, content, occurred_at, created_at = row[:6]
        metadata, caption, search_text, context_text = row[6:10]
        standing, pinned, expires_at, expiry_asked = row[10:SCORE_AT]
        return Episode(
            episode_id,
            session_id,
            speaker,
            content,
            occurred_at,
            created_at,
            {} if metadata == "{}" else json.loads(metadata),
            caption,
            search_text,
            context_text,
            score,
            standing,
            bool(pinned),
            expires_at,
            expiry_asked,
        )


MAX_RETENTION_DAYS = 36_500


def deadline(asked: str | None, occurred_at: str, days: int | None) -> str | None:
    """When an episode stops being returned: the sooner of its own expiry (`asked`) and
    its time plus its project's retention, if the project has one."""
    if days is None:
        return asked
    try:
        kept = to_utc_text(datetime.fromisoformat(occurred_at) + timedelta(days=days))
    except OverflowError:  # said near the year 9999: kept past the calendar's end
        return asked
    return kept if asked is None else min(asked, kept)


def _check_retention(days: int | None) -> None:
    if days is not None and not 1 <= days <= MAX_RETENTION_DAYS:
        raise InvalidInput(f"retentionDays must be 1 to {MAX_RETENTION_DAYS}, or null")


def _retention(conn: Connection, session_id: int) -> int | None:
    found = conn.execute(
        "SELECT p.retention_days FROM sessions s JOIN projects p ON p.id = s.project_id"
        " WHERE s.id = ?",
        (session_id,),
    ).fetchone()
    return None if found is None or found[0] is None else int(found[0])


def _renew_deadlines(conn: Connection, where: str, params: list[object]) -> None:
    """Each chosen episode's deadline (`e` in `where`) from its own expiry, its time and
    its project's retention: after either changes. An episode already past its deadline
    stays gone, whether or not the upkeep has deleted it yet: lifting a retention brings
    back nothing it hid."""
    rows = conn.execute(
        "SELECT e.id, e.occurred_at, e.expiry_asked, p.retention_days FROM episodes e"
        " JOIN sessions s ON s.id = e.session_id LEFT JOIN projects p ON p.id = s.project_id"
        f" WHERE ({where}) AND {LIVE.replace('expires_at', 'e.expires_at')}",
        [*params, now_text()],
    ).fetchall()
    changed = [(deadline(asked, when, days), episode_id) for episode_id, when, asked, days in rows]
    conn.executemany("UPDATE episodes SET expires_at = ? WHERE id = ?", changed)


@dataclass(frozen=True)
class _Row:
    speaker: str
    content: str
    occurred_at: str
    metadata: dict[str, Any]
    image_caption: str | None
    pinned: bool = False
    expires_at: str | None = None


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: objects merge key by key, recursively; `null` removes a
    key; anything else replaces what was there."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _metadata_json(metadata: dict[str, Any]) -> str:
    """Metadata as the JSON stored, or InvalidInput naming the first value JSON has no
    number for (NaN, Infinity, or 1e400, which Python's parser reads as infinity)."""
    try:
        return json.dumps(metadata, ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise InvalidInput(
            f"{_non_finite('metadata', metadata)}: JSON has no NaN or Infinity;"
            " give a finite number, or the value as a string"
        ) from None


def _non_finite(path: str, value: Any) -> str:
    """The path of the first non-finite number in `value` (`metadata.k`, `metadata.k[2]`)."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        where = f"{path}[{key}]" if isinstance(value, list) else f"{path}.{key}"
        if isinstance(item, float) and not math.isfinite(item):
            return where
        if isinstance(item, dict | list) and (found := _non_finite(where, item)) != where:
            return found
    return path


def _edited(
    current: Episode,
    content: str | None,
    speaker: str | None,
    metadata: dict[str, Any] | _Unset | None,
    image_caption: str | _Unset | None,
    occurred_at: datetime | None,
) -> NewEpisode:
    return NewEpisode(
        speaker=current.speaker if speaker is None else speaker,
        content=current.content if content is None else content,
        occurred_at=occurred_at,
        metadata=(
            current.metadata
            if isinstance(metadata, _Unset)
            else merge_patch(current.metadata, metadata or {})
            if metadata is not None
            else {}
        ),
        image_caption=current.image_caption if isinstance(image_caption, _Unset) else image_caption,
    )


def _search_text(row: _Row) -> str:
    return compose_search_text(row.speaker, row.content, row.image_caption)


def _rewrite(conn: Connection, episode_id: int, row: _Row) -> None:
    text = _search_text(row)
    conn.execute(
        "UPDATE episodes SET speaker = ?, content = ?, metadata = ?, image_caption = ?,"
        " occurred_at = ?, search_text = ?, search_cjk = ?, standing = ? WHERE id = ?",
        (
            row.speaker,
            row.content,
            json.dumps(row.metadata, ensure_ascii=False),
            row.image_caption,
            row.occurred_at,
            text,
            keywords.cjk_text(text),
            standing_kind(row.speaker, row.content),
            episode_id,
        ),
    )


def _texts(episode: NewEpisode) -> list[tuple[str, Any]]:
    return [
        ("speaker", episode.speaker),
        ("content", episode.content),
        ("imageCaption", episode.image_caption),
        ("metadata", episode.metadata),
    ]


def _required_text(name: str, value: str, max_chars: int | None) -> str:
    if not isinstance(value, str) or _blank(value):
        raise InvalidInput(f"{name} must not be empty or only whitespace")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidInput(f"{name} is {len(value)} characters; the limit is {max_chars}")
    return value


# A filter's value that reads as a JSON number compares as one with the labels' numbers.
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _blank(value: str) -> bool:
    """Nothing but white space and invisible format characters (a zero-width space, a
    byte-order mark): nothing a reader or a search sees."""
    return all(c.isspace() or unicodedata.category(c) == "Cf" for c in value)


_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def _speaker(value: str) -> str:
    """A speaker is one line: a line break in it would forge a line of the prompt."""
    speaker = _required_text("speaker", value, 200)
    if any(c in _LINE_BREAKS for c in speaker):
        raise InvalidInput("speaker: a speaker is one line; remove its line breaks")
    return speaker


def _optional_text(name: str, value: str | None, max_chars: int) -> str | None:
    return None if value is None else _required_text(name, value, max_chars)


def _marks(values: Sequence[object]) -> str:
    """A placeholder for each of a few text values (an id list goes as JSON instead)."""
    return ", ".join("?" * len(values))


def _ids(rows: Iterable[Any]) -> list[int]:
    return [int(row[0]) for row in rows]


def disk_full(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return "database or disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno == errno.ENOSPC
