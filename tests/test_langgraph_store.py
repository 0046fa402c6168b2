"""`NexusStore` held to LangGraph's `BaseStore` contract as LangGraph documents it (no
package ships conformance tests for stores): put, get, delete, search, list_namespaces,
batch and async, filter operators, namespaces whose levels hold `/`, concurrent writes of
one key, nulls in values, and times that move. Against a running service."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import GetOp, PutOp, SearchOp

from nexusai.app import create_app
from nexusai.client import Client
from nexusai.config import Config
from nexusai.integrations.langgraph import NexusStore
from tests.conftest import SwitchableEmbedder
from tests.live_server import live_server

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> Iterator[str]:
    data = Path(tmp_path_factory.mktemp("langgraph")) / "data"
    config = Config.from_env({}, data_dir=data, extractor="none")
    with live_server(create_app(config, SwitchableEmbedder(minilm))) as served:
        yield served


@pytest.fixture
def store(url: str) -> Iterator[NexusStore]:
    with NexusStore(base_url=url) as made:
        yield made


@pytest.fixture
def user() -> str:
    """A project of the test's own: tests share the service, never a namespace."""
    return f"u{uuid.uuid4().hex[:8]}"


def test_put_get_replace_and_delete(store: NexusStore, user: str) -> None:
    ns = (user, "memories")
    assert store.get(ns, "missing") is None
    store.put(ns, "a", {"content": "I like tea", "n": 1})
    first = store.get(ns, "a")
    assert first is not None
    assert (first.key, first.namespace, first.value) == ("a", ns, {"content": "I like tea", "n": 1})
    time.sleep(0.01)
    store.put(ns, "a", {"content": "I like coffee"})
    second = store.get(ns, "a")
    assert second is not None
    assert second.value == {"content": "I like coffee"}  # replaced, not merged
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at  # updated_at moves
    store.delete(ns, "a")
    assert store.get(ns, "a") is None
    store.delete(ns, "a")  # deleting what is gone is no error


def test_nulls_in_a_value_are_kept_on_create_and_on_update(store: NexusStore, user: str) -> None:
    ns = (user,)
    store.put(ns, "k", {"content": "x", "gone": None, "nested": {"a": None}})
    assert store.get(ns, "k").value == {"content": "x", "gone": None, "nested": {"a": None}}  # type: ignore[union-attr]
    store.put(ns, "k", {"content": "y", "gone": None})
    assert store.get(ns, "k").value == {"content": "y", "gone": None}  # type: ignore[union-attr]


def test_namespaces_are_exact(store: NexusStore, user: str) -> None:
    pairs = [((user, "b/c"), "slash"), ((user, "b", "c"), "levels"), ((user,), "one")]
    pairs += [((user, "_"), "underscore"), ((user, "50%"), "percent")]
    for ns, text in pairs:
        store.put(ns, "k", {"content": text})
    for ns, text in pairs:
        assert store.get(ns, "k").value == {"content": text}, ns  # type: ignore[union-attr]
    listed = store.list_namespaces(prefix=(user,))
    assert sorted(listed) == sorted(ns for ns, _ in pairs)
    assert store.list_namespaces(prefix=(user, "b"), max_depth=2) == [(user, "b")]
    assert store.list_namespaces(suffix=("c",)) == [(user, "b", "c")]


def test_filters_take_langgraphs_operators_and_are_never_cut(store: NexusStore, user: str) -> None:
    ns = (user, "facts")
    for i in range(30):
        kind = "rare" if i == 29 else "common"
        store.put(ns, f"k{i}", {"content": f"fact number {i} about tea", "i": i, "kind": kind})
    assert [r.key for r in store.search(ns, filter={"kind": "rare"})] == ["k29"]
    assert [r.key for r in store.search(ns, filter={"kind": {"$eq": "rare"}})] == ["k29"]
    assert len(store.search(ns, filter={"kind": {"$ne": "rare"}}, limit=100)) == 29
    assert sorted(r.value["i"] for r in store.search(ns, filter={"i": {"$gte": 27}})) == [
        27,
        28,
        29,
    ]
    assert sorted(r.value["i"] for r in store.search(ns, filter={"i": {"$gt": 27}})) == [28, 29]
    assert sorted(r.value["i"] for r in store.search(ns, filter={"i": {"$lt": 2}})) == [0, 1]
    assert sorted(r.value["i"] for r in store.search(ns, filter={"i": {"$lte": 1}})) == [0, 1]
    # Ranked by a query, the filter is applied inside the search: the one match lower
    # than any cut a search would make still comes.
    ranked = store.search(ns, query="fact about tea", filter={"kind": "rare"}, limit=1)
    assert [r.key for r in ranked] == ["k29"]
    assert ranked[0].score is not None
    ordered = store.search(ns, query="tea", filter={"i": {"$gte": 28}}, limit=10)
    assert sorted(r.key for r in ordered) == ["k28", "k29"]
    with pytest.raises(ValueError, match="unknown operator"):
        store.search(ns, filter={"i": {"$between": [1, 2]}})


def test_a_search_without_a_prefix_covers_every_project(store: NexusStore, user: str) -> None:
    other = f"{user}x"
    store.put((user, "notes"), "a", {"content": "The shed key is under the pot"})
    store.put((other, "notes"), "b", {"content": "The shed is painted blue"})
    found = store.search((), query="shed", limit=50)
    assert {(r.namespace, r.key) for r in found} >= {
        ((user, "notes"), "a"),
        ((other, "notes"), "b"),
    }
    listed = store.search((user,))
    assert [(r.namespace, r.key) for r in listed] == [((user, "notes"), "a")]


def test_batch_and_async_give_what_the_single_calls_give(store: NexusStore, user: str) -> None:
    ns = (user, "b")
    results = store.batch(
        [
            PutOp(ns, "x", {"content": "one"}),
            GetOp(ns, "x"),
            SearchOp(ns, limit=5),
            PutOp(ns, "x", None),
            GetOp(ns, "x"),
        ]
    )
    assert results[0] is None
    assert results[1].value == {"content": "one"}  # type: ignore[union-attr]
    assert [r.key for r in results[2]] == ["x"]  # type: ignore[union-attr]
    assert results[4] is None

    async def run() -> None:
        await store.aput(ns, "y", {"content": "two"})
        assert (await store.aget(ns, "y")).value == {"content": "two"}  # type: ignore[union-attr]
        await store.adelete(ns, "y")
        assert await store.aget(ns, "y") is None

    asyncio.run(run())


def test_concurrent_puts_of_one_key_leave_one_item(store: NexusStore, user: str, url: str) -> None:
    ns = (user, "race")

    async def run() -> None:
        await asyncio.gather(*(store.aput(ns, "k", {"content": f"v{i}", "i": i}) for i in range(8)))
        held = await store.aget(ns, "k")
        assert held is not None
        await store.adelete(ns, "k")
        assert await store.aget(ns, "k") is None  # no older write left behind

    asyncio.run(run())
    with Client(url) as nexus:
        sid = next(s.id for s in nexus.list_sessions(limit=1000) if s.title == "race")
        assert nexus.list_episodes(sid) == []


def test_an_item_kept_by_an_earlier_version_is_found(url: str, user: str) -> None:
    """Items written before the store kept labels: found by key, listed and replaced."""
    with Client(url) as nexus:
        sid = nexus.resolve_session(title="old", project=user).id
        kept = {"key": "k", "value": {"content": "kept long ago"}, "namespace": [user, "old"]}
        nexus.add_episodes(
            sid, [{"speaker": "store", "content": "kept long ago", "metadata": {"langgraph": kept}}]
        )
    with NexusStore(base_url=url) as store:
        assert store.get((user, "old"), "k").value == {"content": "kept long ago"}  # type: ignore[union-attr]
        store.put((user, "old"), "k", {"content": "kept anew"})
        assert [r.value for r in store.search((user,))] == [{"content": "kept anew"}]
