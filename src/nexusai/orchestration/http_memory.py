"""MemoryClient over HTTP: orchestration and memory as separate processes.

Every call goes through the memory service's public, documented API. The keyword leg is
the spec's `GET /episodes/search?sessionIds=1,2,3`; the semantic leg sends the query
vector to `POST /vectors/search`, since the memory service owns the vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from nexusai.errors import InvalidInput, NexusError, NotFound
from nexusai.httpclient import bearer_client
from nexusai.models import Entity, Episode, NewEpisode
from nexusai.schemas import EntityOut, EpisodeOut, ScopeOut, SessionOut


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
        self._client = bearer_client(self.url, api_key, timeout, transport)

    def close(self) -> None:
        self._client.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise MemoryUnavailable(
                f"the memory service at {self.url} did not answer in time"
            ) from None
        except httpx.TransportError as exc:
            raise MemoryUnavailable(
                f"the memory service at {self.url} is unreachable ({type(exc).__name__})"
            ) from None
        if response.status_code >= 400:
            raise _error(response, self.url)
        return response.json()

    def ping(self) -> None:
        """Raises MemoryUnavailable unless the memory service answers its health check."""
        self._call("GET", "/health")

    def scope_session_ids(self, session_id: int) -> list[int]:
        return ScopeOut.model_validate(
            self._call("GET", f"/sessions/{session_id}/scope")
        ).session_ids

    def resolve_session(self, project: str | None, title: str) -> int:
        body = {"project": project, "title": title}
        return SessionOut.model_validate(self._call("POST", "/sessions/resolve", json=body)).id

    def recent_episodes(self, session_id: int, limit: int) -> list[Episode]:
        rows = self._call("GET", f"/sessions/{session_id}/recent", params={"limit": limit})
        return [_episode(row) for row in rows]

    def vector_episodes(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
    ) -> list[Episode]:
        body = {
            "vector": list(vector),
            "sessionIds": None if session_ids is None else list(session_ids),
            "excludeIds": list(exclude_ids),
            "limit": limit,
        }
        return [_episode(row) for row in self._call("POST", "/vectors/search/episodes", json=body)]

    def search_keyword(
        self, query: str, limit: int, session_ids: Sequence[int] | None
    ) -> list[Episode]:
        if session_ids is not None and not session_ids:
            return []
        params: dict[str, Any] = {"q": query, "limit": limit}
        if session_ids is not None:
            params["sessionIds"] = ",".join(map(str, session_ids))
        return [_episode(row) for row in self._call("GET", "/episodes/search", params=params)]

    def search_entities(
        self, vector: Sequence[float] | None, session_ids: Sequence[int], limit: int
    ) -> list[Entity]:
        if vector is None or limit <= 0 or not session_ids:
            return []
        body = {"vector": list(vector), "sessionIds": list(session_ids), "limit": limit}
        rows = self._call("POST", "/entities/search", json=body)
        return [EntityOut.model_validate(row).to_entity() for row in rows]

    def add_episodes(self, session_id: int, episodes: Sequence[NewEpisode]) -> list[Episode]:
        batch = [
            {
                "speaker": e.speaker,
                "content": e.content,
                "metadata": e.metadata,
                **({"occurredAt": e.occurred_at.isoformat()} if e.occurred_at else {}),
            }
            for e in episodes
        ]
        body = self._call("POST", f"/sessions/{session_id}/episodes", json={"episodes": batch})
        return [_episode(row) for row in body["episodes"]]


def _episode(row: dict[str, Any]) -> Episode:
    return EpisodeOut.model_validate(row).to_episode()


def _error(response: httpx.Response, url: str) -> NexusError:
    try:
        detail = str(response.json()["detail"])
    except (ValueError, KeyError, TypeError):
        detail = response.text[:200]
    if response.status_code == 404:
        return NotFound(detail)
    if response.status_code < 500:
        return InvalidInput(detail)
    return MemoryUnavailable(f"the memory service at {url} failed: HTTP {response.status_code}")
