"""Entity memory: the entities episodes mention, stored once per scope (a project, or a
session without one) with their mentions, and their vectors for search.

Everything about stored entities lives here: the SQL, the vectors and the sync loop. The
triggers that keep mention counts and dates right however mentions go are in migration
m005 (SQLite runs them in the same transaction as the mention's write). What finds the
mentions in text is in `extractors`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from nexusai.embedders import Embedder
from nexusai.errors import first_line
from nexusai.memory import vector_state
from nexusai.memory.dbapi import Connection, inserted_id
from nexusai.memory.extractors import Extracted, Extractor, Mention, Outcome, Stopped, normalize
from nexusai.memory.store import LIVE, EpisodeStore
from nexusai.memory.vector_state import VectorState
from nexusai.memory.vectors import VectorIndex, VectorPoint
from nexusai.models import Entity, Episode, now_text

log = logging.getLogger("nexusai.entities")


class EntityMemory:
    def __init__(
        self,
        store: EpisodeStore,
        embedder: Embedder,
        vectors: VectorIndex | None,
        extractor: Extractor | None,
        stopping: threading.Event,
        batch_size: int = 256,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.vectors = vectors
        self.extractor = extractor
        self.batch_size = batch_size
        self._stopping = stopping

    # -- writes -----------------------------------------------------------------------

    def extract(self, episodes: Sequence[Episode]) -> bool:
        """Finds the entities the episodes mention and indexes them. A failure is logged and
        leaves the episodes pending for extraction; it never undoes their write. A message
        read in part, or that the extractor fails on alone, is done all the same, with a
        note saying so (`extraction_notes`): it is not read again at every start."""
        if self.extractor is None or not episodes:
            return True
        try:
            found = self._extracted(self.extractor, episodes)
            touched: set[int] = set()
            with self.store.atomic() as conn:
                for episode, extracted in zip(episodes, found, strict=True):
                    touched.update(_record_mentions(conn, episode, extracted.mentions))
                    _note(conn, episode.id, extracted)
            self._index(self._needing_vectors(sorted(touched)))
        except Stopped:
            return False
        except Exception as exc:
            log.warning(
                "entity extraction for %d episodes failed, will retry: %s", len(episodes), exc
            )
            return False
        return True

    def _extracted(self, extractor: Extractor, episodes: Sequence[Episode]) -> list[Extracted]:
        """The batch, or, when it fails and the failure is a message's own (the extractor
        still reads a plain sentence), each message alone: the one it fails on is noted as
        failed, not read again. An extractor that fails on anything (a remote LLM that is
        down) leaves the whole batch pending."""
        texts = [e.content for e in episodes]
        try:
            return extractor.extract_within(texts, self._stopping)
        except Stopped:
            raise
        except Exception:
            if not extractor.fails_per_message or not _still_reads(extractor):
                raise
        return [self._alone(extractor, episode) for episode in episodes]

    def _alone(self, extractor: Extractor, episode: Episode) -> Extracted:
        try:
            [found] = extractor.extract_within([episode.content], self._stopping)
        except Stopped:
            raise
        except Exception as exc:
            return Extracted([], Outcome.FAILED, first_line(exc))
        return found

    def sync(
        self, max_batches: int | None = None, progress: Callable[[int], None] | None = None
    ) -> int:
        """Extraction for episodes still pending it, and vectors for entities without one."""
        done = batches = 0
        while (max_batches is None or batches < max_batches) and not self._stopping.is_set():
            ids = vector_state.pending_extraction(self.store.connection(), self.batch_size)
            if self.extractor is None or not ids or not self.extract(self.store.get_episodes(ids)):
                break
            done += len(ids)
            batches += 1
            if progress:
                progress(len(ids))
        stale = self._needing_vectors(None)
        for start in range(0, len(stale), self.batch_size):
            self._index(stale[start : start + self.batch_size])
        return done

    def reset(self) -> None:
        """Drops every entity vector; each is made again by the next `sync`."""
        if self.vectors is None:
            return
        self.vectors.reset(self.embedder.dimension)
        with self.store.atomic() as conn:
            conn.execute("UPDATE entities SET vector_state = ?", (VectorState.PENDING.value,))

    def reconcile(self) -> None:
        """When the entity index lost vectors, every entity is marked for a new one (the
        next `sync` makes them; there are far fewer entities than episodes)."""
        if self.vectors is None:
            return
        indexed = (
            self.store.connection()
            .execute(
                "SELECT count(*) FROM entities WHERE vector_state = ?", (VectorState.INDEXED.value,)
            )
            .fetchone()[0]
        )
        if self.vectors.count() < int(indexed):
            with self.store.atomic() as conn:
                conn.execute("UPDATE entities SET vector_state = ?", (VectorState.PENDING.value,))

    def waiting_vectors(self) -> int:
        """Entities found but not yet searchable by meaning (their vector still to make)."""
        if self.vectors is None:
            return 0
        sql = "SELECT count(*) FROM entities WHERE vector_state = ?"
        return int(self.store.connection().execute(sql, [VectorState.PENDING.value]).fetchone()[0])

    def _needing_vectors(self, ids: Sequence[int] | None) -> list[int]:
        sql = "SELECT id FROM entities WHERE vector_state = ?"
        params: list[object] = [VectorState.PENDING.value]
        if ids is not None:
            sql += " AND id IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(list(ids)))
        return [int(row[0]) for row in self.store.connection().execute(sql, params)]

    def _index(self, ids: Sequence[int]) -> None:
        if not ids or self.vectors is None:
            return
        conn = self.store.connection()
        entities = self.get(ids)
        vectors = self.embedder.embed([_entity_text(conn, e) for e in entities])
        points = [
            VectorPoint(e.id, v, _entity_sessions(conn, e.id))
            for e, v in zip(entities, vectors, strict=True)
        ]
        self.vectors.upsert(points)
        with self.store.atomic() as write:
            write.executemany(
                "UPDATE entities SET vector_state = ? WHERE id = ?",
                [(VectorState.INDEXED.value, e.id) for e in entities],
            )

    # -- reads ------------------------------------------------------------------------

    def get(self, ids: Sequence[int]) -> list[Entity]:
        """Entities in the order of `ids`; an id with no row is skipped, and so is one
        mentioned only by expired episodes the upkeep has yet to delete. Nothing derived
        from an expired episode is returned: while one waits, counts and dates are read
        from the live mentions alone."""
        conn = self.store.connection()
        listed = json.dumps([int(i) for i in ids])
        rows = {
            row["id"]: dict(row)
            for row in conn.execute(
                "SELECT * FROM entities WHERE id IN (SELECT value FROM json_each(?))", (listed,)
            )
        }
        if _expired_waiting(conn):
            rows = _live_counts(conn, rows, listed)
        return [_entity_from_row(conn, rows[i]) for i in ids if i in rows]

    def search(
        self, vector: Sequence[float] | None, session_ids: Sequence[int], limit: int
    ) -> list[Entity]:
        """One filtered vector query: the entities of the scope nearest the query."""
        if vector is None or limit <= 0 or self.vectors is None or not session_ids:
            return []
        hits = self.vectors.search(vector, session_ids, [], limit)
        return self.get([entity_id for entity_id, _ in hits])

    def by_prefix(self, prefix: str, session_ids: Sequence[int], limit: int) -> list[Entity]:
        """Entities of the scope whose name starts with `prefix`, most mentioned first."""
        rows = self.store.connection().execute(
            "SELECT DISTINCT n.id, n.mention_count FROM entities n"
            " JOIN entity_mentions m ON m.entity_id = n.id JOIN episodes e ON e.id = m.episode_id"
            " WHERE n.normalized LIKE ? ESCAPE '\\'"
            f" AND e.session_id IN (SELECT value FROM json_each(?)) AND {_LIVE_E}"
            " ORDER BY n.mention_count DESC, n.id LIMIT ?",
            [_like_prefix(normalize(prefix)), json.dumps(list(session_ids)), now_text(), limit],
        )
        return self.get([row[0] for row in rows])

    def mentions(self, entity_id: int, limit: int, offset: int) -> list[Episode]:
        """The episodes that mention an entity, newest first."""
        rows = self.store.connection().execute(
            "SELECT m.episode_id FROM entity_mentions m JOIN episodes e ON e.id = m.episode_id"
            f" WHERE m.entity_id = ? AND {_LIVE_E}"
            " ORDER BY e.occurred_at DESC, e.id DESC LIMIT ? OFFSET ?",
            [entity_id, now_text(), limit, offset],
        )
        return self.store.get_episodes([int(row[0]) for row in rows])

    def scope_of(self, entity_id: int) -> str | None:
        """`p:<project>` or `s:<session>`; None when there is no such entity."""
        row = (
            self.store.connection()
            .execute("SELECT scope FROM entities WHERE id = ?", (entity_id,))
            .fetchone()
        )
        return None if row is None else str(row[0])

    def names_by_episode(self, episode_ids: Sequence[int]) -> dict[int, list[str]]:
        """The names of the entities each episode mentions, most mentioned first."""
        rows = self.store.connection().execute(
            "SELECT m.episode_id, n.name FROM entity_mentions m JOIN entities n"
            " ON n.id = m.entity_id WHERE m.episode_id IN (SELECT value FROM json_each(?))"
            " ORDER BY n.mention_count DESC, n.id",
            [json.dumps([int(i) for i in episode_ids])],
        )
        names: dict[int, list[str]] = {}
        for episode_id, name in rows:
            names.setdefault(int(episode_id), []).append(str(name))
        return names

    def count(self) -> int:
        return int(self.store.connection().execute("SELECT count(*) FROM entities").fetchone()[0])

    def close(self) -> None:
        if self.vectors is not None:
            self.vectors.close()


def _scope_key(conn: Connection, session_id: int) -> str:
    row = conn.execute("SELECT project_id FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return f"p:{row[0]}" if row and row[0] is not None else f"s:{session_id}"


def _still_reads(extractor: Extractor) -> bool:
    try:
        extractor.extract(["Maria flew to Lisbon."])
    except Exception:
        return False
    return True


def _note(conn: Connection, episode_id: int, extracted: Extracted) -> None:
    """What extraction left unread of a message, when it left anything."""
    if extracted.outcome is Outcome.WHOLE:
        return
    log.warning(
        "entity extraction of episode %d: %s%s",
        episode_id,
        extracted.outcome.value,
        f" ({extracted.detail})" if extracted.detail else "",
    )
    conn.execute(
        "INSERT INTO extraction_notes (episode_id, outcome, detail) VALUES (?, ?, ?)"
        " ON CONFLICT (episode_id) DO UPDATE SET outcome = excluded.outcome,"
        " detail = excluded.detail",
        (episode_id, extracted.outcome.value, extracted.detail),
    )


def _record_mentions(conn: Connection, episode: Episode, mentions: Sequence[Mention]) -> list[int]:
    """Links the episode to its entities, one per name in its scope (created when new);
    each mention keeps the type it was given. Returns the entities' ids."""
    scope = _scope_key(conn, episode.session_id)
    ids = []
    for mention in mentions:
        entity_id = _entity_for(conn, scope, mention, episode.occurred_at)
        conn.execute(
            "INSERT INTO entity_mentions (entity_id, episode_id, type) VALUES (?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            (entity_id, episode.id, mention.type),
        )
        _settle_type(conn, entity_id)
        ids.append(entity_id)
    vector_state.set_extracted(conn, episode.id)
    return ids


def _entity_for(conn: Connection, scope: str, mention: Mention, seen: str) -> int:
    key = normalize(mention.name)
    row = conn.execute(
        "SELECT id FROM entities WHERE scope = ? AND normalized = ?"
        " ORDER BY mention_count DESC, id LIMIT 1",
        (scope, key),
    ).fetchone()
    if row is not None:
        return int(row[0])
    cursor = conn.execute(
        "INSERT INTO entities (scope, name, normalized, type, first_seen, last_seen)"
        " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        (scope, mention.name, key, mention.type, seen, seen),
    )
    return inserted_id(cursor)


def _settle_type(conn: Connection, entity_id: int) -> None:
    """A name is one entity whatever types the recognizer gives its mentions ("Caroline" as
    a person and a place): its type is the one most mentions give (on a tie, the one its
    earliest episode gave). A new type means a new vector: the type is embedded with the
    name."""
    row = conn.execute(
        "SELECT type FROM entity_mentions WHERE entity_id = ? AND type IS NOT NULL"
        " GROUP BY type ORDER BY count(*) DESC, min(episode_id) LIMIT 1",
        (entity_id,),
    ).fetchone()
    if row is not None:
        conn.execute(
            "UPDATE entities SET type = ?, vector_state = ? WHERE id = ? AND type != ?",
            (row[0], VectorState.PENDING.value, entity_id, row[0]),
        )


_LIVE_E = LIVE.replace("expires_at", "e.expires_at")


def _expired_waiting(conn: Connection) -> bool:
    """Whether some episode is past its deadline but not deleted yet (one indexed probe)."""
    sql = "SELECT 1 FROM episodes WHERE expires_at <= ? LIMIT 1"
    return conn.execute(sql, (now_text(),)).fetchone() is not None


def _live_counts(conn: Connection, rows: dict[Any, Any], listed: str) -> dict[Any, Any]:
    """The entities among `rows` that a live episode mentions, their mention counts and
    dates counted over the live mentions only."""
    live = conn.execute(
        "SELECT m.entity_id, count(*), min(e.occurred_at), max(e.occurred_at)"
        " FROM entity_mentions m JOIN episodes e ON e.id = m.episode_id"
        f" WHERE m.entity_id IN (SELECT value FROM json_each(?)) AND {_LIVE_E}"
        " GROUP BY m.entity_id",
        (listed, now_text()),
    ).fetchall()
    counted = {}
    for entity_id, count, first, last in live:
        row = rows[entity_id]
        counted[entity_id] = {**row, "mention_count": count, "first_seen": first, "last_seen": last}
    return counted


def _entity_from_row(conn: Connection, row: Any, latest: int = 3) -> Entity:
    mentions = conn.execute(
        "SELECT m.episode_id FROM entity_mentions m JOIN episodes e ON e.id = m.episode_id"
        f" WHERE m.entity_id = ? AND {_LIVE_E} ORDER BY e.occurred_at DESC, e.id DESC LIMIT ?",
        (row["id"], now_text(), latest),
    ).fetchall()
    return Entity(
        row["id"],
        row["name"],
        row["type"],
        row["first_seen"],
        row["last_seen"],
        row["mention_count"],
        row["summary"],
        [int(m[0]) for m in mentions],
    )


def _entity_sessions(conn: Connection, entity_id: int) -> list[int]:
    """The sessions an entity is visible to: those of the episodes that mention it."""
    rows = conn.execute(
        "SELECT DISTINCT e.session_id FROM entity_mentions m JOIN episodes e ON e.id = m.episode_id"
        " WHERE m.entity_id = ? ORDER BY 1",
        (entity_id,),
    ).fetchall()
    return [int(r[0]) for r in rows]


def _entity_text(conn: Connection, entity: Entity) -> str:
    """What the entity's vector is made from: name, type, and a line of recent context."""
    context = ""
    if entity.latest_mention_ids:
        row = conn.execute(
            "SELECT content FROM episodes WHERE id = ?", (entity.latest_mention_ids[0],)
        ).fetchone()
        context = row[0][:200] if row else ""
    return f"{entity.name} ({entity.type}). {context}".strip()


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
