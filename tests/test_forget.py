"""Forgetting by a filter (`DELETE /episodes`): a dry run counts and changes nothing, and
after a forget nothing of an episode is found through any route, either leg, the whole-table
keyword copy, the standing list or the entity search."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.cli import cli
from nexusai.config import Config
from nexusai.memory.extractors import SpacyExtractor
from nexusai.memory.importing import import_stream
from nexusai.memory.repositories.derived import VectorState
from nexusai.memory.service import CATCH_UP, FORGET_CHUNK, Memory
from nexusai.models import EpisodeFilter, NewEpisode
from tests.conftest import SwitchableEmbedder, entities_settled
from tests.live_server import live_server

ON_BOTH_STORES = True  # its tests that open a store run on SQLite and on PostgreSQL

GONE = "Maria Lopez moved to Lisbon in March. I prefer window seats on trains."


@pytest.fixture
def served(
    config: Config, embedder: SwitchableEmbedder, spacy_extractor: SpacyExtractor
) -> Iterator[tuple[TestClient, Memory]]:
    memory = Memory.open(config, embedder, extractor=spacy_extractor)
    with TestClient(create_app(config, embedder, memory=memory)) as client:
        yield client, memory


def _session(client: TestClient, project: int, *episodes: dict[str, Any]) -> tuple[int, list[int]]:
    sid = client.post("/sessions", json={"projectId": project}).json()["id"]
    stored = client.post(f"/sessions/{sid}/episodes", json={"episodes": list(episodes)})
    return sid, [e["id"] for e in stored.json()["episodes"]]


def _ids(found: Any) -> list[int]:
    return [int(e["id"]) for e in found]


def test_a_forgotten_episode_is_found_by_no_route(
    served: tuple[TestClient, Memory], embedder: SwitchableEmbedder
) -> None:
    client, _memory = served
    project = client.post("/projects", json={"name": "home"}).json()["id"]
    first, (gone, kept) = _session(
        client,
        project,
        {"speaker": "user", "content": GONE, "metadata": {"topic": "travel"}},
        {
            "speaker": "user",
            "content": "The bread recipe needs flour.",
            "metadata": {"topic": "food"},
        },
    )
    second, _ = _session(client, project, {"speaker": "user", "content": "Biscuit likes Lisbon"})
    entities_settled(client)
    asked = {"sessionIds": str(first), "metadata.topic": "travel"}
    counted = client.delete("/episodes", params={**asked, "dryRun": "true"}).json()
    assert counted == {"episodes": 1, "episodeIds": [gone], "dryRun": True}
    assert client.get(f"/episodes/{gone}").status_code == 200  # a dry run changes nothing
    assert client.get("/episodes/standing").json()[0]["id"] == gone  # a stated preference
    assert "Lisbon" in [
        e["name"] for e in client.get("/entities", params={"sessionId": first}).json()
    ]
    before = _forgotten(client)
    done = client.delete("/episodes", params=asked).json()
    assert done == {"episodes": 1, "episodeIds": [gone], "dryRun": False}

    assert client.get(f"/episodes/{gone}").status_code == 404
    assert client.get("/episodes", params={"ids": str(gone)}).json() == []
    assert _ids(client.get(f"/sessions/{first}/episodes").json()) == [kept]
    for scope in ({}, {"sessionIds": f"{first},{second}"}):  # the whole table, and a scope
        found = client.get("/episodes/search", params={"q": "Maria Lopez Lisbon", **scope})
        assert gone not in _ids(found.json())
    vector = embedder.embed_one(GONE)
    hits = client.post("/vectors/search", json={"vector": vector, "limit": 10}).json()
    assert gone not in [h["id"] for h in hits]
    turn = client.post(
        "/context", json={"sessionId": second, "message": "Where did Maria Lopez move?"}
    ).json()
    assert gone not in _ids(turn["memories"]) + _ids(turn.get("standing", []))
    assert client.get("/episodes/standing").json() == []
    names = [e["name"] for e in client.get("/entities", params={"sessionId": first}).json()]
    assert "Maria Lopez" not in names  # mentioned only there: gone with it
    assert _forgotten(client) == before + 1


def _forgotten(client: TestClient) -> float:
    """The process's count of episodes forgotten by a filter, from /metrics."""
    line = 'nexus_episodes_forgotten_total{how="filter"} '
    found = [row for row in client.get("/metrics").text.splitlines() if row.startswith(line)]
    return float(found[0].removeprefix(line)) if found else 0.0


@pytest.mark.parametrize(
    ("params", "status", "says"),
    [
        ({}, 422, "give sessionIds or a filter"),
        ({"after": "last tuesday"}, 422, "after"),
        ({"after": "2026-03-02T00:00:00Z", "before": "2026-03-01T00:00:00Z"}, 422, "earlier"),
        ({"speakr": "user"}, 422, "unknown query parameter 'speakr'"),
        ({"metadata.": "x"}, 422, "name a metadata key"),
        ({"sessionIds": "999", "speaker": "user"}, 404, "session 999"),
        ({"sessionIds": "1,x"}, 422, "sessionIds"),
    ],
)
def test_a_refused_forget_names_what_to_fix_and_deletes_nothing(
    served: tuple[TestClient, Memory], params: dict[str, str], status: int, says: str
) -> None:
    client, memory = served
    project = client.post("/projects", json={"name": "home"}).json()["id"]
    _session(client, project, {"speaker": "user", "content": "keep me"})
    refused = client.delete("/episodes", params=params)
    assert refused.status_code == status
    assert says in refused.json()["detail"]
    assert memory.store.episodes.count() == 1


def test_forget_from_the_command_line(
    served: tuple[TestClient, Memory], config: Config, embedder: SwitchableEmbedder
) -> None:
    _, memory = served
    with live_server(create_app(config, embedder, memory=memory)) as url:
        runner = CliRunner()
        sid = runner.invoke(cli, ["sessions", "create", "--url", url]).output.split()[1]
        for text in ("alpha note", "beta note"):
            runner.invoke(cli, ["add", "--session", sid, text, "--url", url])
        rule = ["--session", sid, "--after", "2000-01-01", "--speaker", "user", "--url", url]
        counted = runner.invoke(cli, ["forget", *rule, "--dry-run"])
        assert counted.output == "2 episodes would be forgotten (dry run)\n"
        assert memory.store.episodes.count() == 2
        wrong = runner.invoke(cli, ["forget", *rule, "--metadata", "topic"])
        assert "write KEY=VALUE" in wrong.output
        when = runner.invoke(cli, ["forget", "--after", "last week", "--url", url])
        assert when.exit_code == 2
        assert "--after:" in when.output
        assert "Value error" not in when.output
        assert "Traceback" not in when.output
        declined = runner.invoke(cli, ["forget", *rule], input="n\n")
        assert declined.exit_code == 1  # asked first, and nothing was deleted
        assert "Forget 2 episodes?" in declined.output
        assert memory.store.episodes.count() == 2
        one = ["--session", sid, "--metadata", "x=1", "--url", url]
        assert (
            runner.invoke(cli, ["forget", *one]).output == "no episode matches: nothing forgotten\n"
        )
        dry = runner.invoke(cli, ["forget", *one, "--dry-run"]).output
        assert dry == "0 episodes would be forgotten (dry run)\n"
        done = runner.invoke(cli, ["forget", *rule], input="y\n")
        assert done.output.endswith("2 episodes forgotten\n")
        assert memory.store.episodes.count() == 0
        runner.invoke(cli, ["add", "--session", sid, "gamma note", "--url", url])
        yes = runner.invoke(cli, ["forget", "--session", sid, "--yes", "--url", url])
        assert yes.output == "1 episode forgotten\n"


def test_a_filtered_search_ranks_only_what_the_filter_keeps(
    served: tuple[TestClient, Memory],
) -> None:
    """The filter is inside the keyword search: `limit` results that it keeps come back
    whenever that many match, though better matches it leaves out are many; with a scope
    and over the whole table (the in-memory copy's path)."""
    client, _ = served
    project = client.post("/projects", json={"name": "home"}).json()["id"]
    better = [
        {
            "speaker": "user",
            "content": "zebra zebra zebra crossing",
            "occurredAt": f"2026-03-{d:02}",
        }
        for d in range(10, 30)
    ]
    worse = [
        {
            "speaker": "guide",
            "content": f"a zebra at the zoo, day {d}, with many other animals and words",
            "occurredAt": f"2026-01-{d:02}",
            "metadata": {"trip": "zoo" if d % 2 else "park"},
        }
        for d in range(1, 13)
    ]
    sid, ids = _session(client, project, *better, *worse)
    guide = ids[len(better) :]
    scopes: list[dict[str, Any]] = [{"sessionIds": str(sid)}, {}]
    for scope in scopes:
        everything = client.get("/episodes/search", params={"q": "zebra", "limit": 5, **scope})
        assert set(_ids(everything.json())) <= set(ids[: len(better)])  # the better ones lead
        asked: dict[str, Any] = {"q": "zebra", "limit": 5, "speaker": "guide", **scope}
        found = _ids(client.get("/episodes/search", params=asked).json())
        assert len(found) == 5
        assert set(found) <= set(guide)
        window = {**asked, "before": "2026-01-04T00:00:00Z"}
        assert sorted(_ids(client.get("/episodes/search", params=window).json())) == guide[:3]
        zoo = {**asked, "limit": 20, "metadata.trip": "zoo"}
        assert sorted(_ids(client.get("/episodes/search", params=zoo).json())) == guide[::2]
        both = {**zoo, "metadata.trip": ["zoo", "park"]}
        assert len(client.get("/episodes/search", params=both).json()) == len(guide)


def test_an_expired_episode_is_never_returned_and_the_upkeep_deletes_it(
    served: tuple[TestClient, Memory], embedder: SwitchableEmbedder
) -> None:
    client, memory = served
    project = client.post("/projects", json={"name": "home"}).json()["id"]
    soon = {"speaker": "user", "content": GONE, "expiresAt": "2000-01-01T00:00:00Z"}
    later = {"speaker": "user", "content": "Lisbon has trams", "expiresAt": "2999-01-01T00:00Z"}
    first, (gone, kept) = _session(client, project, soon, later)
    second, _ = _session(client, project, {"speaker": "user", "content": "hello"})
    # Past its time, before the upkeep has run: no read returns it.
    assert client.get(f"/episodes/{gone}").status_code == 404
    assert client.get("/episodes", params={"ids": f"{gone},{kept}"}).json()[0]["id"] == kept
    assert _ids(client.get(f"/sessions/{first}/episodes").json()) == [kept]
    for scope in ({}, {"sessionIds": str(first)}):
        found = client.get("/episodes/search", params={"q": "Maria Lopez Lisbon", **scope})
        assert _ids(found.json()) == [kept]
    hits = client.post("/vectors/search", json={"vector": embedder.embed_one(GONE)}).json()
    assert gone not in [h["id"] for h in hits]
    turn = client.post("/context", json={"sessionId": second, "message": "Maria Lopez?"}).json()
    assert gone not in _ids(turn["memories"]) + _ids(turn.get("standing", []))
    assert client.get("/episodes/standing").json() == []  # its preference is gone with it
    assert client.get(f"/episodes/{kept}").json()["expiresAt"] == "2999-01-01T00:00:00.000000Z"
    # The upkeep deletes it from every index; the other stays.
    assert memory.forget_expired() == 1
    assert memory.store.episodes.expired_ids() == []
    assert memory.store.episodes.matching_ids([first], EpisodeFilter()) == [kept]
    cleared = client.patch(f"/episodes/{kept}", json={"expiresAt": None}).json()
    assert cleared["expiresAt"] is None
    again = client.patch(f"/episodes/{kept}", json={"expiresAt": "2000-01-01T00:00:00Z"})
    assert again.json()["id"] == kept  # the answer of the change itself
    assert client.get(f"/episodes/{kept}").status_code == 404


def test_a_projects_retention_sets_every_deadline(served: tuple[TestClient, Memory]) -> None:
    client, memory = served
    made = client.post("/projects", json={"name": "home", "retentionDays": 30}).json()
    assert made["retentionDays"] == 30
    old = {"speaker": "user", "content": "Maria Lopez moved", "occurredAt": "2020-01-01T00:00Z"}
    own = {"speaker": "user", "content": "a note", "expiresAt": "2000-06-01T00:00:00Z"}
    new = {"speaker": "user", "content": "Lisbon has trams"}
    session, (gone, mine, kept) = _session(client, made["id"], old, own, new)
    # Said more than 30 days ago: never returned; its own expiry still counts for the next.
    assert client.get(f"/episodes/{gone}").status_code == 404
    assert client.get(f"/episodes/{mine}").status_code == 404
    assert client.get(f"/episodes/{kept}").json()["expiresAt"] is not None
    # Lengthened, then cleared, before the upkeep ran: what was past its deadline stays
    # gone (the same as after the upkeep), the live ones' deadlines are set anew at once.
    assert client.patch(f"/projects/{made['id']}", json={"retentionDays": 36500}).is_success
    assert client.get(f"/episodes/{gone}").status_code == 404
    assert client.get(f"/episodes/{kept}").json()["expiresAt"].startswith("21")
    cleared = client.patch(f"/projects/{made['id']}", json={"retentionDays": None}).json()
    assert cleared["retentionDays"] is None
    assert client.get(f"/episodes/{gone}").status_code == 404
    assert client.get(f"/episodes/{mine}").status_code == 404
    assert client.get(f"/episodes/{kept}").json()["expiresAt"] is None
    # The upkeep deletes what is past its deadline, and only that.
    assert memory.forget_expired() == 2
    assert _ids(client.get(f"/sessions/{session}/episodes").json()) == [kept]
    client.patch(f"/projects/{made['id']}", json={"retentionDays": 30})
    for bad in ({"retentionDays": 0}, {"retentionDays": "30"}, {}, {"retention": 30}):
        refused = client.patch(f"/projects/{made['id']}", json=bad)
        assert refused.status_code == 422, bad
    assert client.get(f"/projects/{made['id']}").json()["retentionDays"] == 30  # unchanged
    assert client.patch("/projects/999", json={"retentionDays": 5}).status_code == 404


def test_an_expired_episodes_entities_are_never_returned(
    served: tuple[TestClient, Memory], embedder: SwitchableEmbedder
) -> None:
    """Before the upkeep deletes an expired episode, no entity read returns what it alone
    mentions, nor counts its mentions."""
    client, memory = served
    project = client.post("/projects", json={"name": "home"}).json()["id"]
    soon = {"speaker": "user", "content": GONE, "expiresAt": "2999-01-01T00:00:00Z"}
    also = {"speaker": "user", "content": "Lisbon was sunny today."}
    first, (gone, kept) = _session(client, project, soon, also)
    memory.extract_pending()
    entities = client.get("/entities", params={"sessionId": first}).json()
    maria = next(e for e in entities if e["name"] == "Maria Lopez")
    lisbon = next(e for e in entities if e["name"] == "Lisbon")
    assert lisbon["mentionCount"] == 2
    client.patch(f"/episodes/{gone}", json={"expiresAt": "2000-01-01T00:00:00Z"})
    assert memory.store.episodes.expired_ids() == [gone]  # the upkeep has not run

    names = {e["name"]: e for e in client.get("/entities", params={"sessionId": first}).json()}
    assert "Maria Lopez" not in names
    assert names["Lisbon"]["mentionCount"] == 1
    assert names["Lisbon"]["latestMentionIds"] == [kept]
    assert client.get(f"/entities/{maria['id']}").status_code == 404
    assert [m["id"] for m in client.get(f"/entities/{lisbon['id']}").json()["mentions"]] == [kept]
    found = client.get("/entities", params={"sessionId": first, "prefix": "mar"}).json()
    assert found == []
    turn = client.post("/context", json={"sessionId": first, "message": "Maria Lopez?"}).json()
    assert "Maria Lopez" not in [e["name"] for e in turn["entities"]]
    hits = client.get("/entities", params={"q": "Maria Lopez", "sessionId": first})
    assert "Maria Lopez" not in [e["name"] for e in hits.json()]


def test_a_forget_counts_what_reads_show_and_deletes_the_hidden_too(
    served: tuple[TestClient, Memory],
) -> None:
    client, memory = served
    made = client.post("/projects", json={"name": "home", "retentionDays": 100}).json()
    old = {"speaker": "user", "content": "said long ago", "occurredAt": "2020-01-01T00:00Z"}
    own = {"speaker": "user", "content": "a note", "expiresAt": "2000-06-01T00:00:00Z"}
    new = {"speaker": "user", "content": "said today"}
    sid, (hidden, expired, shown) = _session(client, made["id"], old, own, new)
    asked = {"sessionIds": str(sid), "dryRun": "true"}
    counted = client.delete("/episodes", params=asked).json()
    assert (counted["episodes"], counted["episodeIds"]) == (1, [shown])
    visible = client.get("/episodes", params={"ids": ",".join(map(str, counted["episodeIds"]))})
    assert _ids(visible.json()) == counted["episodeIds"]  # what it counts, a read returns
    done = client.delete("/episodes", params={"sessionIds": str(sid)}).json()
    assert (done["episodes"], done["episodeIds"]) == (1, [shown])
    assert memory.store.episodes.matching_ids([sid], EpisodeFilter()) == []  # the hidden went too
    assert memory.store.episodes.expired_ids() == []
    client.patch(f"/projects/{made['id']}", json={"retentionDays": None})
    assert client.get(f"/sessions/{sid}/episodes").json() == []  # neither comes back
    for gone in (hidden, expired):
        assert client.get(f"/episodes/{gone}").status_code == 404


def test_back_dating_past_the_retention_says_so_and_null_is_refused(
    served: tuple[TestClient, Memory],
) -> None:
    client, _ = served
    made = client.post("/projects", json={"name": "home", "retentionDays": 100}).json()
    _, [moved, kept] = _session(
        client, made["id"], {"speaker": "user", "content": "a"}, {"speaker": "user", "content": "b"}
    )
    refused = client.patch(f"/episodes/{kept}", json={"occurredAt": None})
    assert refused.status_code == 422
    assert "occurredAt: give a new value" in refused.json()["detail"]
    yesterday = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    fine = client.patch(f"/episodes/{kept}", json={"occurredAt": yesterday})
    assert fine.json()["warnings"] == []
    answer = client.patch(f"/episodes/{moved}", json={"occurredAt": "2020-01-01"})
    assert answer.status_code == 200
    [said] = answer.json()["warnings"]
    assert f"episode {moved} is past its expiry" in said
    assert client.get(f"/episodes/{moved}").status_code == 404


def test_a_write_already_expired_says_so_and_is_counted_nowhere(
    served: tuple[TestClient, Memory], tmp_path: Any
) -> None:
    client, memory = served
    made = client.post("/projects", json={"name": "home", "retentionDays": 30}).json()
    sid = client.post("/sessions", json={"projectId": made["id"]}).json()["id"]
    before = client.get("/health").json()["episodes"]
    old = {"speaker": "user", "content": "long ago", "occurredAt": "2020-01-01T00:00:00Z"}
    stored = client.post(f"/sessions/{sid}/episodes", json=old)
    assert stored.status_code == 201
    assert stored.json()["expiresAt"] == "2020-01-31T00:00:00.000000Z"  # said: gone already
    [said] = stored.json()["warnings"]
    assert "was stored past its expiry" in said
    own = {"speaker": "user", "content": "a note", "expiresAt": "2001-01-01"}
    batch = client.post(f"/sessions/{sid}/episodes", json={"episodes": [own]}).json()
    assert batch["episodes"][0]["expiresAt"] == "2001-01-01T00:00:00.000000Z"
    assert batch["episodes"][0]["warnings"]
    fresh = client.post(f"/sessions/{sid}/episodes", json={"speaker": "user", "content": "now"})
    assert fresh.json()["expiresAt"] > "2026"
    assert "warnings" not in fresh.json()  # said only when there is one
    assert client.get("/health").json()["episodes"] == before + 1
    listed = client.get(f"/sessions/{sid}/episodes")
    assert listed.headers["X-Total-Count"] == "1"
    lines = [
        {"session": "s", "speaker": "user", "content": "long ago", "occurredAt": "2020-01-01"},
        {"session": "s", "speaker": "user", "content": "a note", "expiresAt": "2001-01-01"},
        {"session": "s", "speaker": "user", "content": "kept"},
    ]
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with path.open("rb") as stream:
        summary = import_stream(memory, stream, "jsonl", "home")
    assert (summary.episodes, summary.skipped) == (1, 2)


@pytest.mark.slow
def test_a_forget_of_many_chunks_leaves_nothing_and_lets_writes_through(
    served: tuple[TestClient, Memory], embedder: SwitchableEmbedder
) -> None:
    """A forget bigger than many chunks deletes every episode it matches, from every index,
    and a write that comes while it runs is stored before it ends, not after."""
    client, memory = served
    project = client.post("/projects", json={"name": "log"}).json()["id"]
    many = 12 * FORGET_CHUNK + 7
    said = [f"Heron sighting number {i} at the north canal lock" for i in range(many)]
    gone: list[int] = []
    for start in range(0, many, 200):
        batch = [
            {"speaker": "user", "content": text, "metadata": {"tag": "birds"}}
            for text in said[start : start + 200]
        ]
        gone += _session(client, project, *batch)[1]
    kept_sid, kept = _session(client, project, {"speaker": "user", "content": "Heron soup recipe"})
    rule = EpisodeFilter(metadata=(("tag", ("birds",)),))
    with ThreadPoolExecutor(1) as pool:
        forgetting = pool.submit(memory.forget, None, rule)
        while len(memory.store.episodes.matching_ids(None, rule)) == many and not forgetting.done():
            time.sleep(0.001)  # until its first chunk is deleted
        written = memory.add_episodes(kept_sid, [NewEpisode("user", "A heron at the weir")])
        left_when_written = len(memory.store.episodes.matching_ids(None, rule))
        assert sorted(forgetting.result()) == sorted(gone)
    assert 0 < left_when_written < many  # stored while the forget was still deleting
    assert memory.store.episodes.matching_ids(None, rule) == []
    found = client.get("/episodes/search", params={"q": "heron canal lock", "limit": 50}).json()
    assert set(_ids(found)) <= {*kept, written[0].id}
    hits = client.post(
        "/vectors/search", json={"vector": embedder.embed_one(said[0]), "limit": 50}
    ).json()
    assert not {h["id"] for h in hits} & set(gone)


def test_the_turns_after_forgotten_ones_are_indexed_behind_the_forget(
    config: Config, embedder: SwitchableEmbedder
) -> None:
    """A kept turn that followed a forgotten one is read with a new neighbour: the forget
    leaves its vector to the background (a forget of thousands would otherwise embed as
    many), which makes it soon after, for every such turn."""
    memory = Memory.open(config, embedder)
    memory.start()  # its repair of vectors left from before ends at once: there are none
    try:
        pairs = 3 * CATCH_UP + 5
        sid = _heron_pairs(memory, pairs)
        assert memory.count_pending_vectors() == 0
        memory.forget(None, BIRDS)
        kept = [e.id for e in memory.store.episodes.page(sid)]
        assert len(kept) == pairs
        _until_none_pending(memory)
        assert set(memory.vector_states(kept).values()) == {VectorState.INDEXED}
    finally:
        memory.close()


def test_the_vectors_a_forget_leaves_wait_until_no_forget_runs(
    config: Config, embedder: SwitchableEmbedder
) -> None:
    """While any forget runs, the turns after forgotten ones keep their old vectors (found
    as before), so the forget's chunks and the turns beside it keep the cores; their new
    vectors are made once none runs."""
    memory = Memory.open(config, embedder)
    memory.start()
    try:
        pairs = CATCH_UP + 3
        _heron_pairs(memory, pairs)
        with _another_forget(memory):
            memory.forget(None, BIRDS)
            assert _held_back(memory), "the background never reached the forgets' gate"
            assert memory.count_pending_vectors() == pairs
        _until_none_pending(memory)
        assert memory.count_pending_vectors() == 0
    finally:
        memory.close()


def test_a_write_makes_only_the_vectors_it_made_due(
    config: Config, embedder: SwitchableEmbedder
) -> None:
    """A write leaves the turns a forget left waiting to the background, even in its own
    session: an append makes none; a turn written before another makes that one's."""
    memory = Memory.open(config, embedder)
    memory.start()
    try:
        pairs = CATCH_UP + 3
        sid = _heron_pairs(memory, pairs)
        with _another_forget(memory):
            memory.forget(None, BIRDS)
            [appended] = memory.add_episodes(sid, [NewEpisode("user", "And a kingfisher")])
            assert memory.count_pending_vectors() == pairs
            first = memory.store.episodes.page(sid)[0]
            sooner = datetime.fromisoformat(first.occurred_at) - timedelta(seconds=1)
            [egret] = memory.add_episodes(sid, [NewEpisode("user", "An egret first", sooner)])
            assert memory.store.episodes.page(sid)[1].id == first.id
            done = memory.vector_states([appended.id, egret.id, first.id])
            assert set(done.values()) == {VectorState.INDEXED}
            assert memory.count_pending_vectors() == pairs - 1
    finally:
        memory.close()


BIRDS = EpisodeFilter(metadata=(("tag", ("birds",)),))


def _heron_pairs(memory: Memory, pairs: int) -> int:
    """A session of `pairs` user turns tagged `birds`, each answered by the assistant."""
    sid = memory.store.sessions.create(None).id
    for i in range(pairs):
        memory.add_episodes(
            sid,
            [
                NewEpisode("user", f"Heron {i}", metadata={"tag": "birds"}),
                NewEpisode("assistant", f"Noted the heron at lock {i}."),
            ],
        )
    return sid


@contextmanager
def _another_forget(memory: Memory) -> Iterator[None]:
    """Another forget, still running, once the background has finished what it was doing:
    woken by the last write, it may have looked for a forget before this one began, and
    would then make the vectors this one leaves. Woken again, it clears its signal and
    then waits for the forget to end."""
    with memory.forgetting.under_way():
        memory.vectors_due.set()
        deadline = time.monotonic() + 5
        while memory.vectors_due.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)  # still set at the end: it is waiting for the forget already
        yield


def _held_back(memory: Memory) -> bool:
    """Whether the background's indexing waits for the forgets to end (within 10 s): it
    has looked for vectors to make, and holds them back."""
    deadline = time.monotonic() + 10
    while not memory.forgetting.waiting() and time.monotonic() < deadline:
        time.sleep(0.01)
    return memory.forgetting.waiting() > 0


def _until_none_pending(memory: Memory) -> None:
    """Waits (a minute at most) for the background to make every vector left waiting."""
    deadline = time.monotonic() + 60
    while memory.count_pending_vectors() and time.monotonic() < deadline:
        time.sleep(0.05)
