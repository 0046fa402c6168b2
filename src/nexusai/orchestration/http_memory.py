"""MemoryClient over HTTP: orchestration and memory as separate processes.

Every call goes through the memory service's public, documented API, sent by the typed
client (`nexusai.client`). The keyword leg is the spec's `GET /episodes/search?sessionIds=`;
the semantic leg sends the query vector to `POST /vectors/search/episodes`, since the
memory service owns the vectors. The client's errors become the domain's: an unknown id
stays a 404, a memory service that is down or slow a 503 that names it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

import httpx

from nexusai.client import Call, Client, Endpoints, NexusAPIError, NotFoundError, UnavailableError
from nexusai.errors import InvalidInput, NexusError, NotFound
from nexusai.models import Entity, Episode, EpisodeFilter, NewEpisode, Scope, finds_nothing
from nexusai.schemas import FilterIn, ScopeOut

T = TypeVar("T")


class MemoryUnavailable(NexusError):
    status_code = 503


class HttpMemoryClient:
    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = base_url.rstrip("/")
        self._rebuilding, self._rebuilding_at = 0, float("-inf")
        # No retries: a turn waits on these calls, and a slow memory service should be
        # a prompt 503, not three time-outs in a row.
        self._client = Client(self.url, api_key, timeout, retries=0, transport=transport)

    def close(self) -> None:
        self._client.close()

    def _send(self, call: Call[T]) -> T:
        with self._errors():
            return self._client.send(call)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except NotFoundError as exc:
            raise NotFound(exc.detail) from None
        except UnavailableError as exc:
            raise MemoryUnavailable(self._unavailable(exc)) from None
        except NexusAPIError as exc:
            if exc.status >= 500:
                raise MemoryUnavailable(
                    f"the memory service at {self.url} failed: HTTP {exc.status}"
                ) from None
            raise InvalidInput(exc.detail) from None

    def _unavailable(self, exc: UnavailableError) -> str:
        if exc.timed_out:
            return f"the memory service at {self.url} did not answer in time"
        if exc.status:
            return f"the memory service at {self.url} failed: HTTP {exc.status}"
        return f"the memory service at {self.url} is unreachable ({exc.reason})"

    def ping(self) -> None:
        """Raises MemoryUnavailable unless the memory service answers its health check."""
        self._send(Endpoints.health())

    def scope(self, session_id: int) -> Scope:
        return _scope(self._send(Endpoints.scope(session_id)))

    def vectors_rebuilding(self) -> int:
        """From memory's /health, asked at most every two seconds: every turn wants it."""
        now = time.monotonic()
        if now - self._rebuilding_at > 2.0:
            self._rebuilding = self._send(Endpoints.health()).vectors_rebuilding
            self._rebuilding_at = now
        return self._rebuilding

    def resolve_session(self, project: str | None, title: str) -> int:
        return self._send(Endpoints.resolve_session(title=title, project=project)).id

    def recent_episodes(self, session_id: int, limit: int) -> list[Episode]:
        return [e.to_episode() for e in self._send(Endpoints.recent(session_id, limit))]

    def vector_episodes(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
        rule: EpisodeFilter | None = None,
    ) -> list[Episode]:
        call = Endpoints.vector_episodes(vector, session_ids, exclude_ids, limit, _sent(rule))
        return [e.to_episode() for e in self._send(call)]

    def search_keyword(
        self,
        query: str,
        limit: int,
        session_ids: Sequence[int] | None,
        budget: int = 0,
        rule: EpisodeFilter | None = None,
    ) -> list[Episode]:
        if finds_nothing(session_ids, limit):
            return []
        call = Endpoints.search(query, session_ids, limit, budget, filter=_sent(rule))
        return [e.to_episode() for e in self._send(call)]

    def standing_episodes(
        self, session_ids: Sequence[int] | None, limit: int, rule: EpisodeFilter | None = None
    ) -> list[Episode]:
        if finds_nothing(session_ids, limit):
            return []
        call = Endpoints.standing(session_ids, limit, _sent(rule))
        return [e.to_episode() for e in self._send(call)]

    def search_entities(
        self, vector: Sequence[float] | None, session_ids: Sequence[int], limit: int
    ) -> list[Entity]:
        if vector is None or limit <= 0 or not session_ids:
            return []
        found = self._send(Endpoints.entity_search(vector, session_ids, limit))
        return [e.to_entity() for e in found]

    def add_episodes(self, session_id: int, episodes: Sequence[NewEpisode]) -> list[Episode]:
        batch = [
            {
                "speaker": e.speaker,
                "content": e.content,
                "metadata": e.metadata,
                **({"imageCaption": e.image_caption} if e.image_caption else {}),
                **({"occurredAt": e.occurred_at.isoformat()} if e.occurred_at else {}),
            }
            for e in episodes
        ]
        return [e.to_episode() for e in self._send(Endpoints.add_episodes(session_id, batch))]


def _sent(rule: EpisodeFilter | None) -> FilterIn | None:
    return None if rule is None or rule.is_empty() else FilterIn.of(rule)


def _scope(found: ScopeOut) -> Scope:
    return Scope(found.session_ids, found.every_session, found.project_id)
