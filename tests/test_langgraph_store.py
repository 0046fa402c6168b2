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


RULES = [
    "I prefer short answers.",
    "I prefer metric units.",
    "My favourite colour is teal.",
    "I prefer tea to coffee.",
    "My favourite season is autumn.",
    "I prefer trains to buses.",
]


def test_a_search_answers_its_query_however_many_rules_the_namespace_holds(
    store: NexusStore, user: str
) -> None:
    """The shape of docs/integrations.md's example: the rules are items like any other,
    and never push the answer out of `limit`."""
    ns = (user, "memories")
    for i, rule in enumerate(RULES):
        store.put(ns, f"rule-{i}", {"text": rule})
    store.put(ns, "dog", {"text": "The user's dog is a beagle called Biscuit"})
    found = store.search(ns, query="what breed is the user's dog?", limit=3)
    assert found[0].key == "dog"
    assert all(item.score is not None for item in found)


def test_numbers_in_a_filter_compare_as_numbers(store: NexusStore, user: str) -> None:
    ns = (user, "numbers")
    store.put(ns, "a", {"n": 1.0, "f": 1})
    store.put(ns, "b", {"n": 2, "f": "1"})
    assert [i.key for i in store.search(ns, filter={"n": 1})] == ["a"]
    assert [i.key for i in store.search(ns, filter={"f": 1.0})] == ["a"]
    assert [i.key for i in store.search(ns, filter={"f": "1"})] == ["b"]
    assert [i.key for i in store.search(ns, query="one", filter={"n": 1})] == ["a"]


def test_a_query_search_pages_past_the_ranked_depth(store: NexusStore, user: str) -> None:
    """InMemoryStore gives every item to a query's pages; a ranked search reaches 100."""
    ns = (user, "many")
    store.batch([PutOp(ns, f"k{i:03}", {"text": f"note number {i}"}) for i in range(130)])
    assert len(store.search(ns, query="note", limit=20, offset=90)) == 20
    assert len(store.search(ns, query="note", limit=20, offset=100)) == 20
    every = store.search(ns, query="note", limit=200)
    assert len({i.key for i in every}) == 130


TWO_WORKERS = """
import sys
from nexusai.integrations.langgraph import NexusStore

url, user, worker = sys.argv[1], sys.argv[2], int(sys.argv[3])
with NexusStore(base_url=url) as store:
    for round in range(6):
        store.put((user, "shared"), "k", {"worker": worker, "round": round})
        if worker == 1 and round % 2:
            store.delete((user, "shared"), "k")
"""


@pytest.mark.subprocess
def test_two_stores_in_two_processes_writing_one_key(url: str, user: str) -> None:
    """Two workers: a delete of what the other deleted counts as done, an update of what
    it just deleted starts over, and their puts leave one item."""
    import subprocess
    import sys

    for _ in range(3):
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", TWO_WORKERS, url, user, str(n)], stderr=subprocess.PIPE
            )
            for n in (0, 1)
        ]
        for worker in workers:
            _, err = worker.communicate(timeout=120)
            assert worker.returncode == 0, err.decode()[-2000:]
        with NexusStore(base_url=url) as store:
            store.put((user, "shared"), "k", {"settled": True})
            assert len(store.search((user, "shared"))) == 1
            assert store.get((user, "shared"), "k").value == {"settled": True}  # type: ignore[union-attr]
