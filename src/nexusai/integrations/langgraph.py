"""LangGraph: `NexusStore`, a `BaseStore` whose items are episodes, so that an agent
compiled with `store=NexusStore(...)` has long-term memory searched by nexusai's fused
retrieval.

A namespace is a project and a session: `("alice", "memories")` is the session titled
`memories` in the project `alice`; deeper levels join the session's title with `/`, each
level percent-encoded where it holds `/` or `%` (so `("a", "b/c")` and `("a", "b", "c")`
are two namespaces), and a one-level namespace is the project's session `_` (a level that
is itself `_` is written `%5F`). An item is one episode: its text is the value's `content`
(or `text`, or the value as JSON); the value itself is kept, as JSON text, in the
episode's metadata with its key, namespace and times, and the key and each top-level
scalar of the value are also top-level metadata labels, so that a get finds its item and a
search narrows by value through the store's labels index, never by reading a namespace
whole. `search` with a query ranks by `POST /context` over each project under the prefix;
without one it lists the items, newest first. Filters take LangGraph's operators (`$eq`,
`$ne`, `$gt`, `$gte`, `$lt`, `$lte`) and nested objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

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

from nexusai.client import Client, NotFoundError
from nexusai.integrations.common import client_from
from nexusai.schemas import EpisodeOut

MARK = "langgraph"  # the metadata key an item's key, value, namespace and times are kept under
KEY = "langgraphKey"  # the item's key as a label: a get is one indexed read
NAMESPACE = "langgraphNamespace"  # the session's title as a label: a search stays in its prefix
FIELD = "lg:"  # a value's top-level scalar `kind` is the label `lg:kind`
ONE_LEVEL = "_"
PAGE = 1000
PUT_TRIES = 5  # a put that keeps finding its item deleted under it tries this often
DEEPEST = 100  # the most memories one ranked search asks for (recall's k)


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
        self._ids: dict[tuple[str, ...], int] = {}  # namespace -> session id, once found
        self._locks: dict[tuple[tuple[str, ...], str], threading.Lock] = {}
        self._guard = threading.Lock()
        self._upgraded: set[int] = set()  # sessions whose older items have their labels

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
            return self._get(op.namespace, op.key)
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
        """The namespace's session, looked up once (made when `make`)."""
        if namespace in self._ids:
            return self._ids[namespace]
        project, title = _place(namespace)
        if make:
            found: int | None = self.client.resolve_session(title=title, project=project).id
        else:
            found = next((s.id for s in self._sessions(project) if s.title == title), None)
        if found is not None:
            self._upgrade(found)
            self._ids[namespace] = found
        return found

    def _upgrade(self, sid: int) -> None:
        """Items an earlier version kept carry no labels: given theirs, once a process."""
        if sid in self._upgraded:
            return
        self._upgraded.add(sid)
        for episode in self._held(sid, {}):
            kept = episode.metadata[MARK]
            if KEY in episode.metadata:
                continue
            namespace, value = tuple(kept["namespace"]), _value(episode)
            made = _stamp(episode, "createdAt").isoformat()
            labels = _labels(namespace, kept["key"], value, made, made)
            self.client.update_episode(episode.id, {"metadata": labels})

    def _sessions(self, project: str) -> list[Any]:
        named = [p for p in self.client.list_projects(limit=1000) if p.name == project]
        return self.client.list_sessions(named[0].id, limit=1000) if named else []

    def _held(self, sid: int, labels: Mapping[str, Any]) -> list[EpisodeOut]:
        """The items of a session whose labels have these values, oldest first."""
        rule = {"metadata": dict(labels)} if labels else None
        found: list[EpisodeOut] = []
        while page := self.client.list_episodes(sid, PAGE, len(found), rule):
            found += page
            if len(page) < PAGE:
                break
        return [e for e in found if MARK in e.metadata]

    def _found(self, namespace: tuple[str, ...], key: str) -> list[EpisodeOut]:
        """The episodes holding this item: one, unless another process wrote it at once."""
        sid = self._session(namespace, make=False)
        if sid is None:
            return []
        try:
            return self._held(sid, {KEY: key})
        except NotFoundError:  # the session was deleted since it was looked up
            self._ids.pop(namespace, None)
            return self._found(namespace, key) if self._session(namespace, False) else []

    @contextmanager
    def _only(self, namespace: tuple[str, ...], key: str) -> Iterator[None]:
        """One write of a key at a time in this process (LangGraph runs `aput`s at once)."""
        with self._guard:
            lock = self._locks.setdefault((namespace, key), threading.Lock())
        with lock:
            yield

    # -- the operations -------------------------------------------------------------------

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        held = self._found(namespace, key)
        return _item(held[-1]) if held else None

    def _put(self, op: PutOp) -> None:
        """Another worker may write or delete the same key at once (two stores, two
        processes): an item it deleted is gone as asked, an update that finds its item
        deleted starts over, and a put leaves one item, the newest."""
        with self._only(op.namespace, op.key):
            for _ in range(PUT_TRIES):
                try:
                    return self._put_once(op)
                except NotFoundError:
                    continue  # what it read was deleted under it: read again
            self._put_once(op)

    def _put_once(self, op: PutOp) -> None:
        held = self._settled(op.namespace, op.key)
        existing = held[-1] if held else None
        if op.value is None:
            if existing:
                self._delete(existing.id)
            return
        now = _now()
        created = existing.metadata[MARK].get("createdAt", now) if existing else now
        labels = _labels(op.namespace, op.key, op.value, created, now)
        if existing:
            # A merge patch (RFC 7396): labels the old value had and the new one lacks
            # are named as null; the value itself is JSON text, so it is replaced whole.
            gone = {k: None for k in existing.metadata if k not in labels}
            patch = {"content": _text(op.value), "metadata": {**gone, **labels}}
            self.client.update_episode(existing.id, patch)
            return
        sid = self._session(op.namespace, make=True)
        assert sid is not None
        said = {"speaker": "store", "content": _text(op.value), "metadata": labels}
        self.client.add_episodes(sid, [said])
        self._settled(op.namespace, op.key)

    def _settled(self, namespace: tuple[str, ...], key: str) -> list[EpisodeOut]:
        """The item's episodes once the duplicates other writers left are deleted: the
        newest stays (each writer deletes only those older than the newest it sees, so
        none deletes the newest of all)."""
        held = self._found(namespace, key)
        for stale in held[:-1]:
            self._delete(stale.id)
        return held[-1:]

    def _delete(self, episode_id: int) -> None:
        with contextlib.suppress(NotFoundError):  # another writer deleted it: gone as asked
            self.client.delete_episode(episode_id)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        by_project = self._under(op.namespace_prefix)
        pushed, checked = _split(op.filter)
        if op.query:
            found = [
                (episode, score)
                for sessions in by_project.values()
                for episode, score in self._ranked(sessions, op.query, pushed, bool(checked), op)
            ]
            found.sort(key=lambda pair: -(pair[1] or 0.0))
            if len(found) < op.offset + op.limit:  # past what a ranked search reaches
                found += [(e, None) for e in self._rest(by_project, pushed, found)]
        else:
            sids = [sid for sessions in by_project.values() for sid, _ in sessions]
            items = [e for sid in sids for e in self._held(sid, pushed)]
            items.sort(key=lambda e: (_stamp(e, "updatedAt"), e.id), reverse=True)
            found = [(e, None) for e in items]
        kept = [(e, s) for e, s in found if _matches(_value(e), op.filter)]
        return [_search_item(e, s) for e, s in kept[op.offset : op.offset + op.limit]]

    def _rest(
        self,
        by_project: Mapping[str, list[tuple[int, str]]],
        pushed: Mapping[str, Any],
        ranked: Sequence[tuple[EpisodeOut, float | None]],
    ) -> list[EpisodeOut]:
        """The items a ranked search did not reach (it ranks DEEPEST a project), newest
        first, unscored: a query's pages go on to every item, as InMemoryStore's do."""
        seen = {e.id for e, _ in ranked}
        sids = [sid for sessions in by_project.values() for sid, _ in sessions]
        rest = [e for sid in sids for e in self._held(sid, pushed) if e.id not in seen]
        return sorted(rest, key=lambda e: (_stamp(e, "updatedAt"), e.id), reverse=True)

    def _under(self, prefix: tuple[str, ...]) -> dict[str, list[tuple[int, str]]]:
        """{project: [(session id, title)]} of the namespaces that start with the prefix."""
        projects = [p.name for p in self.client.list_projects(limit=1000)]
        if prefix:
            projects = [p for p in projects if p == prefix[0]]
        found: dict[str, list[tuple[int, str]]] = {}
        for project in projects:
            for session in self._sessions(project):
                namespace = _namespace(project, session.title or "")
                if namespace[: len(prefix)] == prefix:
                    self._upgrade(session.id)
                    found.setdefault(project, []).append((session.id, session.title or ""))
        return found

    def _ranked(
        self,
        sessions: list[tuple[int, str]],
        query: str,
        pushed: Mapping[str, Any],
        checked: bool,
        op: SearchOp,
    ) -> list[tuple[EpisodeOut, float | None]]:
        """A project's items for the query, best first: its namespaces under the prefix and
        the filter's plain values chosen inside the search (operators after it, from a
        list as deep as a search goes)."""
        labels = {**pushed, NAMESPACE: [title for _, title in sessions]}
        k = DEEPEST if checked else min(DEEPEST, op.limit + op.offset)
        rule = {"metadata": labels}
        found = self.client.recall(sessions[0][0], query, k, self.budget, rule, standing=False)
        return [(m, m.score) for m in found if MARK in m.metadata]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = []
        for project in self.client.list_projects(limit=1000):
            for session in self._sessions(project.name):
                self._upgrade(session.id)
                if self._held(session.id, {NAMESPACE: session.title or ""}):
                    found.append(_namespace(project.name, session.title or ""))
        kept = [n for n in found if all(_condition(n, c) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            kept = sorted({n[: op.max_depth] for n in kept})
        return kept[op.offset : op.offset + op.limit]


# -- namespaces as session titles ------------------------------------------------------------


def _place(namespace: tuple[str, ...]) -> tuple[str, str]:
    if not namespace:
        raise ValueError("a namespace needs at least one level (the project)")
    return namespace[0], title_of(namespace[1:])


def title_of(levels: tuple[str, ...]) -> str:
    """The session title of a namespace's levels after the project, one to one: only `%`,
    `/` and a level that is `_` are written otherwise, so older titles read as before."""
    if not levels:
        return ONE_LEVEL
    return "/".join(_ESCAPED_ONE if level == ONE_LEVEL else _escaped(level) for level in levels)


_ESCAPED_ONE = "%5F"
_ESCAPES = {"%": "%25", "/": "%2F"}
_UNESCAPES = re.compile("%(25|2F|5F)")


def _escaped(level: str) -> str:
    return "".join(_ESCAPES.get(char, char) for char in level)


def _namespace(project: str, title: str) -> tuple[str, ...]:
    if title == ONE_LEVEL:
        return (project,)
    levels = title.split("/")
    return (project, *(_UNESCAPES.sub(lambda m: unquote(m[0]), level) for level in levels))


# -- items as episodes -----------------------------------------------------------------------


def _labels(
    namespace: tuple[str, ...], key: str, value: Mapping[str, Any], created: str, updated: str
) -> dict[str, Any]:
    """An item's metadata: what it is (the value as JSON text, so a null in it is kept),
    and the labels a get and a search find it by."""
    kept = {
        "key": key,
        "value": json.dumps(value, ensure_ascii=False, sort_keys=True),
        "namespace": list(namespace),
        "createdAt": created,
        "updatedAt": updated,
    }
    scalars = {
        f"{FIELD}{field}": v
        for field, v in value.items()
        if isinstance(v, str | int | float | bool) and field.strip()
    }
    return {MARK: kept, KEY: key, NAMESPACE: title_of(namespace[1:]), **scalars}


def _text(value: Mapping[str, Any]) -> str:
    for field in ("content", "text"):
        if isinstance(value.get(field), str) and value[field].strip():
            return str(value[field])
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _value(episode: EpisodeOut) -> dict[str, Any]:
    kept = episode.metadata[MARK]["value"]
    return dict(json.loads(kept) if isinstance(kept, str) else kept)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _stamp(episode: EpisodeOut, which: str) -> datetime:
    """When the item was made or last written (an episode's creation for one kept before
    the store kept its own times)."""
    said = episode.metadata[MARK].get(which) or episode.created_at
    return datetime.fromisoformat(str(said).replace("Z", "+00:00"))


def _item(episode: EpisodeOut) -> Item:
    kept = episode.metadata[MARK]
    return Item(
        value=_value(episode),
        key=kept["key"],
        namespace=tuple(kept["namespace"]),
        created_at=_stamp(episode, "createdAt"),
        updated_at=_stamp(episode, "updatedAt"),
    )


def _search_item(episode: EpisodeOut, score: float | None) -> SearchItem:
    item = _item(episode)
    return SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)


# -- filters ---------------------------------------------------------------------------------


def _split(wanted: dict[str, Any] | None) -> tuple[dict[str, Any], bool]:
    """The filter's plain scalar values as labels a search narrows by inside the store, and
    whether anything else is left to check after it."""
    pushed: dict[str, Any] = {}
    rest = False
    for field, condition in (wanted or {}).items():
        plain = condition.get("$eq") if _operators(condition) == {"$eq"} else condition
        # The service compares a label that reads as a number as a number (1 matches 1.0,
        # as InMemoryStore does); every value is checked after the search as well.
        if isinstance(plain, str | int | float) and field.strip():
            pushed[f"{FIELD}{field}"] = plain
        else:
            rest = True
    return pushed, rest


def _operators(condition: Any) -> set[str]:
    return set(condition) if isinstance(condition, dict) else set()


def _matches(value: Any, wanted: Mapping[str, Any] | None) -> bool:
    """LangGraph's filter semantics: each field equal, or an object of operators, or a
    nested object matched field by field; a list equal item by item."""
    return all(_meets(_get(value, field), condition) for field, condition in (wanted or {}).items())


def _get(value: Any, field: str) -> Any:
    return value.get(field) if isinstance(value, dict) else None


def _meets(found: Any, condition: Any) -> bool:
    if isinstance(condition, dict):
        if any(str(k).startswith("$") for k in condition):
            return all(_compare(found, op, wanted) for op, wanted in condition.items())
        return isinstance(found, dict) and _matches(found, condition)
    if isinstance(condition, list | tuple):
        return (
            isinstance(found, list | tuple)
            and len(found) == len(condition)
            and all(_meets(f, c) for f, c in zip(found, condition, strict=True))
        )
    return bool(found == condition)


ORDERED = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def _compare(found: Any, operator: str, wanted: Any) -> bool:
    if operator == "$eq":
        return bool(found == wanted)
    if operator == "$ne":
        return bool(found != wanted)
    if operator not in ORDERED:
        raise ValueError(
            f"filter: unknown operator {operator!r}; use $eq, $ne, $gt, $gte, $lt, $lte"
        )
    try:
        return bool(ORDERED[operator](float(found), float(wanted)))
    except (TypeError, ValueError):  # a missing field, or one that is no number
        return False


def _condition(namespace: tuple[str, ...], condition: Any) -> bool:
    """LangGraph's prefix or suffix match, `*` matching any one level."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))
