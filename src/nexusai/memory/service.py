"""The memory service in-process: the SQLite store (the truth) plus the vectors derived from it.

Write path: an episode commits in SQLite first, marked `pending`; then it is embedded and
upserted, and marked `indexed`. A crash or an embedder failure between the two loses
nothing: pending episodes are retried on the next write, at start-up and by `nexus reindex`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from nexusai.config import Config
from nexusai.embedders import Embedder, Vector, create_embedder
from nexusai.errors import ConfigError
from nexusai.memory import fts
from nexusai.memory.models import Episode, NewEpisode, Session
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


def embedding_text(episode: Episode) -> str:
    return episode.search_text or episode.content


class Memory:
    def __init__(
        self, store: Store, embedder: Embedder, vectors: VectorIndex, batch_size: int = 256
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.vectors = vectors
        self.batch_size = batch_size
        self.stopping = threading.Event()

    @classmethod
    def open(
        cls, config: Config, embedder: Embedder | None = None, *, check: bool = True
    ) -> Memory:
        """Opens the store and its vector index; `check=False` skips the embedder identity
        check (for `nexus reindex`, which rebuilds the vectors anyway)."""
        embedder = embedder or create_embedder(config)
        store = Store(config.db_path, max_content_bytes=config.max_content_bytes)
        try:
            if check:
                check_embedder(store, embedder)
            vectors = open_vector_index(config, "episodes", embedder.dimension)
        except BaseException:
            store.close()
            raise
        return cls(store, embedder, vectors)

    def close(self) -> None:
        self.stopping.set()
        self.vectors.close()
        self.store.close()

    # -- writes -----------------------------------------------------------------------

    def add_episodes(self, session_id: int, episodes: Sequence[NewEpisode]) -> list[Episode]:
        stored = self.store.add_episodes(session_id, episodes)
        if self.index(stored):
            self.sync_pending(max_batches=1)
        return stored

    def import_conversation(
        self, sessions: Sequence[ImportedSession], project_id: int | None
    ) -> tuple[int, int, int]:
        """One conversation from an import: written atomically, then embedded in batches.
        Returns (new sessions, new episodes, skipped episodes)."""
        new_sessions, ids, skipped = self.store.import_sessions(sessions, project_id)
        for start in range(0, len(ids), self.batch_size):
            self.index(self.store.get_episodes(ids[start : start + self.batch_size]))
        return new_sessions, len(ids), skipped

    def update_episode(self, episode_id: int, **changes: Any) -> Episode:
        episode = self.store.update_episode(episode_id, **changes)
        self.sync_pending(max_batches=1)
        return episode

    def delete_episode(self, episode_id: int) -> None:
        self.store.delete_episode(episode_id)
        self._delete_vectors([episode_id])

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
        vectors = self.embedder.embed([embedding_text(e) for e in batch])
        self.vectors.upsert(
            [VectorPoint(e.id, v, e.session_id) for e, v in zip(batch, vectors, strict=True)]
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
        """Rebuilds every vector from SQLite with the configured embedder."""
        self.vectors.reset(self.embedder.dimension)
        self.store.mark_all_vectors_pending()
        record_embedder(self.store, self.embedder)
        return self.sync_pending(progress=progress)

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

    def get_session(self, session_id: int) -> Session:
        return self.store.get_session(session_id)

    def scope_session_ids(self, session_id: int) -> list[int]:
        return self.store.scope_session_ids(session_id)

    def recent_episodes(self, session_id: int, limit: int) -> list[Episode]:
        return self.store.recent_episodes(session_id, limit)

    def get_episodes(self, ids: Sequence[int]) -> list[Episode]:
        return self.store.get_episodes(ids)

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
