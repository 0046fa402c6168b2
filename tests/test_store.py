from __future__ import annotations

import os
import sqlite3
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest

from nexusai.errors import Conflict, InvalidInput, NotFound, TooLarge
from nexusai.memory.repositories.derived import VectorState
from nexusai.memory.sqlite import fts
from nexusai.memory.sqlite.migrations import MIGRATIONS, apply_migrations
from nexusai.memory.sqlite.store import SqliteStore
from nexusai.memory.store import EpisodeStore, StoreDamaged
from nexusai.memory.texts import CONTEXT_CHARS
from nexusai.models import NewEpisode, now_text


def test_opening_applies_named_migrations_once(tmp_path: Path) -> None:
    path = tmp_path / "n.db"
    with SqliteStore(path) as first:
        assert first.migrations_applied == [m.__name__ for m in MIGRATIONS]
    with SqliteStore(path) as again:
        assert again.migrations_applied == []
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = [r[0] for r in conn.execute("SELECT name FROM _migrations")]
    assert names == [m.__name__ for m in MIGRATIONS]


def test_foreign_keys_are_enforced(store: EpisodeStore) -> None:
    integrity = (sqlite3.IntegrityError, psycopg.errors.IntegrityError)
    with pytest.raises(integrity), store.atomic() as conn:
        conn.execute(
            store.dialect.sql(
                "INSERT INTO episodes (session_id, speaker, content, occurred_at, created_at)"
                " VALUES (999, 'u', 'x', ?, ?)"
            ),
            (now_text(), now_text()),
        )


def test_episode_roundtrip_keeps_fields(store: EpisodeStore) -> None:
    session = store.sessions.create(title="t")
    when = datetime(2023, 5, 8, 13, 56, tzinfo=timezone(timedelta(hours=2)))
    [ep] = store.episodes.add(
        session.id, [NewEpisode("Caroline", "Hi there", when, {"dia_id": "D1:1"})]
    )
    assert ep.session_id == session.id
    assert ep.speaker == "Caroline"
    assert ep.occurred_at == "2023-05-08T11:56:00.000000Z"
    assert ep.metadata == {"dia_id": "D1:1"}
    assert store.episodes.get(ep.id) == ep


def test_episodes_list_in_time_order_and_pages(store: EpisodeStore) -> None:
    session = store.sessions.create()
    base = datetime(2024, 1, 1, tzinfo=UTC)
    store.episodes.add(
        session.id,
        [NewEpisode("u", f"m{i}", base + timedelta(minutes=10 - i)) for i in range(5)],
    )
    contents = [e.content for e in store.episodes.page(session.id, limit=10)]
    assert contents == ["m4", "m3", "m2", "m1", "m0"]
    assert [e.content for e in store.episodes.page(session.id, limit=2, offset=1)] == [
        "m3",
        "m2",
    ]
    assert [e.content for e in store.episodes.recent(session.id, 2)] == ["m1", "m0"]


def test_bad_content_is_rejected_and_nothing_is_stored(store: EpisodeStore) -> None:
    session = store.sessions.create()
    good = NewEpisode("u", "fine")
    with pytest.raises(InvalidInput, match="content"):
        store.episodes.add(session.id, [good, NewEpisode("u", "  \n\t")])
    with pytest.raises(TooLarge, match=r"episodes\[1\]: .*the limit is 1048576"):
        store.episodes.add(session.id, [good, NewEpisode("u", "x" * (1024 * 1024 + 1))])
    assert store.episodes.count() == 0


def test_unknown_ids_raise_not_found(store: EpisodeStore) -> None:
    with pytest.raises(NotFound, match="session 42"):
        store.episodes.add(42, [NewEpisode("u", "hello")])
    with pytest.raises(NotFound, match="episode 7"):
        store.episodes.get(7)
    with pytest.raises(NotFound, match="project 3"):
        store.sessions.create(project_id=3)


def test_project_names_are_unique(store: EpisodeStore) -> None:
    store.projects.create("a")
    with pytest.raises(Conflict):
        store.projects.create("a")


def test_get_episodes_keeps_order_and_skips_missing(store: EpisodeStore) -> None:
    session = store.sessions.create()
    a, b = store.episodes.add(session.id, [NewEpisode("u", "a"), NewEpisode("u", "b")])
    assert [e.id for e in store.episodes.get_many([b.id, 999, a.id])] == [b.id, a.id]


def test_every_read_gives_each_field_as_stored(store: EpisodeStore) -> None:
    # Reads take an episode's columns by place: one out of its place would hand a field
    # another's value (the turn's text as the turn before it, the caption as the standing).
    session = store.sessions.create(title="t")
    asked = datetime(2026, 5, 8, 13, 55, tzinfo=UTC)
    store.episodes.add(session.id, [NewEpisode("assistant", "What lake was it?", asked)])
    later = datetime.now(UTC) + timedelta(days=30)
    said = NewEpisode(
        "user",
        "Kayaking on Lake Tahoe is my favorite weekend trip.",
        datetime(2026, 5, 8, 13, 56, tzinfo=UTC),
        {"dia_id": "D1:2", "n": [1, 2]},
        image_caption="a kayak on a lake",
        pinned=True,
        expires_at=later,
    )
    [ep] = store.episodes.add(session.id, [said])
    assert (ep.speaker, ep.content, ep.metadata) == (said.speaker, said.content, said.metadata)
    assert (ep.image_caption, ep.pinned, ep.standing) == ("a kayak on a lake", True, "preference")
    assert ep.occurred_at == "2026-05-08T13:56:00.000000Z"
    assert ep.expires_at == ep.expiry_asked is not None
    assert "What lake was it?" in ep.context_text
    assert "kayak" in ep.search_text
    assert ep.created_at
    assert ep.score is None
    [found] = store.keywords.search("kayaking Tahoe", 5, [session.id])
    assert found.score is not None
    assert found.score > 0
    assert [replace(found, score=None)] == store.episodes.get_many([ep.id])
    assert store.episodes.get(ep.id) == ep
    assert store.episodes.page(session.id)[-1] == ep
    assert store.episodes.recent(session.id, 1) == [ep]
    assert store.episodes.standing([session.id], 5) == [ep]


def test_scope_is_project_sessions_or_just_the_session(store: EpisodeStore) -> None:
    project = store.projects.create("p")
    s1 = store.sessions.create(project.id)
    s2 = store.sessions.create(project.id)
    lone = store.sessions.create()
    assert store.sessions.scope(s1.id).session_ids == [s1.id, s2.id]
    assert store.sessions.scope(lone.id).session_ids == [lone.id]
    store.sessions.update(s2.id, project_id=None)
    assert store.sessions.scope(s1.id).session_ids == [s1.id]
    store.sessions.update(lone.id, project_id=project.id)
    assert store.sessions.scope(lone.id).session_ids == [s1.id, lone.id]


def test_update_and_delete_keep_fts_in_sync(store: EpisodeStore) -> None:
    session = store.sessions.create()
    [ep] = store.episodes.add(session.id, [NewEpisode("u", "the zebra crossed")])
    assert [e.id for e in store.keywords.search("zebra")] == [ep.id]
    store.episodes.update(ep.id, content="the giraffe crossed")
    assert store.keywords.search("zebra") == []
    assert [e.id for e in store.keywords.search("giraffe")] == [ep.id]
    store.episodes.delete(ep.id)
    assert store.keywords.search("giraffe") == []
    assert store.keywords.ok()


def _contexts(store: EpisodeStore, session_id: int) -> list[str]:
    return [e.context_text for e in store.episodes.page(session_id)]


def _indexed(store: EpisodeStore, *ids: int) -> None:
    store.derived.set_vectors(ids, VectorState.INDEXED)


def _pending(store: EpisodeStore) -> set[int]:
    return set(store.derived.pending_vectors(1000))


def test_a_turn_is_indexed_with_the_end_of_the_turn_before_it(store: EpisodeStore) -> None:
    session = store.sessions.create()
    question = "Which port does the metrics exporter listen on?"
    long_answer = "Some background on exporters. " * 40 + question
    first, second = store.episodes.add(
        session.id, [NewEpisode("Ana", long_answer), NewEpisode("Bo", "9464, thanks")]
    )
    assert first.context_text == ""
    assert second.context_text.startswith("Ana: …")
    assert second.context_text.endswith(question)
    assert len(second.context_text) <= CONTEXT_CHARS + len("Ana: …")
    assert "Some background" in second.context_text  # cut at a word, not mid-word
    assert not second.context_text.removeprefix("Ana: …").startswith(("ome", "ackground"))


def test_a_role_is_not_written_before_what_was_said(store: EpisodeStore) -> None:
    """ "assistant: " before every other message says nothing a search can use; a name does."""
    session = store.sessions.create()
    bot, user, named = store.episodes.add(
        session.id,
        [
            NewEpisode("assistant", "Try restarting the exporter."),
            NewEpisode("user", "That worked"),
            NewEpisode("Caroline", "Great!"),
        ],
    )
    assert (bot.search_text, user.search_text) == ("Try restarting the exporter.", "That worked")
    assert user.context_text == "Try restarting the exporter."
    assert named.search_text == "Caroline: Great!"


def test_edits_deletes_and_late_inserts_refresh_the_next_turns_context(store: EpisodeStore) -> None:
    session = store.sessions.create()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    a, b, c = store.episodes.add(
        session.id,
        [NewEpisode("u", t, start + timedelta(minutes=i)) for i, t in enumerate("abc")],
    )
    _indexed(store, a.id, b.id, c.id)
    store.episodes.update(a.id, content="alpha")
    assert _contexts(store, session.id) == ["", "u: alpha", "u: b"]
    assert _pending(store) == {a.id, b.id}  # the edited turn and the one read with it
    _indexed(store, a.id, b.id)

    store.episodes.delete(b.id)
    assert _contexts(store, session.id) == ["", "u: alpha"]
    assert _pending(store) == {c.id}
    _indexed(store, c.id)

    [late] = store.episodes.add(session.id, [NewEpisode("u", "between", start + timedelta(1))])
    [early] = store.episodes.add(session.id, [NewEpisode("u", "zero", start - timedelta(1))])
    assert [e.content for e in store.episodes.page(session.id)] == ["zero", "alpha", "c", "between"]
    assert _contexts(store, session.id) == ["", "u: zero", "u: alpha", "u: c"]
    assert _pending(store) == {late.id, early.id, a.id}
    assert store.keywords.ok()


def test_deleting_many_at_once_leaves_the_contexts_one_at_a_time_would(
    store: EpisodeStore,
) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    # Tied times (ordered by id), a repeated message (deleting one of two leaves the next
    # turn's context as it was), and a long one (its context is cut at a word).
    said = [
        ("u", "first", 0),
        ("a", "ok", 1),
        ("a", "ok", 1),
        ("u", "tied with the one before", 2),
        ("a", "tied with the one before too", 2),
        ("u", "long words " * 60, 3),
        ("a", "middle", 4),
        ("u", "next to last", 5),
        ("a", "last", 6),
    ]
    episodes = [
        NewEpisode(speaker, text, start + timedelta(minutes=m)) for speaker, text, m in said
    ]
    at_once = [e.id for e in store.episodes.add(store.sessions.create().id, episodes)]
    one_by_one = [e.id for e in store.episodes.add(store.sessions.create().id, episodes)]
    _indexed(store, *at_once, *one_by_one)
    gone = [0, 2, 4, 5, 8]  # the first, a repeat, a run of two from a tie, the last
    deleted = store.episodes.delete_many([at_once[i] for i in gone] + [999_999])
    for i in gone:
        store.episodes.delete(one_by_one[i])

    assert deleted == [at_once[i] for i in gone]
    pending = _pending(store)
    kept = [i for i in range(len(said)) if i not in gone]
    for i in kept:
        twin, first = store.episodes.get(one_by_one[i]), store.episodes.get(at_once[i])
        assert first.context_text == twin.context_text
        assert (at_once[i] in pending) == (one_by_one[i] in pending)
    assert {at_once[i] for i in kept} & pending == {at_once[i] for i in (1, 6)}
    assert store.keywords.ok()
    assert store.episodes.delete_many([]) == []


def test_m006_trims_old_contexts_and_rebuilds_every_vector(tmp_path: Path) -> None:
    path = tmp_path / "n.db"
    long_turn = "word " * 200
    with SqliteStore(path) as s:
        session = s.sessions.create()
        eps = s.episodes.add(session.id, [NewEpisode("u", long_turn), NewEpisode("u", "ok")])
        _indexed(s, *[e.id for e in eps])
        with s.atomic() as conn:  # as m003 left it: all of the turn before
            conn.execute(
                "UPDATE episodes SET context_text = ? WHERE id = ?", ("u: " + long_turn, eps[1].id)
            )
            conn.execute("DELETE FROM _migrations WHERE name = 'm006_context_tail'")
    with SqliteStore(path) as s:
        assert s.migrations_applied == ["m006_context_tail"]
        assert _contexts(s, session.id) == ["", eps[1].context_text]
        assert len(eps[1].context_text) < 320
        assert _pending(s) == {e.id for e in eps}
        assert [e.id for e in s.keywords.search("word")] == [eps[0].id, eps[1].id]
        assert fts.integrity_check(s.connection())


def test_deleting_a_project_cascades_to_episodes_and_index(store: EpisodeStore) -> None:
    project = store.projects.create("p")
    session = store.sessions.create(project.id)
    eps = store.episodes.add(session.id, [NewEpisode("u", "walrus"), NewEpisode("u", "walrus")])
    assert store.projects.delete(project.id) == [e.id for e in eps]
    assert store.episodes.count() == 0
    assert store.keywords.search("walrus") == []
    with pytest.raises(NotFound):
        store.sessions.get(session.id)
    assert store.keywords.ok()


def test_data_survives_reopen(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "n.db") as s:
        session = s.sessions.create()
        s.episodes.add(session.id, [NewEpisode("u", "persistent penguin")])
    with SqliteStore(tmp_path / "n.db") as s:
        assert [e.content for e in s.keywords.search("penguin")] == ["persistent penguin"]


def test_deleted_ids_are_never_handed_out_again(store: EpisodeStore) -> None:
    project = store.projects.create("p")
    session = store.sessions.create(project.id)
    a, b = store.episodes.add(session.id, [NewEpisode("u", "a"), NewEpisode("u", "b")])
    store.episodes.delete(b.id)
    [c] = store.episodes.add(session.id, [NewEpisode("u", "c")])
    assert c.id > b.id
    other = store.sessions.create()
    store.sessions.delete(other.id)
    assert store.sessions.create().id > other.id
    store.projects.delete(project.id)
    assert store.projects.create("p").id > project.id
    assert a.id < b.id


def test_m007_keeps_rows_ids_and_links_of_an_existing_store(tmp_path: Path) -> None:
    """A store made before m007 (ids reusable) keeps every row, id, link and index entry."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    apply_migrations(conn, MIGRATIONS[:6])
    conn.execute("INSERT INTO projects (id, name, created_at) VALUES (7, 'p', 't')")
    conn.execute("INSERT INTO sessions (id, project_id, created_at) VALUES (3, 7, 't')")
    conn.execute(
        "INSERT INTO episodes (id, session_id, speaker, content, occurred_at, created_at,"
        " search_text) VALUES (5, 3, 'u', 'zebra crossing', 't', 't', 'u: zebra crossing')"
    )
    conn.execute(
        "INSERT INTO entities (id, scope, name, normalized, type, first_seen, last_seen)"
        " VALUES (2, 'p:7', 'Zed', 'zed', 'person', 't', 't')"
    )
    conn.execute("INSERT INTO entity_mentions VALUES (2, 5)")
    conn.execute("INSERT INTO import_episodes VALUES ('k', 5)")
    conn.execute("COMMIT")
    conn.close()
    with SqliteStore(path) as s:
        assert "m007_ids_never_reused" in s.migrations_applied
        assert [e.id for e in s.keywords.search("zebra")] == [5]
        assert s.sessions.get(3).project_id == 7
        assert s.imports.episode_ids("k") == {"k": 5}
        assert s.projects.create("q").id == 8
        [new] = s.episodes.add(3, [NewEpisode("u", "later")])
        assert new.id == 6
        s.episodes.delete(5)  # cascades to its mention and import key, as before
        with s.atomic() as c:
            assert c.execute("SELECT count(*) FROM entity_mentions").fetchone()[0] == 0
            assert c.execute("SELECT count(*) FROM entities").fetchone()[0] == 0
            with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
                c.execute("UPDATE episodes SET entity_state = 'maybe'")
        assert s.imports.episode_ids("k") == {}
        assert fts.integrity_check(s.connection())


def test_a_damaged_file_is_refused_not_served(tmp_path: Path) -> None:
    path = tmp_path / "n.db"
    with SqliteStore(path) as s:
        session = s.sessions.create()
        s.episodes.add(session.id, [NewEpisode("u", f"turn {i} " * 50) for i in range(200)])
    size = path.stat().st_size  # closing checkpointed the WAL into the file
    with path.open("r+b") as damaged:  # a torn write over the middle of the file
        damaged.seek(size // 2)
        damaged.write(b"\xff" * 8192)
    with pytest.raises(StoreDamaged, match="nexus restore"):
        SqliteStore(path)


def test_serve_refuses_a_damaged_store_in_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from nexusai.cli import cli
    from tests.live_server import free_port

    data = tmp_path / "data"
    data.mkdir()
    (data / "nexus.db").write_bytes(b"this is not a database" * 100)
    env = {"NEXUS_EXTRACTOR": "none"}
    args = ["serve", "--data-dir", str(data), "--port", str(free_port())]
    result = CliRunner(env=env).invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "is damaged" in result.output
    assert "nexus restore" in result.output
    assert result.output.count("\n") == 1


def test_connections_of_ended_threads_are_closed(tmp_path: Path) -> None:
    """Pool threads come and go (AnyIO retires idle workers after 10 s): each one's SQLite
    connection is closed once it has ended, so neither descriptors nor caches pile up."""
    store = SqliteStore(tmp_path / "nexus.db")

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    store.connection()
    before = fds()
    for _ in range(50):
        worker = threading.Thread(target=lambda: store.keywords.search("anything", 5))
        worker.start()
        worker.join()
    last = threading.Thread(target=store.connection)
    last.start()
    last.join()
    assert store.open_connections() <= 2  # this thread's, and the last worker's
    assert fds() <= before + 3


def test_filters_keep_a_time_window_speakers_and_metadata_values(store: EpisodeStore) -> None:
    from nexusai.models import EpisodeFilter

    a, b = store.sessions.create().id, store.sessions.create().id
    day = datetime(2026, 3, 1, tzinfo=UTC)
    said = [
        NewEpisode("user", "one", day, {"topic": "travel", "n": 1, "ok": True}),
        NewEpisode("assistant", "two", day + timedelta(days=1), {"topic": "food"}),
        NewEpisode("user", "three", day + timedelta(days=2), {"topic": {"nested": 1}}),
    ]
    one, two, three = [e.id for e in store.episodes.add(a, said)]
    other = store.episodes.add(b, [NewEpisode("user", "four", day, {"topic": "travel"})])[0].id

    def kept(session_ids: list[int] | None = None, **rule: Any) -> list[int]:
        return store.episodes.matching_ids(session_ids, EpisodeFilter(**rule))

    after, before = "2026-03-02T00:00:00.000000Z", "2026-03-03T00:00:00.000000Z"
    assert kept([a], after=after) == [two, three]
    assert kept([a], before=after) == [one]
    assert kept([a], after=after, before=before) == [two]
    assert kept(None, speakers=("user",)) == [one, other, three]
    assert kept([a], metadata=(("topic", ("travel", "food")),)) == [one, two]
    assert kept(None, metadata=(("topic", ("travel",)),)) == [one, other]
    assert kept([a], metadata=(("n", ("1",)), ("ok", ("true",)))) == [one]
    assert kept([a], metadata=(("topic", ('{"nested": 1}',)),)) == []  # objects never match
    assert kept([a], metadata=(("missing", ("x",)),)) == []
    assert kept([], speakers=("user",)) == []
    assert kept([a]) == [one, two, three]
    assert store.episodes.delete_many([two, 999]) == [two]
    assert kept([a]) == [one, three]
    assert store.episodes.get(three).context_text.startswith("one")  # read with its new neighbour
