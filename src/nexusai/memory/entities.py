"""Entity memory: the entities episodes mention, stored once per scope (a project, or a
session without one) with their mentions, and their vectors for search.

Here: extraction in batches within its bounds, the entities' vectors and the sync loop.
Their rows are `repositories.entities`; what finds the mentions in text is `extractors`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from nexusai.embedders import Embedder
from nexusai.errors import first_line
from nexusai.memory.dbapi import Connection
from nexusai.memory.extractors import Extracted, Extractor, Mention, Outcome, Stopped, normalize
from nexusai.memory.repositories.derived import VectorState
from nexusai.memory.repositories.entities import Entities, Found
from nexusai.memory.store import EpisodeStore
from nexusai.memory.vectors import VectorIndex, VectorPoint
from nexusai.models import Entity, Episode

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
                    touched.update(
                        self.store.entities.record(
                            conn,
                            episode.id,
                            episode.session_id,
                            episode.occurred_at,
                            _found(extracted.mentions),
                        )
                    )
                    _note(self.store.entities, conn, episode.id, extracted)
            self._index(self.store.entities.needing_vectors(sorted(touched)))
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
            ids = self.store.derived.pending_extraction(self.batch_size)
            episodes = self.store.episodes.get_many(ids)
            if self.extractor is None or not ids or not self.extract(episodes):
                break
            done += len(ids)
            batches += 1
            if progress:
                progress(len(ids))
        stale = self.store.entities.needing_vectors(None)
        for start in range(0, len(stale), self.batch_size):
            self._index(stale[start : start + self.batch_size])
        return done

    def reset(self) -> None:
        """Drops every entity vector; each is made again by the next `sync`."""
        if self.vectors is None:
            return
        self.vectors.reset(self.embedder.dimension)
        self.store.entities.set_vectors(None, VectorState.PENDING)

    def reconcile(self) -> None:
        """When the entity index lost vectors, every entity is marked for a new one (the
        next `sync` makes them; there are far fewer entities than episodes)."""
        if self.vectors is None:
            return
        if self.vectors.count() < self.store.entities.count_vectors(VectorState.INDEXED):
            self.store.entities.set_vectors(None, VectorState.PENDING)

    def waiting_vectors(self) -> int:
        """Entities found but not yet searchable by meaning (their vector still to make)."""
        if self.vectors is None:
            return 0
        return self.store.entities.count_vectors(VectorState.PENDING)

    def _index(self, ids: Sequence[int]) -> None:
        if not ids or self.vectors is None:
            return
        entities = self.get(ids)
        vectors = self.embedder.embed([self._entity_text(e) for e in entities])
        points = [
            VectorPoint(e.id, v, self.store.entities.sessions_of(e.id))
            for e, v in zip(entities, vectors, strict=True)
        ]
        self.vectors.upsert(points)
        self.store.entities.set_vectors([e.id for e in entities], VectorState.INDEXED)

    def _entity_text(self, entity: Entity) -> str:
        """What the entity's vector is made from: name, type, and a line of recent
        context."""
        context = ""
        if entity.latest_mention_ids:
            found = self.store.episodes.get_many(entity.latest_mention_ids[:1], expired=True)
            context = found[0].content[:200] if found else ""
        return f"{entity.name} ({entity.type}). {context}".strip()

    # -- reads ------------------------------------------------------------------------

    def get(self, ids: Sequence[int]) -> list[Entity]:
        """Entities in the order of `ids` (`repositories.entities.Entities.get`)."""
        return self.store.entities.get(ids)

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
        like = _like_prefix(normalize(prefix))
        return self.get(self.store.entities.by_prefix(like, session_ids, limit))

    def mentions(self, entity_id: int, limit: int, offset: int) -> list[Episode]:
        """The episodes that mention an entity, newest first."""
        ids = self.store.entities.mentions(entity_id, limit, offset)
        return self.store.episodes.get_many(ids)

    def scope_of(self, entity_id: int) -> str | None:
        """`p:<project>` or `s:<session>`; None when there is no such entity."""
        return self.store.entities.scope_of(entity_id)

    def names_by_episode(self, episode_ids: Sequence[int]) -> dict[int, list[str]]:
        """The names of the entities each episode mentions, most mentioned first."""
        return self.store.entities.names_by_episode(episode_ids)

    def count(self) -> int:
        return self.store.entities.count()

    def close(self) -> None:
        if self.vectors is not None:
            self.vectors.close()


def _still_reads(extractor: Extractor) -> bool:
    try:
        extractor.extract(["Maria flew to Lisbon."])
    except Exception:
        return False
    return True


def _note(entities: Entities, conn: Connection, episode_id: int, extracted: Extracted) -> None:
    """What extraction left unread of a message, when it left anything."""
    if extracted.outcome is Outcome.WHOLE:
        return
    log.warning(
        "entity extraction of episode %d: %s%s",
        episode_id,
        extracted.outcome.value,
        f" ({extracted.detail})" if extracted.detail else "",
    )
    entities.note(conn, episode_id, extracted.outcome.value, extracted.detail)


def _found(mentions: Sequence[Mention]) -> list[Found]:
    return [(m.name, normalize(m.name), m.type) for m in mentions]


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
