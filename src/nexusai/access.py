"""Who is asking, and what that key may do.

Two kinds of key. The admin key (`NEXUS_API_KEY`) sees and manages everything. A project
key (`nexus keys create --project NAME`) sees one project: every id of another project is
answered as if it did not exist (404, never 403, so a key cannot learn what others hold),
lists and searches are narrowed to its project, and a read-only one cannot write. What
needs the admin key (settings, metrics, creating projects) is a 403 for a project key.

This module decides by method and path, before any route runs; the routes narrow by id
(`memory/tenancy.py`, and the orchestration routes for `sessionId`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs

from starlette.requests import Request

from nexusai.errors import NexusError, NotFound


@dataclass(frozen=True)
class Principal:
    project_id: int | None  # None: every project (the admin key, or a service with no keys)
    project_name: str | None = None
    read_only: bool = False
    key_id: int | None = None

    @property
    def admin(self) -> bool:
        return self.project_id is None

    def sees(self, project_id: int | None) -> bool:
        return self.admin or project_id == self.project_id


ADMIN = Principal(None)


class NotAdmitted(NexusError):
    """A route that needs to know who asks was reached without the door: fail closed."""

    status_code = 401


def principal_of(request: Request) -> Principal:
    """Set by the door (`guard.Guard`) for every request it lets through. A request that
    reached a route some other way is refused, never taken for the admin's."""
    principal = getattr(request.state, "principal", None)
    if not isinstance(principal, Principal):
        raise NotAdmitted("this request did not pass the API key check; send it to the service")
    return principal


# Calls only the admin key makes: they change or show the whole service, not a project.
_ADMIN_ONLY = [
    ("POST", re.compile(r"/projects")),
    ("DELETE", re.compile(r"/projects/[^/]+")),
    ("*", re.compile(r"/settings")),
    ("*", re.compile(r"/metrics")),
    ("*", re.compile(r"/eval-results")),
]
# The MCP endpoint: its tools call this API with the caller's own key, each call through
# this door again, so the endpoint itself is open to any valid key.
_MCP = re.compile(r"/mcp(/.*)?")
# POSTs that only read: a read-only key may make them.
_READING_POSTS = frozenset(
    {"/context", "/vectors/search", "/vectors/search/episodes", "/entities/search"}
)
_READING_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def refusal(principal: Principal, method: str, path: str, query: str = "") -> str | None:
    """Why this key may not make this call (answered 403), or None when it may. `query` is
    the raw query string: a dry run of a forget only counts, so a read-only key may ask."""
    if principal.admin:
        return None
    for allowed, pattern in _ADMIN_ONLY:
        if allowed in ("*", method) and pattern.fullmatch(path):
            return f"{method} {path} needs the admin key (NEXUS_API_KEY); this is a project key"
    if _MCP.fullmatch(path):
        return None
    reads = method in _READING_METHODS or path in _READING_POSTS or _dry_run(method, path, query)
    if principal.read_only and not reads:
        return f"this key is read-only: {method} {path} writes"
    return None


def _dry_run(method: str, path: str, query: str) -> bool:
    """`DELETE /episodes?dryRun=true`: counts what a forget would delete, writes nothing."""
    return method == "DELETE" and path == "/episodes" and parse_qs(query).get("dryRun") == ["true"]


def check_project(principal: Principal, project_id: int | None, name: str) -> None:
    """NotFound, worded like a missing row, unless the key sees this project."""
    if not principal.sees(project_id):
        raise NotFound(f"{name} does not exist")
