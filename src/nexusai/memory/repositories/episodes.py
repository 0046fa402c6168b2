"""Episodes: every message, its text as searched and as read with the turn before it,
its deadline, and the filters that choose among them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from nexusai import keywords
from nexusai.errors import NotFound
from nexusai.memory.dbapi import Connection, inserted_id, joined_ids
from nexusai.memory.repositories import neighbours
from nexusai.memory.repositories.base import Database, Repository, ids_of
from nexusai.memory.repositories.columns import (
    EPISODE_COLUMNS,
    LIVE,
    Where,
    episode_from_row,
)
from nexusai.memory.repositories.deadlines import renew_deadlines, retention
from nexusai.memory.repositories.derived import VectorState, set_vectors
from nexusai.memory.repositories.filters import filter_sql
from nexusai.memory.repositories.sessions import Sessions
from nexusai.memory.repositories.validation import (
    UNSET,
    Limits,
    Row,
    Unset,
    deadline,
    edited,
    row_of,
    search_text,
    validated,
)
from nexusai.memory.standing import standing_kind
from nexusai.models import Episode, EpisodeFilter, NewEpisode, finds_nothing, now_text, to_utc_text


class Episodes(Repository):
    def __init__(self, db: Database, sessions: Sessions, limits: Limits) -> None:
        super().__init__(db)
        self.sessions = sessions
        self.limits = limits

    # -- writes -------------------------------------------------------------------------

    def add(self, session_id: int, episodes: Sequence[NewEpisode]) -> list[Episode]:
        """Stores the episodes in one transaction: all of them, or (on bad input) none."""
        rows = validated(episodes, self.limits)
        with self.db.atomic() as conn:
            self.sessions.get(session_id)
            ids = [self.insert(conn, session_id, row) for row in rows]
        return self.get_many(ids, expired=True)  # what was stored, already past or not

    def add_named(
        self, project: str | None, title: str, episodes: Sequence[NewEpisode]
    ) -> list[Episode]:
        """`add` into the session `Sessions.resolve` names, in one transaction: a batch
        that is refused leaves no project or session behind."""
        rows = validated(episodes, self.limits)
        with self.db.atomic() as conn:
            session_id = self.sessions.resolve(project, title).id
            ids = [self.insert(conn, session_id, row) for row in rows]
        return self.get_many(ids, expired=True)  # what was stored, already past or not

    def check(self, episodes: Sequence[NewEpisode]) -> None:
        """Refuses, as `add` would, what it would refuse; writes nothing (an import checks
        a whole file so before it writes any of it)."""
        validated(episodes, self.limits)

    def insert(self, conn: Connection, session_id: int, row: Row) -> int:
        """Writes one checked row in the caller's transaction, and reads the turn after it
        anew."""
        d = self.dialect
        previous = neighbours.context_before(conn, d, session_id, row.occurred_at, None)
        text = search_text(row)  # once: both the text and its CJK bigrams are stored
        kept_for = retention(conn, d, session_id)
        cursor = conn.execute(
            self.sql(
                "INSERT INTO episodes (session_id, speaker, content, occurred_at, created_at,"
                " metadata, search_text, context_text, image_caption, search_cjk, standing,"
                " pinned, expires_at, expiry_asked)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
            ),
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
        neighbours.refresh_context_after(conn, d, session_id, row.occurred_at, episode_id)
        return episode_id

    def update(
        self,
        episode_id: int,
        *,
        content: str | None = None,
        speaker: str | None = None,
        metadata: dict[str, Any] | Unset | None = UNSET,
        image_caption: str | Unset | None = UNSET,
        occurred_at: datetime | None = None,
        pinned: bool | None = None,
        expires_at: datetime | Unset | None = UNSET,
    ) -> Episode:
        """Changes what is given. `metadata` is a JSON merge patch (RFC 7396) over the
        stored metadata (None clears it); `image_caption` None removes the caption. A new
        text or time re-indexes the episode and the turns it is now read with."""
        with self.db.atomic() as conn:
            # Read inside the write: a merge patch over a row another write just changed
            # would undo that write.
            current = self.get(episode_id)
            if pinned is not None:
                sql = self.sql("UPDATE episodes SET pinned = ? WHERE id = ?")
                conn.execute(sql, (pinned, episode_id))
            if not isinstance(expires_at, Unset):
                when = None if expires_at is None else to_utc_text(expires_at)
                sql = self.sql("UPDATE episodes SET expiry_asked = ? WHERE id = ?")
                conn.execute(sql, (when, episode_id))
            texts = (content, speaker, occurred_at)
            marks = (metadata, image_caption)
            if any(v is not None for v in texts) or any(v is not UNSET for v in marks):
                changed = edited(current, content, speaker, metadata, image_caption, occurred_at)
                self._edit(conn, current, changed, occurred_at is None)
            if not isinstance(expires_at, Unset) or occurred_at is not None:
                renew_deadlines(conn, self.dialect, "e.id = ?", [episode_id])
        [stored] = self.get_many([episode_id], expired=True)  # set to expire, it is
        return stored

    def _edit(
        self, conn: Connection, current: Episode, changed: NewEpisode, same_time: bool
    ) -> None:
        """An edit's row written, re-indexed, and the turns around it read anew. Only for
        an edit: a rewrite marks the row's keyword entries changed."""
        d = self.dialect
        row = row_of(changed, self.limits)
        if same_time:
            row = replace(row, occurred_at=current.occurred_at)
        episode_id, session_id = current.id, current.session_id
        self._rewrite(conn, episode_id, row)
        context = neighbours.context_before(conn, d, session_id, row.occurred_at, episode_id)
        sql = self.sql("UPDATE episodes SET context_text = ? WHERE id = ?")
        conn.execute(sql, (context, episode_id))
        if (search_text(row), context) != (current.search_text, current.context_text):
            set_vectors(conn, d, [episode_id], VectorState.PENDING)
        # The turns after its old place and after its new one are read with another now.
        neighbours.refresh_context_after(conn, d, session_id, current.occurred_at, episode_id)
        neighbours.refresh_context_after(conn, d, session_id, row.occurred_at, episode_id)

    def _rewrite(self, conn: Connection, episode_id: int, row: Row) -> None:
        text = search_text(row)
        conn.execute(
            self.sql(
                "UPDATE episodes SET speaker = ?, content = ?, metadata = ?, image_caption = ?,"
                " occurred_at = ?, search_text = ?, search_cjk = ?, standing = ? WHERE id = ?"
            ),
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

    def delete(self, episode_id: int) -> Episode:
        """Deletes the episode; returns it as it was."""
        with self.db.atomic() as conn:
            episode = self.get(episode_id)
            conn.execute(self.sql("DELETE FROM episodes WHERE id = ?"), (episode.id,))
            neighbours.refresh_context_after(
                conn, self.dialect, episode.session_id, episode.occurred_at, episode.id
            )
        return episode

    def delete_many(self, ids: Sequence[int]) -> list[int]:
        """Deletes these episodes (and, by cascade, their index entries, entity links and
        import keys) in one transaction of a few statements (`neighbours`); returns those
        that were there."""
        listed = self.dialect.id_param(ids)
        with self.db.atomic() as conn:
            sql = self.sql("SELECT {id_list} FROM episodes WHERE id IN {ids}")
            found = set(joined_ids(conn.execute(sql, (listed,))))
            if not found:
                return []
            after = neighbours.turns_after(conn, self.dialect, ids)
            conn.execute(self.sql("DELETE FROM episodes WHERE id IN {ids}"), (listed,))
            neighbours.refresh_after_deleting(conn, self.dialect, after)
        return [i for i in ids if i in found]

    # -- reads --------------------------------------------------------------------------

    def get(self, episode_id: int) -> Episode:
        sql = f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE id = ? AND {LIVE}"
        row = self._one(sql, [episode_id, now_text()])
        if row is None:
            raise NotFound(f"episode {episode_id} does not exist")
        return episode_from_row(row)

    def get_many(
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
            f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE id IN {{ids}}{live}",
            [self.dialect.id_param(ids), *params],
        )
        scored = scores or {}
        by_id = {row[0]: episode_from_row(row, scored.get(row[0])) for row in rows}
        return [by_id[i] for i in ids if i in by_id]

    def page(
        self,
        session_id: int,
        limit: int = 100,
        offset: int = 0,
        rule: EpisodeFilter | None = None,
    ) -> list[Episode]:
        """A session's episodes in time order (ties in insertion order); with `rule`, only
        those it keeps (a metadata value is found through the labels index)."""
        self.sessions.get(session_id)
        where, params = _session_where(session_id, rule)
        rows = self._rows(
            f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE {where}"
            " ORDER BY occurred_at, id LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [episode_from_row(row) for row in rows]

    def recent(self, session_id: int, limit: int) -> list[Episode]:
        """The last `limit` episodes of a session, oldest first."""
        rows = self._rows(
            f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE session_id = ? AND {LIVE}"
            " ORDER BY occurred_at DESC, id DESC LIMIT ?",
            [session_id, now_text(), limit],
        )
        return [episode_from_row(row) for row in reversed(rows)]

    def standing(
        self, session_ids: Sequence[int] | None, limit: int, rule: EpisodeFilter | None = None
    ) -> list[Episode]:
        """The pinned and standing episodes (`memory/standing.py`) within the sessions given
        (all when None) that `rule` keeps, pinned first, then the newest."""
        if finds_nothing(session_ids, limit):
            return []
        clauses, params = filter_sql(rule or EpisodeFilter())
        where = " AND ".join(["(standing IS NOT NULL OR pinned)", *clauses])
        if session_ids is not None:
            where += " AND session_id IN {ids}"
            params.append(self.dialect.id_param(session_ids))
        # The ids sorted first, then their rows: sorting whole rows (long texts and what
        # the indexes see) took ten times as long at a thousand standing episodes.
        ids = self._rows(
            f"SELECT id FROM episodes WHERE {where}"
            " ORDER BY pinned DESC, occurred_at DESC, id DESC LIMIT ?",
            [*params, limit],
        )
        return self.get_many(ids_of(ids))

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
        where, params = filter_sql(rule)
        if session_ids is not None:
            where.append("session_id IN {ids}")
            params.append(self.dialect.id_param(session_ids))
        sql = f"SELECT id, {LIVE} FROM episodes"
        sql += f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._rows(sql + " ORDER BY occurred_at, id", [now_text(), *params])
        return [(int(row[0]), bool(row[1])) for row in rows]

    def kept_ids(self, session_ids: Sequence[int] | None, rule: EpisodeFilter | Where) -> list[int]:
        """The live episodes within the sessions given (all when None) that `rule` (or its
        SQL) keeps, in no order: what a search ranks among. Read as one text (a time
        window's from a covering index): half the time of a row each at 10,000 ids."""
        if session_ids is not None and not session_ids:
            return []
        filtered = filter_sql(rule) if isinstance(rule, EpisodeFilter) else rule
        where, params = [*filtered[0], LIVE], [*filtered[1], now_text()]
        if session_ids is not None:
            where.append("session_id IN {ids}")
            params.append(self.dialect.id_param(session_ids))
        sql = f"SELECT {{id_list}} FROM episodes WHERE {' AND '.join(where)}"
        return joined_ids(self.db.connection().execute(self.sql(sql), params))

    def turns_after(self, ids: Sequence[int]) -> list[int]:
        """The turn just after each of these in its session, where it is not one of them:
        whose context inserting them changed."""
        return neighbours.turns_after(self.db.connection(), self.dialect, ids)

    def expired_ids(self, limit: int = 1000) -> list[int]:
        """Episodes past their `expires_at`, soonest first: what the upkeep deletes."""
        sql = "SELECT id FROM episodes WHERE expires_at <= ? ORDER BY expires_at, id LIMIT ?"
        return ids_of(self._rows(sql, [now_text(), limit]))

    def ids(self) -> list[int]:
        return ids_of(self._rows("SELECT id FROM episodes ORDER BY id"))

    def count(self, session_id: int | None = None, rule: EpisodeFilter | None = None) -> int:
        """The episodes a read can return: those past their deadline, which the upkeep has
        yet to delete, are not counted; of a session, those `rule` keeps."""
        if session_id is None:
            # The whole table less the expired ones, which a partial index counts.
            sql = (
                "SELECT (SELECT count(*) FROM episodes)"
                " - (SELECT count(*) FROM episodes WHERE expires_at <= ?)"
            )
            return self._count(sql, [now_text()])
        where, params = _session_where(session_id, rule)
        return self._count(f"SELECT count(*) FROM episodes WHERE {where}", params)


def _session_where(session_id: int, rule: EpisodeFilter | None) -> tuple[str, list[Any]]:
    """A session's live episodes that `rule` keeps, as SQL and its parameters."""
    where, params = filter_sql(rule) if rule is not None else ([], [])
    clauses = ["session_id = ?", LIVE, *where]
    return " AND ".join(clauses), [session_id, now_text(), *params]
