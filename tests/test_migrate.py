"""`nexus migrate --to postgresql://...`: a real SQLite store copied into a real PostgreSQL,
resumed after a stop, and served from there with the same answers."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nexusai.cli import cli
from nexusai.config import Config
from nexusai.embedders import Embedder
from nexusai.memory.extractors import SpacyExtractor
from nexusai.memory.keys import KeyStore
from nexusai.memory.postgres import transfer
from nexusai.memory.postgres.store import PgStore
from nexusai.memory.service import Memory
from nexusai.memory.sqlite.store import SqliteStore
from nexusai.models import NewEpisode

TURNS: list[tuple[str, str, dict[str, Any]]] = [
    ("Caroline", "I adopted a puppy called Biscuit last spring", {"mood": "happy"}),
    ("Melanie", "We are moving to Lisbon in the autumn", {}),
    ("Caroline", "Biscuit chewed my running shoes again", {"tags": ["dog", "shoes"]}),
    ("Melanie", "我的狗叫饼干，我们住在北京", {}),
]


def _seed(config: Config, embedder: Embedder, extractor: SpacyExtractor) -> str:
    """A SQLite store with a bit of everything; returns a project key made on it."""
    memory = Memory.open(config, embedder, extractor=extractor)
    try:
        project = memory.store.projects.create("home")
        for title in ("first", "second"):
            session = memory.store.sessions.create(project.id, title)
            memory.add_episodes(session.id, [NewEpisode(s, c, metadata=m) for s, c, m in TURNS])
        memory.store.sessions.create(None, "outside any project")
        memory.store.meta.set("note", "kept")
        return KeyStore(memory.store).create("home", read_only=True)
    finally:
        memory.close()


def _answers(memory: Memory) -> list[object]:
    store = memory.store
    sessions = store.sessions.page(limit=100)
    episodes = [e for s in sessions for e in store.episodes.page(s.id)]
    found = [
        [
            e.id
            for e in store.keywords.search(q, 10, store.sessions.scope(sessions[0].id).session_ids)
        ]
        for q in ("Biscuit puppy", "Lisbon", "北京", "shoes OR NEAR(")
    ]
    vector = memory.embedder.embed_query("What is the dog called?")
    hits = memory.search_vectors(vector, [s.id for s in sessions], [], 5)
    nearest = [e.content for e in store.episodes.get_many([i for i, _ in hits])]  # ties: same text
    entities = sorted((e.name, e.mention_count) for e in memory.entities.get(range(1, 50)))
    return [sessions, episodes, found, nearest, entities]


def test_migrate_copies_everything_and_answers_alike(
    tmp_path: Path, pg_url: str, embedder: Embedder, spacy_extractor: SpacyExtractor
) -> None:
    config = Config.from_env({}, data_dir=tmp_path, extractor="none")
    key = _seed(config, embedder, spacy_extractor)
    with closing(Memory.open(config, embedder)) as before:
        expected = _answers(before)

    result = CliRunner().invoke(
        cli, ["migrate", "--to", pg_url, "--no-vectors", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "DIFFERS" not in result.output
    assert "vectors left pending" in result.output

    target = Config.from_env({}, data_dir=tmp_path, database_url=pg_url, extractor="none")
    with closing(Memory.open(target, embedder)) as after:
        assert isinstance(after.store, PgStore)
        assert after.count_pending_vectors() == 2 * len(TURNS)
        after.sync_pending()
        after.entities.sync()
        assert _answers(after) == expected
        assert after.store.meta.get("note") == "kept"
        principal = KeyStore(after.store).verify(key)  # a key made on SQLite still works
        assert principal is not None
        assert principal.read_only
        made = after.store.sessions.create(None, "new")  # ids go on past the copied ones
        assert made.id > max(s.id for s in expected[0])  # type: ignore[attr-defined]


def test_a_stopped_migration_resumes_where_it_stopped(
    tmp_path: Path, pg_url: str, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = Config.from_env({}, data_dir=tmp_path, extractor="none")
    with closing(Memory.open(config, embedder)) as memory:
        session = memory.store.sessions.create().id
        memory.store.episodes.add(session, [NewEpisode("u", f"turn {i}") for i in range(50)])
    monkeypatch.setattr(transfer, "BATCH", 7)
    with SqliteStore(config.db_path) as source, PgStore(pg_url) as target:
        copied: list[int] = []

        def stop_midway(table: str, rows: int) -> None:
            copied.append(rows)
            if table == "episodes" and sum(copied) > 20:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            transfer.copy_store(source, target, stop_midway)
        assert 0 < target.episodes.count() < 50
        transfer.copy_store(source, target)
        assert all(there == here for _, there, here in transfer.compare_counts(source, target))
        assert [e.content for e in target.episodes.page(session)] == [
            f"turn {i}" for i in range(50)
        ]


def test_migrate_refuses_a_database_holding_another_store(
    tmp_path: Path, pg_url: str, embedder: Embedder
) -> None:
    with PgStore(pg_url) as other:
        other.projects.create("someone else's")
    Memory.open(Config.from_env({}, data_dir=tmp_path, extractor="none"), embedder).close()
    result = CliRunner().invoke(cli, ["migrate", "--to", pg_url, "--data-dir", str(tmp_path)])
    assert result.exit_code != 0
    assert "holds a store already" in result.output
    assert "Traceback" not in result.output
