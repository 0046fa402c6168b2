"""The memory service in-process: the episode store (the truth: SQLite, or PostgreSQL with
NEXUS_DATABASE_URL) plus the vectors derived from it.

Write path: an episode commits in the store first, marked `pending`; then it is embedded and
upserted, and marked `indexed` if its text is still the text embedded. A crash or an
embedder failure between the two loses nothing: pending episodes are retried on the next
write, at start-up and by `nexus reindex`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from nexusai.config import Config
from nexusai.embedders import Embedder, create_embedder
from nexusai.errors import ConfigError
from nexusai.memory import background
from nexusai.memory.chunks import VECTOR_WINDOWS, EpisodeVectors, episode_of, windows
from nexusai.memory.entities import EntityMemory
from nexusai.memory.extractors import Extractor, create_extractor
from nexusai.memory.repositories.derived import VectorState
from nexusai.memory.repositories.imports import ImportedSession
from nexusai.memory.sqlite.store import SqliteStore
from nexusai.memory.store import EpisodeStore
from nexusai.memory.vectors import VectorIndex, claim_embedded_indexes, open_vector_index
from nexusai.memory.vectors.owner import OwnerLock
from nexusai.models import Entity, Episode, EpisodeFilter, NewEpisode, Scope
from nexusai.observability import FORGOTTEN

log = logging.getLogger("nexusai.memory")

Progress = Callable[[int], None]
COLLECTIONS = ("episodes", "entities")
# A forget deletes this many episodes a transaction, and lets the writes waiting for the
# store go between two: one chunk is tens of milliseconds, so no write waits behind a
# forget of any size (one transaction of 2,000 held every write for 6 s).
FORGET_CHUNK = 50
# Seconds between two chunks: each chunk costs the next turn its keyword copy's update
# (the changed rows' words read again), so turns between chunks run clear of it. At
# 100,000 episodes, a forget of 10,000 beside turns and writes: 0.002 s gave turns p99
# 639 ms and the forget 13 s; 0.05 s gave 316 ms and 23 s. With a chunk in a few
# statements (2026-12-06) the forget takes 15 s, and 0.075 s (21 s) moved neither p99.
FORGET_PAUSE = 0.05
# Vectors a write makes for episodes it did not write (the turn after one it inserted
# before, edited or deleted, indexed with its new neighbour); more wait for `index_behind`.
CATCH_UP = 8


class EmbedderMismatch(ConfigError):
    pass


def check_embedder(store: EpisodeStore, embedder: Embedder) -> None:
    """The vectors in a store are only comparable with queries from the same embedder."""
    name, dimension = store.meta.get("embedder"), store.meta.get("embedder_dimension")
    if name is None:
        record_embedder(store, embedder)
    elif (name, int(dimension or 0)) != (embedder.name, embedder.dimension):
        raise EmbedderMismatch(
            f"this store's vectors were made by {name} ({dimension} dimensions), but the "
            f"configured embedder is {embedder.name} ({embedder.dimension} dimensions). Run "
            "`nexus reindex` to rebuild the vectors with the configured embedder, or set "
            "NEXUS_EMBEDDER back."
        )


def record_embedder(store: EpisodeStore, embedder: Embedder) -> None:
    store.meta.set("embedder", embedder.name)
    store.meta.set("embedder_dimension", str(embedder.dimension))


def embedding_texts(episode: Episode, window_chars: int) -> list[str]:
    """What is embedded for an episode: its opening window with the end of the turn before
    it (one vector for a reply and what it answers), `VECTOR_WINDOWS` windows in all. The
    episode comes before that context because the model reads only so far, and because it
    measured better on LoCoMo (semantic recall@10 0.455 with the turn before first, 0.503
    after)."""
    text = episode.search_text or episode.content
    return windows(text, episode.context_text, window_chars)[:VECTOR_WINDOWS]


class Memory:
    def __init__(
        self,
        store: EpisodeStore,
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
        self.stopping = threading.Event()
        self.extraction_due = threading.Event()  # set when writes left entities to extract
        self.vectors_due = threading.Event()  # set when writes left more vectors than they made
        self.forgetting = background.Forgetting()
        self.entities = EntityMemory(
            store, embedder, entity_vectors, extractor, self.stopping, batch_size
        )
        self._rebuilding = 0  # episodes whose lost vectors are being made again
        self._threads: list[threading.Thread] = []  # the background work, once started

    @classmethod
    def open(
        cls,
        config: Config,
        embedder: Embedder | None = None,
        *,
        check: bool = True,
        extractor: Extractor | None = None,
        reconcile: bool = True,
    ) -> Memory:
        """Opens the store and its vector indexes; `check=False` skips the embedder identity
        check (for `nexus reindex`, which rebuilds the vectors anyway). The extractor comes
        from NEXUS_EXTRACTOR unless one is given. `reconcile=False` leaves vectors the index
        lost marked as they are, for a command that reports or rebuilds them itself."""
        embedder = embedder or create_embedder(config)
        extractor = extractor or create_extractor(config)
        with contextlib.ExitStack() as opened:
            # The embedded index is claimed before anything is opened: a process that
            # another one's index refuses has touched nothing.
            owners = claim_embedded_indexes(config, COLLECTIONS)
            for owner in owners.values():
                opened.callback(owner.release)
            store = open_store(config)
            opened.callback(store.close)
            _say_migrated(store.migrations_applied)
            if check:
                check_embedder(store, embedder)
            pool = store.pool  # a PostgreSQL store's, for pgvector; None for SQLite
            vectors, entity_vectors = (
                _index(config, name, embedder, pool, owners.get(name), opened)
                for name in COLLECTIONS
            )
            opened.pop_all()
        memory = cls(store, embedder, vectors, extractor=extractor, entity_vectors=entity_vectors)
        if reconcile:
            memory.reconcile_vectors()
        return memory

    def reconcile_vectors(self) -> int:
        """Episodes marked indexed whose vectors the index no longer holds (its directory
        deleted, or set aside as damaged) are marked pending again, to be rebuilt from
        SQLite in the background; keyword search serves them meanwhile. Returns how many."""
        for index in (self.vectors.index, self.entities.vectors):
            if index is not None and index.damaged:
                log.warning("%s", index.damaged)
        derived = self.store.derived
        if self.vectors.index.count() >= derived.count_vectors(VectorState.INDEXED):
            lost = 0  # every indexed episode has at least its one point
        else:
            held = {episode_of(point) for point in self.vectors.index.ids()}
            missing = sorted(derived.indexed() - held)
            derived.set_vectors(missing, VectorState.PENDING)
            lost = len(missing)
            log.warning(
                "the vector index lacks the vectors of %d episodes: keyword search serves them"
                " while they are rebuilt from SQLite in the background (progress: /ready)",
                lost,
            )
        self._rebuilding = lost
        self.entities.reconcile()
        return lost

    def tend_vectors(self) -> None:
        """Writes the vector indexes' buffers to disk. Qdrant Edge keeps every write in its
        write-ahead log, mapped in memory, until a flush: without one now and then the
        process grows with every vector ever written (measured: about 1 KB each). Deleted
        points stay in memory too, until a vacuum; they and points outside any search graph,
        once many, are taken care of behind the index (see `vectors.edge_build`)."""
        for index in (self.vectors.index, self.entities.vectors):
            if index is not None:
                index.flush()
                index.optimize_behind()

    def entities_pending(self) -> int:
        """Episodes still to go through entity extraction, and entities found but not yet
        searchable by meaning (0 when extraction is off): what a read of entities may miss."""
        if self.entities.extractor is None:
            return 0
        waiting = self.store.derived.count_pending_extraction()
        return waiting + self.entities.waiting_vectors()

    def vectors_rebuilding(self) -> int:
        """How many episodes still wait for a vector the index lost (0 normally)."""
        return self._rebuilding

    def start(self) -> None:
        """The background work of a serving memory (`background`): episodes stored before
        a crash or an embedder outage get their vectors, the indexes are tended, entities
        are extracted behind the writes. None of it holds up the start."""
        loops = (
            background.repair_vectors,
            background.tend,
            background.index_behind,
            Memory.extract_behind,
        )
        self._threads = [threading.Thread(target=loop, args=(self,), daemon=True) for loop in loops]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Ends the background work and waits for it."""
        self.stopping.set()
        self.extraction_due.set()  # wakes `extract_behind` to see it is time to stop
        self.vectors_due.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join()
        self._threads = []

    def close(self) -> None:
        self.stop()
        self.entities.close()
        self.vectors.close()
        self.store.close()

    # -- writes -----------------------------------------------------------------------

    def add_episodes(self, session_id: int, episodes: Sequence[NewEpisode]) -> list[Episode]:
        return self._derive(self.store.episodes.add(session_id, episodes))

    def add_episodes_named(
        self, project: str | None, title: str, episodes: Sequence[NewEpisode]
    ) -> list[Episode]:
        """Into the session of this title in the project of this name, both made when
        missing, in the episodes' own transaction."""
        return self._derive(self.store.episodes.add_named(project, title, episodes))

    def _derive(self, stored: list[Episode]) -> list[Episode]:
        """The vectors of episodes just stored, and their entities: behind the write when
        the memory is serving (`extract_behind`: a name recognizer over a long message took
        tens of seconds, and a client gave up on a write it was still making), here when it
        is not (a command that stores and exits)."""
        if self.index(stored):
            self._catch_up({e.session_id for e in stored}, after=[e.id for e in stored])
        if self._threads:
            self.extraction_due.set()
        else:
            self.entities.extract(stored)
        return stored

    def import_conversation(
        self, sessions: Sequence[ImportedSession], project_id: int | None
    ) -> tuple[int, int, int]:
        """One conversation from an import: written atomically, then embedded in batches.
        Its entities are extracted behind it (`extract_behind`, `extract_pending`): on long
        chats spaCy costs twice what embedding does, and would set an import's pace.
        Returns (new sessions, new episodes, skipped episodes)."""
        new_sessions, ids, skipped = self.store.imports.add(sessions, project_id)
        for start in range(0, len(ids), self.batch_size):
            self.index(self.store.episodes.get_many(ids[start : start + self.batch_size]))
        if ids:
            self.extraction_due.set()
        return new_sessions, len(ids), skipped

    def extract_pending(self, progress: Progress | None = None) -> int:
        """Entities for every episode still waiting for extraction, and vectors for every
        entity without one; returns how many episodes were extracted."""
        return self.entities.sync(progress=progress)

    def extract_behind(self, retry_seconds: float = 30.0) -> None:
        """Until the memory closes: extracts whenever writes leave episodes waiting, and
        every `retry_seconds` besides, so that a failed extraction (an LLM extractor that is
        down) is tried again. The service runs this in a thread of its own, on the time
        its requests leave (`background.take_idle_time`)."""
        background.take_idle_time()
        while not self.stopping.is_set():
            try:
                done = self.extract_pending()
            except Exception as exc:  # the episodes stay pending; the next round retries
                log.warning("entity extraction failed, will retry: %s", exc)
                done = 0
            if done:
                log.info("extracted the entities of %d episodes", done)
            self.extraction_due.wait(retry_seconds)
            self.extraction_due.clear()

    def update_episode(self, episode_id: int, **changes: Any) -> Episode:
        episode = self.store.episodes.update(episode_id, **changes)
        self._catch_up({episode.session_id})  # itself, if its text changed, and its neighbours
        return episode

    def delete_episode(self, episode_id: int) -> None:
        deleted = self.store.episodes.delete(episode_id)
        self._delete_vectors([episode_id], "episode")
        self._catch_up({deleted.session_id})  # the turn after it, read with a new neighbour

    def delete_session(self, session_id: int) -> None:
        self._delete_vectors(self.store.sessions.delete(session_id), "session")

    def delete_project(self, project_id: int) -> None:
        self._delete_vectors(self.store.projects.delete(project_id), "project")

    def forget(self, session_ids: Sequence[int] | None, rule: EpisodeFilter) -> list[int]:
        """Deletes the episodes of these sessions (all when None) that `rule` keeps, from
        the store, its keyword index and entity links, and the vectors; returns the ids of
        those a read still returned (what a dry run counts: expired ones, which reads no
        longer show, go too, uncounted). In chunks (`_delete_chunk`): a forget cut short (a
        crash) has deleted whole chunks, and asking it again deletes the rest."""
        found = self.store.episodes.matching(session_ids, rule)
        matching, shown = [i for i, _ in found], {i for i, live in found if live}
        gone: list[int] = []
        with self.forgetting.under_way():
            for start in range(0, len(matching), FORGET_CHUNK):
                gone += self._delete_chunk(matching[start : start + FORGET_CHUNK], "filter")
        return [i for i in gone if i in shown]

    def forget_expired(self) -> int:
        """Deletes the episodes past their `expires_at` (reads stopped returning them at
        that moment) from every index, in chunks as `forget`; how many."""
        gone = 0
        with self.forgetting.under_way():
            while found := self.store.episodes.expired_ids(FORGET_CHUNK):
                gone += len(self._delete_chunk(found, "expired"))
                if len(found) < FORGET_CHUNK:
                    break
        return gone

    def _delete_chunk(self, ids: Sequence[int], how: str) -> list[int]:
        """One transaction of a forget, then a pause in which a waiting write takes the
        store."""
        deleted = self.store.episodes.delete_many(ids)
        self._delete_vectors(deleted, how)
        self.vectors_due.set()  # the turns after them, read with new neighbours, behind
        time.sleep(FORGET_PAUSE)
        return deleted

    def _delete_vectors(self, ids: list[int], how: str) -> None:
        FORGOTTEN.labels(how=how).inc(len(ids))
        # The rows are gone already; a vector left behind is never returned, since
        # semantic results are joined back to rows, and `nexus doctor` removes it.
        try:
            self.vectors.delete(ids)
        except Exception:
            log.exception("could not delete %d vectors", len(ids))

    # -- vectors ------------------------------------------------------------------------

    def index(self, episodes: Sequence[Episode], embedder: Embedder | None = None) -> bool:
        """Embeds (with `embedder`, by default the memory's) and upserts the episodes, then
        marks them indexed. False on failure (they stay pending, to be retried)."""
        if not episodes:
            return True
        try:
            for start in range(0, len(episodes), self.batch_size):
                self._index_batch(episodes[start : start + self.batch_size], embedder)
        except Exception as exc:
            log.warning("indexing %d episodes failed, will retry: %s", len(episodes), exc)
            return False
        return True

    def _index_batch(self, batch: Sequence[Episode], embedder: Embedder | None) -> None:
        embedder = embedder or self.embedder
        texts = [embedding_texts(e, embedder.window_chars) for e in batch]
        vectors = iter(embedder.embed([t for episode in texts for t in episode]))
        self.vectors.upsert(
            [
                (e.id, [next(vectors) for _ in episode], e.session_id)
                for e, episode in zip(batch, texts, strict=True)
            ]
        )
        self.store.derived.mark_indexed(batch)

    def _catch_up(self, sessions: set[int], after: Sequence[int] | None = None) -> None:
        """A few of the vectors waiting besides a write's own (the turn after one it
        inserted before, edited or deleted). Where the memory serves: after new episodes
        (`after`), those of the turns just after them (an append has none); after an edit
        or a delete, those of its sessions. `index_behind` is woken for any others (a
        forget's thousands, an outage's), so a write never makes them (beside a forget, a
        write to a session it had touched spent up to 382 ms on them). Elsewhere (an
        import, a command) any."""
        if not self._threads:
            self.sync_pending(max_batches=1, limit=CATCH_UP)
            return
        if after is None:
            self.sync_pending(max_batches=1, limit=CATCH_UP, sessions=sorted(sessions))
        elif turns := self.store.episodes.turns_after(after):
            self.sync_pending(max_batches=1, limit=CATCH_UP, among=turns)
        self.vectors_due.set()

    def sync_pending(
        self,
        max_batches: int | None = None,
        progress: Progress | None = None,
        limit: int | None = None,
        sessions: Sequence[int] | None = None,
        embedder: Embedder | None = None,
        among: Sequence[int] | None = None,
    ) -> int:
        """Indexes pending episodes, oldest first, of `sessions` and `among` these ids (all
        when None), `limit` a batch (the embedder's batch size by default), with `embedder`
        (the memory's by default); returns how many were indexed. Where `max_batches`
        leaves some waiting, `index_behind` is woken for them."""
        done = batches = 0
        batch = limit or self.batch_size
        while not self.stopping.is_set():
            with self.store.claim_pending_vectors(batch, sessions, among) as ids:
                if not ids or not self.index(self.store.episodes.get_many(ids), embedder):
                    break
            done += len(ids)
            batches += 1
            self._rebuilding = max(self._rebuilding - len(ids), 0)
            if progress:
                progress(len(ids))
            if batches == max_batches:
                if len(ids) == batch:  # a full batch: more may wait
                    self.vectors_due.set()
                break
        return done

    def reindex(self, progress: Progress | None = None) -> int:
        """Rebuilds every vector from SQLite with the configured embedder, and extracts the
        entities of episodes that have not been through extraction."""
        self.vectors.reset(self.embedder.dimension)
        self.entities.reset()
        self.store.derived.mark_all_vectors_pending()
        record_embedder(self.store, self.embedder)
        done = self.sync_pending(progress=progress)
        self.entities.sync()
        return done

    def search_vectors(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
        rule: EpisodeFilter | None = None,
    ) -> list[tuple[int, float]]:
        """Best first; equal scores by id. The index returns tied points (the same words
        said twice have the same vector) in an order that changes from one build to the
        next, and a ranker trained on those lists would change with it. With a `rule`, the
        store says which episodes of the scope it keeps (from its indexed columns) and the
        index searches only those: `limit` come back whenever that many match."""
        only = None
        if rule is not None and not rule.is_empty():
            only = self.store.episodes.kept_ids(session_ids, rule)
        hits = self.vectors.search(vector, session_ids, exclude_ids, limit, only)
        return sorted(hits, key=lambda hit: (-hit[1], hit[0]))

    # -- reads (what orchestration's MemoryClient asks for) -------------------------------

    def scope(self, session_id: int) -> Scope:
        return self.store.sessions.scope(session_id)

    def resolve_session(self, project: str | None, title: str) -> int:
        return self.store.sessions.resolve(project, title).id

    def recent_episodes(self, session_id: int, limit: int) -> list[Episode]:
        return self.store.episodes.recent(session_id, limit)

    def vector_episodes(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
        rule: EpisodeFilter | None = None,
    ) -> list[Episode]:
        hits = dict(self.search_vectors(vector, session_ids, exclude_ids, limit, rule))
        return self.store.episodes.get_many(list(hits), hits)

    def search_keyword(
        self,
        query: str,
        limit: int,
        session_ids: Sequence[int] | None,
        budget: int = 0,
        rule: EpisodeFilter | None = None,
    ) -> list[Episode]:
        return self.store.keywords.search(query, limit, session_ids, budget, rule)

    def standing_episodes(
        self, session_ids: Sequence[int] | None, limit: int, rule: EpisodeFilter | None = None
    ) -> list[Episode]:
        return self.store.episodes.standing(session_ids, limit, rule)

    def vector_states(self, episode_ids: Sequence[int]) -> dict[int, VectorState]:
        return self.store.derived.vector_states(episode_ids)

    def count_pending_vectors(self) -> int:
        return self.store.derived.count_vectors(VectorState.PENDING)

    def search_entities(
        self, vector: Sequence[float] | None, session_ids: Sequence[int], limit: int
    ) -> list[Entity]:
        return self.entities.search(vector, session_ids, limit)


def _index(
    config: Config,
    collection: str,
    embedder: Embedder,
    pool: Any,
    owner: OwnerLock | None,
    opened: contextlib.ExitStack,
) -> VectorIndex:
    index = open_vector_index(config, collection, embedder.dimension, pool, owner)
    opened.callback(index.close)
    return index


def _say_migrated(applied: Sequence[str]) -> None:
    """An existing store brought up to date is said once, at the start that did it (what
    a new store is made with goes unsaid)."""
    if applied and not applied[0].startswith("m001"):
        log.info("the store was brought up to date: %s", ", ".join(applied))


def open_store(config: Config) -> EpisodeStore:
    """PostgreSQL when NEXUS_DATABASE_URL is set, else SQLite in the data directory."""
    limits = {
        "max_content_bytes": config.max_content_bytes,
        "max_metadata_bytes": config.max_metadata_bytes,
    }
    if config.database_url:
        try:
            from nexusai.memory.postgres.store import PgStore
        except ImportError:  # psycopg is the optional extra `postgresql`
            raise ConfigError(
                "NEXUS_DATABASE_URL needs the PostgreSQL driver: pip install 'nexusai[postgresql]'"
            ) from None
        return PgStore(config.database_url, **limits)
    return SqliteStore(config.db_path, **limits)
