from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from nexusai.errors import Conflict, InvalidInput, NotFound, TooLarge
from nexusai.memory import fts
from nexusai.memory.migrations import MIGRATIONS
from nexusai.memory.models import NewEpisode
from nexusai.memory.store import Store


def test_opening_applies_named_migrations_once(tmp_path: Path) -> None:
    path = tmp_path / "n.db"
    with Store(path) as first:
        assert first.migrations_applied == [m.__name__ for m in MIGRATIONS]
    with Store(path) as again:
        assert again.migrations_applied == []
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = [r[0] for r in conn.execute("SELECT name FROM _migrations")]
    assert names == [m.__name__ for m in MIGRATIONS]


def test_foreign_keys_are_enforced(store: Store) -> None:
    with pytest.raises(sqlite3.IntegrityError), store.atomic() as conn:
        conn.execute(
            "INSERT INTO episodes (session_id, speaker, content, occurred_at, created_at)"
            " VALUES (999, 'u', 'x', '', '')"
        )


def test_episode_roundtrip_keeps_fields(store: Store) -> None:
    session = store.create_session(title="t")
    when = datetime(2023, 5, 8, 13, 56, tzinfo=timezone(timedelta(hours=2)))
    [ep] = store.add_episodes(
        session.id, [NewEpisode("Caroline", "Hi there", when, {"dia_id": "D1:1"})]
    )
    assert ep.session_id == session.id
    assert ep.speaker == "Caroline"
    assert ep.occurred_at == "2023-05-08T11:56:00.000000Z"
    assert ep.metadata == {"dia_id": "D1:1"}
    assert store.get_episode(ep.id) == ep


def test_episodes_list_in_time_order_and_pages(store: Store) -> None:
    session = store.create_session()
    base = datetime(2024, 1, 1, tzinfo=UTC)
    store.add_episodes(
        session.id,
        [NewEpisode("u", f"m{i}", base + timedelta(minutes=10 - i)) for i in range(5)],
    )
    contents = [e.content for e in store.list_episodes(session.id, limit=10)]
    assert contents == ["m4", "m3", "m2", "m1", "m0"]
    assert [e.content for e in store.list_episodes(session.id, limit=2, offset=1)] == [
        "m3",
        "m2",
    ]
    assert [e.content for e in store.recent_episodes(session.id, 2)] == ["m1", "m0"]


def test_bad_content_is_rejected_and_nothing_is_stored(store: Store) -> None:
    session = store.create_session()
    good = NewEpisode("u", "fine")
    with pytest.raises(InvalidInput, match="content"):
        store.add_episodes(session.id, [good, NewEpisode("u", "  \n\t")])
    with pytest.raises(TooLarge, match="65536"):
        store.add_episodes(session.id, [good, NewEpisode("u", "x" * 65537)])
    assert store.count_episodes() == 0


def test_unknown_ids_raise_not_found(store: Store) -> None:
    with pytest.raises(NotFound, match="session 42"):
        store.add_episodes(42, [NewEpisode("u", "hello")])
    with pytest.raises(NotFound, match="episode 7"):
        store.get_episode(7)
    with pytest.raises(NotFound, match="project 3"):
        store.create_session(project_id=3)


def test_project_names_are_unique(store: Store) -> None:
    store.create_project("a")
    with pytest.raises(Conflict):
        store.create_project("a")


def test_get_episodes_keeps_order_and_skips_missing(store: Store) -> None:
    session = store.create_session()
    a, b = store.add_episodes(session.id, [NewEpisode("u", "a"), NewEpisode("u", "b")])
    assert [e.id for e in store.get_episodes([b.id, 999, a.id])] == [b.id, a.id]


def test_scope_is_project_sessions_or_just_the_session(store: Store) -> None:
    project = store.create_project("p")
    s1 = store.create_session(project.id)
    s2 = store.create_session(project.id)
    lone = store.create_session()
    assert store.scope_session_ids(s1.id) == [s1.id, s2.id]
    assert store.scope_session_ids(lone.id) == [lone.id]
    store.update_session(s2.id, project_id=None)
    assert store.scope_session_ids(s1.id) == [s1.id]
    store.update_session(lone.id, project_id=project.id)
    assert store.scope_session_ids(lone.id) == [s1.id, lone.id]


def test_update_and_delete_keep_fts_in_sync(store: Store) -> None:
    session = store.create_session()
    [ep] = store.add_episodes(session.id, [NewEpisode("u", "the zebra crossed")])
    assert [e.id for e in fts.search_episodes(store, "zebra")] == [ep.id]
    store.update_episode(ep.id, content="the giraffe crossed")
    assert fts.search_episodes(store, "zebra") == []
    assert [e.id for e in fts.search_episodes(store, "giraffe")] == [ep.id]
    store.delete_episode(ep.id)
    assert fts.search_episodes(store, "giraffe") == []
    assert fts.integrity_check(store.connection())


def test_deleting_a_project_cascades_to_episodes_and_index(store: Store) -> None:
    project = store.create_project("p")
    session = store.create_session(project.id)
    eps = store.add_episodes(session.id, [NewEpisode("u", "walrus"), NewEpisode("u", "walrus")])
    assert store.delete_project(project.id) == [e.id for e in eps]
    assert store.count_episodes() == 0
    assert fts.search_episodes(store, "walrus") == []
    with pytest.raises(NotFound):
        store.get_session(session.id)
    assert fts.integrity_check(store.connection())


def test_data_survives_reopen(tmp_path: Path) -> None:
    with Store(tmp_path / "n.db") as s:
        session = s.create_session()
        s.add_episodes(session.id, [NewEpisode("u", "persistent penguin")])
    with Store(tmp_path / "n.db") as s:
        assert [e.content for e in fts.search_episodes(s, "penguin")] == ["persistent penguin"]
