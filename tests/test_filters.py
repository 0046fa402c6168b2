"""A turn's filter (`POST /context {"filter": ...}`) is applied inside both legs and the
standing list: a filtered turn gives the memories an unfiltered turn gives over a project
that holds only the episodes the filter keeps, at either fusion mode, on either store."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.memory.postgres.migrations import MIGRATIONS as PG_MIGRATIONS
from nexusai.memory.postgres.migrations import apply_migrations as pg_apply_migrations
from nexusai.memory.postgres.store import PgStore
from nexusai.memory.sqlite.migrations import MIGRATIONS, apply_migrations
from nexusai.memory.sqlite.store import SqliteStore
from nexusai.memory.store import EpisodeStore
from nexusai.models import EpisodeFilter, NewEpisode
from tests.conftest import SwitchableEmbedder

ON_BOTH_STORES = True  # its tests that open a store run on SQLite and on PostgreSQL

# Two months of one user's chats: the filters below keep May's (or the travel topic's),
# whole sessions, so every kept episode's neighbours are the same in both projects.
MARCH = [
    ("user", "I booked a flight to Lisbon for the conference."),
    ("assistant", "Lisbon in spring is lovely; the conference venue is near the river."),
    ("user", "My manager wants the quarterly report before the Lisbon trip."),
    ("user", "Always answer me in short bullet points."),
    ("assistant", "Understood, short bullet points from now on."),
    ("user", "The report covers sales in Portugal and Spain."),
]
MAY = [
    ("user", "We are going back to Lisbon with the kids in the summer."),
    ("assistant", "The Oceanarium in Lisbon is a favourite with children."),
    ("user", "I prefer trains to flights when we travel with the kids."),
    ("user", "My daughter Ana wants to see the trams in Lisbon."),
    ("assistant", "Tram 28 crosses the old town; it gets crowded by noon."),
    ("user", "We found a flat near the river in Lisbon for two weeks."),
]
QUESTIONS = [
    "What did I plan in Lisbon?",
    "How do we travel with the kids?",
    "Which report does my manager want?",
    "What should we see with Ana?",
]
SMALL = {"semanticLimit": 3, "recentLimit": 0, "entityLimit": 0}


@pytest.fixture
def client(config: Config, embedder: SwitchableEmbedder) -> Iterator[TestClient]:
    with TestClient(create_app(config, embedder)) as c:
        yield c


def _store(client: TestClient, project: int, month: str, turns: list[tuple[str, str]]) -> None:
    """Two sessions of the month, three turns each, an hour apart."""
    for half in (0, 1):
        sid = client.post("/sessions", json={"projectId": project}).json()["id"]
        episodes = [
            {
                "speaker": speaker,
                "content": content,
                "occurredAt": f"2026-{month}-{10 + half:02d}T{9 + i:02d}:00:00Z",
                "metadata": {"topic": "travel" if month == "05" else "work"},
            }
            for i, (speaker, content) in enumerate(turns[half * 3 : half * 3 + 3])
        ]
        assert client.post(f"/sessions/{sid}/episodes", json={"episodes": episodes}).is_success


def _asker(client: TestClient, project: int) -> int:
    return int(client.post("/sessions", json={"projectId": project}).json()["id"])


def _turn(client: TestClient, session: int, question: str, **extra: Any) -> dict[str, Any]:
    answer = client.post("/context", json={"sessionId": session, "message": question, **extra})
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def _said(turn: dict[str, Any], key: str) -> list[str]:
    return [m["content"] for m in turn.get(key, [])]


@pytest.mark.parametrize("fusion", ["rrf", "learned"])
@pytest.mark.parametrize(
    "rule", [{"after": "2026-05-01T00:00:00Z"}, {"metadata": {"topic": ["travel", "food"]}}]
)
def test_a_filtered_turn_is_a_turn_over_only_what_it_keeps(
    client: TestClient, fusion: str, rule: dict[str, Any]
) -> None:
    everything = client.post("/projects", json={"name": "everything"}).json()["id"]
    kept_only = client.post("/projects", json={"name": "may"}).json()["id"]
    _store(client, everything, "03", MARCH)
    _store(client, everything, "05", MAY)
    _store(client, kept_only, "05", MAY)
    filtered, plain = _asker(client, everything), _asker(client, kept_only)
    settings = {**SMALL, "fusion": fusion}
    unfiltered: set[str] = set()
    for question in QUESTIONS:
        unfiltered |= set(_said(_turn(client, filtered, question, settings=settings), "memories"))
        narrowed = _turn(client, filtered, question, settings=settings, filter=rule)
        alone = _turn(client, plain, question, settings=settings)
        assert _said(narrowed, "memories") == _said(alone, "memories"), question
        assert _said(narrowed, "standing") == _said(alone, "standing"), question
        assert len(narrowed["memories"]) == SMALL["semanticLimit"]
        assert not {m["content"] for m in narrowed["memories"]} & {c for _, c in MARCH}
    # The filter matters: unfiltered, the same questions find March's turns.
    assert {c for _, c in MARCH} & unfiltered


def test_the_standing_list_keeps_to_the_filter(client: TestClient) -> None:
    project = client.post("/projects", json={"name": "home"}).json()["id"]
    _store(client, project, "03", MARCH)
    _store(client, project, "05", MAY)
    asker = _asker(client, project)
    every = {**SMALL, "standingFloor": 0}  # every rule, near the message or not
    turn = _turn(client, asker, "How should we travel?", settings=every)
    assert "Always answer me in short bullet points." in _said(turn, "standing")
    narrowed = _turn(
        client, asker, "How should we travel?", settings=every, filter={"after": "2026-05-01"}
    )
    # A standing episode that is among the memories is not given twice.
    carried = _said(narrowed, "standing") + _said(narrowed, "memories")
    assert "I prefer trains to flights when we travel with the kids." in carried
    assert "Always answer me in short bullet points." not in carried


@pytest.mark.parametrize(
    ("rule", "named"),
    [
        ({"after": "last week"}, "after"),
        ({"after": "2026-05-02", "before": "2026-05-01"}, "after"),
        ({"topic": "travel"}, "topic"),
        ({"metadata": {"topic": {"nested": 1}}}, "metadata"),
    ],
)
def test_a_bad_filter_is_a_422_naming_it(
    client: TestClient, rule: dict[str, Any], named: str
) -> None:
    project = client.post("/projects", json={"name": "home"}).json()["id"]
    asker = _asker(client, project)
    answer = client.post("/context", json={"sessionId": asker, "message": "hi", "filter": rule})
    assert answer.status_code == 422
    assert named in answer.text


def test_a_time_aware_turn_searches_the_time_the_message_names(client: TestClient) -> None:
    project = client.post("/projects", json={"name": "home"}).json()["id"]
    _store(client, project, "03", MARCH)
    _store(client, project, "05", MAY)
    asker = _asker(client, project)
    question = "What did I plan for Lisbon in March?"
    replayed = {"now": "2026-06-20T12:00:00+00:00"}  # a turn of the chat, replayed later
    aware = {**SMALL, "timeAware": "filter"}
    turn = _turn(client, asker, question, settings=aware, **replayed)
    assert turn["timeWindow"] == {
        "after": "2026-03-01T00:00:00Z",
        "before": "2026-04-01T00:00:00Z",
        "said": "March",
    }
    assert set(_said(turn, "memories")) <= {c for _, c in MARCH}
    assert len(turn["memories"]) == SMALL["semanticLimit"]
    plain = _turn(client, asker, question, settings=SMALL, **replayed)
    assert "timeWindow" not in plain
    # Within an explicit filter, the named time narrows it further: May has nothing of March.
    narrowed = _turn(
        client, asker, question, settings=aware, filter={"after": "2026-05-01"}, **replayed
    )
    assert narrowed["memories"] == []
    # Read against the turn's time: in February 2026, "March" is March 2025, which is empty.
    earlier = _turn(client, asker, question, settings=aware, now="2026-02-01T00:00:00Z")
    assert earlier["memories"] == []


OLD_ROWS = [  # metadata, expires_at
    ('{"topic": "travel", "n": 1, "ok": true}', "2999-01-01T00:00:00.000000Z"),
    ('{"topic": {"nested": 1}, "n": 1.5}', None),
]


def test_an_older_sqlite_store_gets_its_labels_and_own_expiry(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    apply_migrations(conn, MIGRATIONS[:15])  # up to m015_expiry
    conn.execute("INSERT INTO sessions (id, created_at) VALUES (1, 't')")
    for i, (metadata, expires) in enumerate(OLD_ROWS, start=1):
        conn.execute(
            "INSERT INTO episodes (id, session_id, speaker, content, occurred_at, created_at,"
            " metadata, expires_at) VALUES (?, 1, 'user', 'x', '2026-01-01', 't', ?, ?)",
            (i, metadata, expires),
        )
    conn.execute("COMMIT")
    conn.close()
    with SqliteStore(path) as store:
        # Later migrations may follow; these four are the ones an m015 store lacks.
        assert store.migrations_applied[:4] == [
            "m016_retention",
            "m017_labels",
            "m018_standing_order",
            "m019_standing_widened",
        ]
        _labels_and_expiry_kept(store)


def test_an_older_postgresql_gets_its_labels_and_own_expiry(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        pg_apply_migrations(conn, PG_MIGRATIONS[:6])  # up to m006_expiry
        conn.execute("INSERT INTO sessions (created_at) VALUES (now())")  # id 1
        for i, (metadata, expires) in enumerate(OLD_ROWS, start=1):
            conn.execute(
                "INSERT INTO episodes (id, session_id, speaker, content, occurred_at, created_at,"
                " metadata, expires_at) OVERRIDING SYSTEM VALUE"
                " VALUES (%s, 1, 'user', 'x', now(), now(), %s, %s)",
                (i, metadata, expires),
            )
        conn.commit()
    with PgStore(pg_url) as store:
        assert store.migrations_applied[:4] == [
            "m007_retention",
            "m008_labels",
            "m009_standing_order",
            "m010_standing_widened",
        ]
        _labels_and_expiry_kept(store)


def _labels_and_expiry_kept(store: EpisodeStore) -> None:
    def kept(**metadata: tuple[str, ...]) -> list[int]:
        return store.episodes.matching_ids(None, EpisodeFilter(metadata=tuple(metadata.items())))

    assert kept(topic=("travel",)) == [1]
    assert kept(n=("1",)) == [1]
    assert kept(n=("1.5",)) == [2]
    assert kept(ok=("true",)) == [1]
    assert kept(topic=('{"nested": 1}', "nested")) == []  # objects never match
    assert store.episodes.get(1).expiry_asked == "2999-01-01T00:00:00.000000Z"
    # Labels follow an edit of the metadata, and go with the episode.
    store.episodes.update(1, metadata={"topic": "food"})
    assert kept(topic=("travel",)) == []
    assert kept(topic=("food",)) == [1]
    store.episodes.delete_many([1])
    assert kept(topic=("food",)) == []


def test_metadata_numbers_compare_as_numbers(store: EpisodeStore) -> None:
    """1 matches 1.0, 1e20 matches the integer it is, and a number never matches a text
    that does not read as one; booleans and texts compare as before."""
    sid = store.sessions.create().id
    said: list[dict[str, Any]] = [
        {"n": 1.0},
        {"n": 100000000000000000000},
        {"n": 1.5, "tag": "1"},
        {"n": "one", "ok": True},
    ]
    ids = [
        e.id
        for e in store.episodes.add(
            sid, [NewEpisode("user", f"m{i}", metadata=m) for i, m in enumerate(said)]
        )
    ]

    def kept(**metadata: tuple[str, ...]) -> list[int]:
        return store.episodes.matching_ids(None, EpisodeFilter(metadata=tuple(metadata.items())))

    assert kept(n=("1",)) == [ids[0]]
    assert kept(n=("1.0",)) == [ids[0]]
    assert kept(n=("1e20",)) == [ids[1]]
    assert kept(n=("100000000000000000000",)) == [ids[1]]
    assert kept(n=("1.50",)) == [ids[2]]
    assert kept(n=("one",)) == [ids[3]]
    assert kept(tag=("1.0",)) == []  # the text "1" is no number
    assert kept(tag=("1",)) == [ids[2]]
    assert kept(ok=("true",)) == [ids[3]]
    store.episodes.update(ids[0], metadata={"n": 2})
    assert kept(n=("2.0",)) == [ids[0]]
