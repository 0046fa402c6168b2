"""LangGraph: `NexusStore`, a `BaseStore` whose items are episodes, so that an agent
compiled with `store=NexusStore(...)` has long-term memory searched by nexusai's fused
retrieval.

A namespace is a project and a session: `("alice", "memories")` is the session titled
`memories` in the project `alice` (deeper levels join the session's title with `/`; a
one-level namespace is the project's session `_`). An item is one episode: its text is the
value's `content` (or `text`, or the value as JSON), and the value itself is kept in the
episode's metadata, under its key. `search` with a query ranks by `POST /context` over the
project and keeps the items under the prefix; without one it lists them, newest first.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from nexusai.client import Client
from nexusai.integrations.common import all_episodes, client_from
from nexusai.schemas import EpisodeOut, SessionOut

MARK = "langgraph"  # the metadata key an item's key and value are kept under
ONE_LEVEL = "_"


class NexusStore(BaseStore):
    def __init__(
        self,
        client: Client | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        budget: int | None = None,
    ) -> None:
        """`budget`: a search gives the items whose texts fit that many tokens in all
        (contextBudget), the most evidence per token first chosen."""
        self._owned = client is None  # a client it made is its to close
        self.client = client_from(client, base_url, api_key)
        self.budget = budget

    def close(self) -> None:
        if self._owned:
            self.client.close()

    def __enter__(self) -> NexusStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise TypeError(f"NexusStore cannot run {type(op).__name__}")

    # -- namespaces are sessions ----------------------------------------------------------

    def _session(self, namespace: tuple[str, ...], make: bool) -> int | None:
        project, title = _place(namespace)
        if make:
            return self.client.resolve_session(title=title, project=project).id
        for session in self._sessions(project):
            if session.title == title:
                return session.id
        return None

    def _sessions(self, project: str) -> list[SessionOut]:
        named = [p for p in self.client.list_projects(limit=1000) if p.name == project]
        return self.client.list_sessions(named[0].id, limit=1000) if named else []

    def _items(self, session_id: int) -> list[EpisodeOut]:
        return [e for e in all_episodes(self.client, session_id) if MARK in e.metadata]

    def _find(self, namespace: tuple[str, ...], key: str) -> EpisodeOut | None:
        sid = self._session(namespace, make=False)
        if sid is None:
            return None
        held = [e for e in self._items(sid) if e.metadata[MARK].get("key") == key]
        return held[-1] if held else None

    # -- the operations -------------------------------------------------------------------

    def _get(self, op: GetOp) -> Item | None:
        episode = self._find(op.namespace, op.key)
        return _item(episode, op.namespace) if episode else None

    def _put(self, op: PutOp) -> None:
        existing = self._find(op.namespace, op.key)
        if op.value is None:
            if existing:
                self.client.delete_episode(existing.id)
            return
        metadata = {MARK: {"key": op.key, "value": op.value, "namespace": list(op.namespace)}}
        if existing:
            # metadata is patched (RFC 7396): what the old value had and the new one lacks
            # is named as null, so the item is replaced, not merged.
            patch = {
                "content": _text(op.value),
                "metadata": _replacing(existing.metadata, metadata),
            }
            self.client.update_episode(existing.id, patch)
            return
        sid = self._session(op.namespace, make=True)
        assert sid is not None
        said = {"speaker": "store", "content": _text(op.value), "metadata": metadata}
        self.client.add_episodes(sid, [said])

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = op.namespace_prefix
        sessions = self._under(prefix)
        if not sessions:
            return []
        if op.query:
            items = self._ranked(sessions, op.query, op.limit + op.offset)
        else:
            items = [(e, None) for sid in sessions for e in reversed(self._items(sid))]
        kept = [(e, s) for e, s in items if _matches(e.metadata[MARK]["value"], op.filter)]
        return [_search_item(e, s) for e, s in kept[op.offset : op.offset + op.limit]]

    def _under(self, prefix: tuple[str, ...]) -> list[int]:
        """The sessions whose namespaces start with the prefix."""
        if not prefix:
            return [
                s.id for p in self.client.list_projects(limit=1000) for s in self._sessions(p.name)
            ]
        wanted = prefix[1:]
        return [
            s.id
            for s in self._sessions(prefix[0])
            if tuple((s.title or "").split("/"))[: len(wanted)] == wanted or (not wanted)
        ]

    def _ranked(
        self, sessions: list[int], query: str, limit: int
    ) -> list[tuple[EpisodeOut, float | None]]:
        # The project's memories, deeper than asked: those outside the prefix are left out.
        found = self.client.recall(sessions[0], query, min(100, max(limit * 4, 10)), self.budget)
        inside = set(sessions)
        return [(m, m.score) for m in found if m.session_id in inside and MARK in m.metadata]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = []
        for project in self.client.list_projects(limit=1000):
            for session in self._sessions(project.name):
                if any(MARK in e.metadata for e in self.client.list_episodes(session.id, limit=1)):
                    found.append(_namespace(project.name, session.title or ""))
        kept = [n for n in found if all(_condition(n, c) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            kept = sorted({n[: op.max_depth] for n in kept})
        return kept[op.offset : op.offset + op.limit]


def _place(namespace: tuple[str, ...]) -> tuple[str, str]:
    if not namespace:
        raise ValueError("a namespace needs at least one level (the project)")
    return namespace[0], "/".join(namespace[1:]) or ONE_LEVEL


def _namespace(project: str, title: str) -> tuple[str, ...]:
    return (project,) if title == ONE_LEVEL else (project, *title.split("/"))


def _text(value: Mapping[str, Any]) -> str:
    for field in ("content", "text"):
        if isinstance(value.get(field), str) and value[field].strip():
            return str(value[field])
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _item(episode: EpisodeOut, namespace: tuple[str, ...]) -> Item:
    kept = episode.metadata[MARK]
    when = _when(episode.created_at)
    return Item(
        value=kept["value"], key=kept["key"], namespace=namespace, created_at=when, updated_at=when
    )


def _search_item(episode: EpisodeOut, score: float | None) -> SearchItem:
    kept = episode.metadata[MARK]
    when = _when(episode.created_at)
    return SearchItem(tuple(kept["namespace"]), kept["key"], kept["value"], when, when, score)


def _replacing(old: Any, new: Any) -> Any:
    """The JSON merge patch that turns `old` into `new`."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return new
    patch = {key: None for key in old if key not in new}
    patch.update({key: _replacing(old.get(key), value) for key, value in new.items()})
    return patch


def _matches(value: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    return all(value.get(k) == v for k, v in (wanted or {}).items())


def _condition(namespace: tuple[str, ...], condition: Any) -> bool:
    """LangGraph's prefix or suffix match, `*` matching any one level."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))
