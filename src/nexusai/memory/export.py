"""A project's memory as JSONL in the format `nexus import` reads (`importing.read_jsonl`):
first the project's own line (its name and retention), then one episode a line: its id,
its session's title and id, speaker, content, time, metadata, caption, pin and its own
expiry. Sessions one after another, each in time order, a session with no episodes as a
line of its own: an import makes the same sessions again, with their titles."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from nexusai.errors import NotFound
from nexusai.memory.store import EpisodeStore
from nexusai.models import Episode, Project, Session

PAGE = 1000


def named_project(store: EpisodeStore, name: str) -> Project:
    """The project called `name` or, when none is, the one of that id; NotFound naming the
    projects there are."""
    project = store.projects.find(name)
    if project is None and name.isascii() and name.isdigit():
        with contextlib.suppress(NotFound):
            project = store.projects.get(int(name))
    if project is None:
        known = ", ".join(repr(p.name) for p in store.projects.page(limit=50)) or "none"
        raise NotFound(f"there is no project named {name!r}; projects: {known}")
    return project


def project_lines(store: EpisodeStore, project: Project) -> Iterator[dict[str, Any]]:
    """The project's line, then every episode of it, as export lines."""
    yield {"project": project.name, "retentionDays": project.retention_days}
    for session in _all_sessions(store, project.id):
        said = False
        for episode in _all_episodes(store, session.id):
            said = True
            yield line(episode, session)
        if not said:  # a session with no episodes is kept too, as a line of its own
            yield {"session": session.title, "sessionId": session.id}


# The keys of the format, written here and read by `importing.read_jsonl` (which takes
# no other): `id` is the exporting store's, read and left (a store gives its own ids).
JSONL_KEYS = {
    "id",
    "session",
    "sessionId",
    "speaker",
    "content",
    "occurredAt",
    "metadata",
    "imageCaption",
    "pinned",
    "expiresAt",
}


def line(episode: Episode, session: Session) -> dict[str, Any]:
    """One episode as `nexus import` reads it; empty fields left out."""
    out: dict[str, Any] = {
        "id": episode.id,
        "session": session.title,
        "sessionId": session.id,
        "speaker": episode.speaker,
        "content": episode.content,
        "occurredAt": episode.occurred_at,
    }
    if episode.metadata:
        out["metadata"] = episode.metadata
    if episode.image_caption is not None:
        out["imageCaption"] = episode.image_caption
    if episode.pinned:
        out["pinned"] = True
    if episode.expiry_asked is not None:  # its own: the retention comes with the project
        out["expiresAt"] = episode.expiry_asked
    return out


def as_jsonl(line: dict[str, Any]) -> str:
    return json.dumps(line, ensure_ascii=False) + "\n"


def _all_sessions(store: EpisodeStore, project_id: int) -> list[Session]:
    found: list[Session] = []
    while page := store.sessions.page(project_id, PAGE, len(found)):
        found += page
    return found


def _all_episodes(store: EpisodeStore, session_id: int) -> Iterator[Episode]:
    offset = 0
    while page := store.episodes.page(session_id, PAGE, offset):
        yield from page
        offset += len(page)
