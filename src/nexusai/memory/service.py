"""The memory service in-process: the SQLite store (the truth) plus the vectors derived from it.

Write path: an episode commits in SQLite first, marked `pending`; then it is embedded and
upserted, and marked `indexed`. A crash or an embedder failure between the two loses
nothing: pending episodes are retried on the next write, at start-up and by `nexus reindex`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from nexusai.config import Config
from nexusai.embedders import Embedder, Vector, create_embedder
from nexusai.errors import ConfigError
from nexusai.memory import fts
from nexusai.memory.chunks import EpisodeVectors, windows
from nexusai.memory.entities import (
    Entity,
    Extractor,
    create_extractor,
    entity_from_row,
    entity_sessions,
    entity_text,
    normalize,
    record_mentions,
)
from nexusai.memory.models import Episode, NewEpisode
from nexusai.memory.store import ImportedSession, Store
from nexusai.memory.vectors import VectorIndex, VectorPoint, open_vector_index

log = logging.getLogger("nexusai.memory")

Progress = Callable[[int], None]


class EmbedderMismatch(ConfigError):
    pass


def check_embedder(store: Store, embedder: Embedder) -> None:
    """The vectors in a store are only comparable with queries from the same embedder."""
    name, dimension = store.get_meta("embedder"), store.get_meta("embedder_dimension")
    if name is None:
        record_embedder(store, embedder)
    elif (name, int(dimension or 0)) != (embedder.name, embedder.dimension):
        raise EmbedderMismatch(
            f"this store's vectors were made by {name} ({dimension} dimensions), but the "
            f"configured embedder is {embedder.name} ({embedder.dimension} dimensions). Run "
            "`nexus reindex` to rebuild the vectors with the configured embedder, or set "
            "NEXUS_EMBEDDER back."
        )


def record_embedder(store: Store, embedder: Embedder) -> None:
    store.set_meta("embedder", embedder.name)
    store.set_meta("embedder_dimension", str(embedder.dimension))


def embedding_texts(episode: Episode, window_chars: int) -> list[str]:
    """What is embedded for an episode: its text in windows, the first with the end of the
    turn before it (one vector for a reply and what it answers). The episode comes before
    that context because the model reads only so far, and because it measured better on
    LoCoMo (semantic recall@10 0.455 with the turn before first, 0.503 after)."""
    return windows(episode.search_text or episode.content, episode.context_text, window_chars)


class Memory:
    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        vectors: VectorIndex,
        batch_size: int = 256,
        extractor: Extractor | None = None,
        entity_vectors: VectorIndex | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.vectors = EpisodeVectors(vectors)
        self.batch_size = batch_size
        self.extractor = extractor
        self.entity_vectors = entity_vectors
        self.stopping = threading.Event()

    @classmethod
    def open(
        cls,
        config: Config,
        embedder: Embedder | None = None,
        *,
        check: bool = True,
        extractor: Extractor | None = None,
    ) -> Memory:
        """Opens the store and its vector indexes; `check=False` skips the embedder identity
        check (for `nexus reindex`, which rebuilds the vectors anyway). The extractor comes
        from NEXUS_EXTRACTOR unless one is given."""
        embedder = embedder or create_embedder(config)
        extractor = extractor or create_extractor(config)
        store = Store(config.db_path, max_content_bytes=config.max_content_bytes)
        try:
            if check:
                check_embedder(store, embedder)
            vectors = open_vector_index(config, "episodes", embedder.dimension)
            entity_vectors = open_vector_index(config, "entities", embedder.dimension)
        except BaseException:
            store.close()
            raise
        return cls(store, embedder, vectors, extractor=extractor, entity_vectors=entity_vectors)

    def close(self) -> None:
        self.stopping.set()
        if self.entity_vectors:
            self.entity_vectors.close()
        self.vectors.close()
        self.store.close()

    # -- writes -----------------------------------------------------------------------

    def add_episodes(self, session_id: int, episodes: Sequence[NewEpisode]) -> list[Episode]:
        stored = self.store.add_episodes(session_id, episodes)
        if self.index(stored):
            self.sync_pending(max_batches=1)
        self.extract(stored)
        return stored

    def import_conversation(
        self, sessions: Sequence[ImportedSession], project_id: int | None
    ) -> tuple[int, int, int]:
        """One conversation from an import: written atomically, then embedded in batches.
        Returns (new sessions, new episodes, skipped episodes)."""
        new_sessions, ids, skipped = self.store.import_sessions(sessions, project_id)
        for start in range(0, len(ids), self.batch_size):
            batch = self.store.get_episodes(ids[start : start + self.batch_size])
            self.index(batch)
            self.extract(batch)
        return new_sessions, len(ids), skipped

    def update_episode(self, episode_id: int, **changes: Any) -> Episode:
        episode = self.store.update_episode(episode_id, **changes)
        self.sync_pending(max_batches=1)
        return episode

    def delete_episode(self, episode_id: int) -> None:
        self.store.delete_episode(episode_id)
        self._delete_vectors([episode_id])
        self.sync_pending(max_batches=1)  # the turn after it is now read with another

    def delete_session(self, session_id: int) -> None:
        self._delete_vectors(self.store.delete_session(session_id))

    def delete_project(self, project_id: int) -> None:
        self._delete_vectors(self.store.delete_project(project_id))

    def _delete_vectors(self, ids: list[int]) -> None:
        # The rows are gone already; a vector left behind is never returned, since
        # semantic results are joined back to rows, and `nexus doctor` removes it.
        try:
            self.vectors.delete(ids)
        except Exception:
            log.exception("could not delete %d vectors", len(ids))

    # -- vectors ------------------------------------------------------------------------

    def index(self, episodes: Sequence[Episode]) -> bool:
        """Embeds and upserts the episodes, then marks them indexed. False on failure (they
        stay pending, to be retried)."""
        if not episodes:
            return True
        try:
            for start in range(0, len(episodes), self.batch_size):
                self._index_batch(episodes[start : start + self.batch_size])
        except Exception as exc:
            log.warning("indexing %d episodes failed, will retry: %s", len(episodes), exc)
            return False
        return True

    def _index_batch(self, batch: Sequence[Episode]) -> None:
        texts = [embedding_texts(e, self.embedder.window_chars) for e in batch]
        vectors = iter(self.embedder.embed([t for episode in texts for t in episode]))
        self.vectors.upsert(
            [
                (e.id, [next(vectors) for _ in episode], e.session_id)
                for e, episode in zip(batch, texts, strict=True)
            ]
        )
        self.store.set_vector_state([e.id for e in batch], "indexed")

    def sync_pending(self, max_batches: int | None = None, progress: Progress | None = None) -> int:
        """Indexes pending episodes, oldest first; returns how many were indexed."""
        done = batches = 0
        while (max_batches is None or batches < max_batches) and not self.stopping.is_set():
            ids = self.store.pending_vector_ids(self.batch_size)
            if not ids or not self.index(self.store.get_episodes(ids)):
                break
            done += len(ids)
            batches += 1
            if progress:
                progress(len(ids))
        return done

    def reindex(self, progress: Progress | None = None) -> int:
        """Rebuilds every vector from SQLite with the configured embedder, and extracts the
        entities of episodes that have not been through extraction."""
        self.vectors.reset(self.embedder.dimension)
        if self.entity_vectors:
            self.entity_vectors.reset(self.embedder.dimension)
            with self.store.atomic() as conn:
                conn.execute("UPDATE entities SET vector_state = 'pending'")
        self.store.mark_all_vectors_pending()
        record_embedder(self.store, self.embedder)
        done = self.sync_pending(progress=progress)
        self.sync_entities()
        return done

    # -- entities -----------------------------------------------------------------------

    def extract(self, episodes: Sequence[Episode]) -> bool:
        """Finds the entities the episodes mention and indexes them. A failure is logged and
        leaves the episodes pending for extraction; it never undoes their write."""
        if self.extractor is None or not episodes:
            return True
        try:
            found = self.extractor.extract([e.content for e in episodes])
            touched: set[int] = set()
            with self.store.atomic() as conn:
                for episode, mentions in zip(episodes, found, strict=True):
                    touched.update(record_mentions(conn, episode, mentions))
            self._index_entities(self._needing_vectors(sorted(touched)))
        except Exception as exc:
            log.warning(
                "entity extraction for %d episodes failed, will retry: %s", len(episodes), exc
            )
            return False
        return True

    def _needing_vectors(self, ids: Sequence[int]) -> list[int]:
        rows = self.store.read(
            "SELECT id FROM entities WHERE vector_state = 'pending'"
            " AND id IN (SELECT value FROM json_each(?))",
            [json.dumps(list(ids))],
        )
        return [int(row[0]) for row in rows]

    def _index_entities(self, ids: Sequence[int]) -> None:
        if not ids or self.entity_vectors is None:
            return
        conn = self.store.connection()
        entities = self.get_entities(ids)
        vectors = self.embedder.embed([entity_text(conn, e) for e in entities])
        points = [
            VectorPoint(e.id, v, entity_sessions(conn, e.id))
            for e, v in zip(entities, vectors, strict=True)
        ]
        self.entity_vectors.upsert(points)
        with self.store.atomic() as write:
            write.executemany(
                "UPDATE entities SET vector_state = 'indexed' WHERE id = ?",
                [(e.id,) for e in entities],
            )

    def sync_entities(self, max_batches: int | None = None) -> int:
        """Extraction for episodes still pending it, and vectors for entities without one."""
        done = batches = 0
        while (max_batches is None or batches < max_batches) and not self.stopping.is_set():
            rows = self.store.read(
                "SELECT id FROM episodes WHERE entity_state = 'pending' ORDER BY id LIMIT ?",
                [self.batch_size],
            )
            if (
                self.extractor is None
                or not rows
                or not self.extract(self.store.get_episodes([r[0] for r in rows]))
            ):
                break
            done += len(rows)
            batches += 1
        stale = self.store.read("SELECT id FROM entities WHERE vector_state = 'pending'")
        for start in range(0, len(stale), self.batch_size):
            self._index_entities([r[0] for r in stale[start : start + self.batch_size]])
        return done

    def get_entities(self, ids: Sequence[int]) -> list[Entity]:
        """Entities in the order of `ids`; an id with no row is skipped."""
        conn = self.store.connection()
        rows = {
            row["id"]: row
            for row in conn.execute(
                "SELECT * FROM entities WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps([int(i) for i in ids]),),
            )
        }
        return [entity_from_row(conn, rows[i]) for i in ids if i in rows]

    def search_entities(
        self, vector: Sequence[float] | None, session_ids: Sequence[int], limit: int
    ) -> list[Entity]:
        """One filtered vector query: the entities of the scope nearest the query."""
        if vector is None or limit <= 0 or self.entity_vectors is None:
            return []
        hits = self.entity_vectors.search(vector, session_ids, [], limit)
        return self.get_entities([entity_id for entity_id, _ in hits])

    def entities_by_prefix(
        self, prefix: str, session_ids: Sequence[int], limit: int
    ) -> list[Entity]:
        """Entities of the scope whose name starts with `prefix`, most mentioned first."""
        rows = self.store.read(
            "SELECT DISTINCT n.id, n.mention_count FROM entities n"
            " JOIN entity_mentions m ON m.entity_id = n.id JOIN episodes e ON e.id = m.episode_id"
            " WHERE n.normalized LIKE ? ESCAPE '\\'"
            " AND e.session_id IN (SELECT value FROM json_each(?))"
            " ORDER BY n.mention_count DESC, n.id LIMIT ?",
            [_like_prefix(normalize(prefix)), json.dumps(list(session_ids)), limit],
        )
        return self.get_entities([row[0] for row in rows])

    def entity_mentions(self, entity_id: int, limit: int, offset: int) -> list[Episode]:
        """The episodes that mention an entity, newest first."""
        rows = self.store.read(
            "SELECT e.* FROM entity_mentions m JOIN episodes e ON e.id = m.episode_id"
            " WHERE m.entity_id = ? ORDER BY e.occurred_at DESC, e.id DESC LIMIT ? OFFSET ?",
            [entity_id, limit, offset],
        )
        return [self.store.episode_from_row(row) for row in rows]

    def embed_query(self, text: str) -> Vector | None:
        """The query vector, or None when the embedder fails (the turn goes on without it)."""
        try:
            return self.embedder.embed_one(text)
        except Exception as exc:
            log.warning("embedding the query failed: %s", exc)
            return None

    def search_vectors(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
    ) -> list[tuple[int, float]]:
        return self.vectors.search(vector, session_ids, exclude_ids, limit)

    # -- reads (what orchestration's MemoryClient asks for) -------------------------------

    def scope_session_ids(self, session_id: int) -> list[int]:
        return self.store.scope_session_ids(session_id)

    def recent_episodes(self, session_id: int, limit: int) -> list[Episode]:
        return self.store.recent_episodes(session_id, limit)

    def vector_episodes(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
    ) -> list[Episode]:
        hits = self.search_vectors(vector, session_ids, exclude_ids, limit)
        return self.store.get_episodes([episode_id for episode_id, _ in hits])

    def search_keyword(
        self, query: str, limit: int, session_ids: Sequence[int] | None
    ) -> list[Episode]:
        return fts.search_episodes(self.store, query, limit, session_ids)


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
