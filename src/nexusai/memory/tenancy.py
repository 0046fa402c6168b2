"""What a project key sees of the memory service: its project's rows, and nothing of
another's. Each route passes the ids it was given through here before it uses them; an id
of another project gets the very 404 a missing one gets (`access.py` says why).
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request

from nexusai.access import Principal, check_project, principal_of
from nexusai.errors import InvalidInput, NotFound
from nexusai.memory.service import Memory
from nexusai.models import Episode, Session


class Tenancy:
    def __init__(self, principal: Principal, memory: Memory) -> None:
        self.principal = principal
        self.memory = memory

    @classmethod
    def of(cls, request: Request) -> Tenancy:
        memory: Memory = request.app.state.memory
        return cls(principal_of(request), memory)

    def project(self, project_id: int) -> None:
        check_project(self.principal, project_id, f"project {project_id}")

    def project_filter(self, project_id: int | None) -> int | None:
        """A list's project filter: a project key always lists its own project; a project
        that does not exist is a 404, not an empty list."""
        if self.principal.admin:
            if project_id is not None:
                self.memory.store.projects.get(project_id)  # NotFound when there is none
            return project_id
        if project_id is not None:
            self.project(project_id)
        return self.principal.project_id

    def project_name(self, name: str | None) -> str | None:
        """A project named in a request (resolve, import): a project key's own, or none."""
        if self.principal.admin:
            return name
        if name is not None and name != self.principal.project_name:
            raise NotFound(f"project {name!r} does not exist")
        return self.principal.project_name

    def session(self, session_id: int) -> Session:
        session = self.memory.store.sessions.get(session_id)  # NotFound when missing
        check_project(self.principal, session.project_id, f"session {session_id}")
        return session

    def new_session_project(self, project_id: int | None) -> int | None:
        """Where a project key's new or moved session goes: into its project only."""
        if self.principal.admin:
            return project_id
        if project_id is None:
            raise InvalidInput("a project key's sessions stay in its project: give no projectId")
        self.project(project_id)
        return project_id

    def episode(self, episode_id: int) -> Episode:
        episode = self.memory.store.episodes.get(episode_id)
        session = self.memory.store.sessions.get(episode.session_id)
        check_project(self.principal, session.project_id, f"episode {episode_id}")
        return episode

    def visible_episodes(self, episodes: Sequence[Episode]) -> list[Episode]:
        if self.principal.admin:
            return list(episodes)
        own = set(self.own_session_ids())
        return [e for e in episodes if e.session_id in own]

    def entity(self, entity_id: int) -> None:
        if self.principal.admin:
            return
        scope = self.memory.entities.scope_of(entity_id)
        check_project(self.principal, _project_of_scope(scope), f"entity {entity_id}")

    def scope(self, session_ids: Sequence[int] | None) -> list[int] | None:
        """A search's sessions: each must be visible; none given means all a key sees."""
        if self.principal.admin:
            return None if session_ids is None else list(session_ids)
        if session_ids is None:
            return self.own_session_ids()
        for session_id in session_ids:
            self.session(session_id)
        return list(session_ids)

    def own_session_ids(self) -> list[int]:
        assert self.principal.project_id is not None
        return self.memory.store.sessions.of_project(self.principal.project_id)


def _project_of_scope(scope: str | None) -> int | None:
    """An entity's scope is `p:<project>`, or `s:<session>` for a session in no project
    (None then: no project key sees it)."""
    return int(scope[2:]) if scope and scope.startswith("p:") else None
