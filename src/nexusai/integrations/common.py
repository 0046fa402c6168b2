"""What every adapter shares: a client from arguments, and a session found by name."""

from __future__ import annotations

from nexusai.client import AsyncClient, Client
from nexusai.schemas import EpisodeOut, SessionOut


def client_from(client: Client | None, base_url: str | None, api_key: str | None) -> Client:
    """The client given, or one for `base_url` and `api_key` (default NEXUS_URL, NEXUS_API_KEY)."""
    return client if client is not None else Client(base_url, api_key)


def async_client_from(
    client: AsyncClient | None, base_url: str | None, api_key: str | None
) -> AsyncClient:
    return client if client is not None else AsyncClient(base_url, api_key)


def all_episodes(client: Client, session_id: int, page: int = 1000) -> list[EpisodeOut]:
    """Every episode of a session, in time order, a page at a time."""
    found: list[EpisodeOut] = []
    while batch := client.list_episodes(session_id, limit=page, offset=len(found)):
        found += batch
        if len(batch) < page:
            break
    return found


def find_session(client: Client, title: str, project: str | None) -> int:
    """The session of that title (in that project), never made: reading writes nothing. A
    missing one is an error that says which sessions there are."""
    project_id = None
    if project is not None:
        named = [p for p in client.list_projects(limit=1000) if p.name == project]
        if not named:
            raise LookupError(f"there is no project named {project!r}")
        project_id = named[0].id
    found = client.list_sessions(project_id, limit=1000)
    return _one(found, title, project)


def _one(found: list[SessionOut], title: str, project: str | None) -> int:
    named = [s for s in found if s.title == title]
    if len(named) == 1:
        return named[0].id
    where = f" in project {project!r}" if project else ""
    if named:
        raise LookupError(f"several sessions are named {title!r}{where}: give the project or an id")
    titles = ", ".join(sorted({repr(s.title) for s in found if s.title})[:50]) or "none"
    raise LookupError(f"there is no session named {title!r}{where}; sessions: {titles}")
