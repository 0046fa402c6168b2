"""Several memory replicas on one PostgreSQL (issue #18): real `nexus serve --role memory`
processes, each with its own data directory, sharing the database and its pgvector index."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.embedders import Embedder
from nexusai.errors import ConfigError
from nexusai.memory.service import Memory
from nexusai.models import NewEpisode
from tests.conftest import BOTH_STORES
from tests.live_server import server_process

TURNS_A = [
    ("Caroline", "I adopted a puppy called Biscuit last spring"),
    ("Melanie", "We are moving to Lisbon in the autumn"),
]
TURNS_B = [
    ("Caroline", "Biscuit chewed my running shoes again"),
    ("Melanie", "The flat in Lisbon has a balcony over the river"),
]
QUESTIONS = ["What is the puppy called?", "Where is Melanie moving?", "shoes"]


def _episodes(turns: list[tuple[str, str]]) -> dict[str, Any]:
    return {"episodes": [{"speaker": s, "content": c} for s, c in turns]}


def _memories(client: TestClient, session_id: int, question: str) -> list[dict[str, Any]]:
    answer = client.post("/context", json={"sessionId": session_id, "message": question})
    assert answer.status_code == 200, answer.text
    memories: list[dict[str, Any]] = answer.json()["memories"]
    return memories


def _context(client: TestClient, session_id: int, question: str) -> list[int]:
    return [m["id"] for m in _memories(client, session_id, question)]


def test_two_memory_replicas_serve_one_database(
    tmp_path: Path, pg_url: str, embedder: Embedder
) -> None:
    env = {"NEXUS_DATABASE_URL": pg_url}
    with (
        server_process(tmp_path / "a", "memory", **env) as a,
        server_process(tmp_path / "b", "memory", **env) as b,
        httpx.Client(base_url=a) as via_a,
        httpx.Client(base_url=b) as via_b,
    ):
        session = via_a.post("/sessions", json={"title": "two replicas"}).json()["id"]
        assert via_b.get(f"/sessions/{session}").status_code == 200  # at once, through B
        written = via_a.post(f"/sessions/{session}/episodes", json=_episodes(TURNS_A))
        assert written.status_code == 201, written.text
        assert via_b.post(f"/sessions/{session}/episodes", json=_episodes(TURNS_B)).is_success
        listed = [e["content"] for e in via_a.get(f"/sessions/{session}/episodes").json()]
        assert listed == [c for _, c in TURNS_A + TURNS_B]

        orchestrations = []
        for name, url in (("oa", a), ("ob", b)):
            config = Config.from_env({}, data_dir=tmp_path / name, memory_url=url)
            orchestrations.append(TestClient(create_app(config, embedder, role="orchestration")))
        with orchestrations[0] as over_a, orchestrations[1] as over_b:
            for client in (over_a, over_b):
                # Every turn a memory: none is held back as one of the recent turns.
                client.patch("/settings", json={"keywordWeight": 1.0, "recentLimit": 0})
            for question in QUESTIONS:
                found = _context(over_a, session, question)
                assert found, question
                assert found == _context(over_b, session, question), question
            chewed = _memories(over_b, session, "What did Biscuit chew?")
            assert TURNS_B[0][1] in [m["content"] for m in chewed]


def test_two_replicas_repairing_at_once_make_each_vector_once(
    tmp_path: Path, pg_url: str, embedder: Embedder
) -> None:
    """Pending vectors claimed with SKIP LOCKED: two replicas repairing together take
    different episodes, and every episode ends with its vector."""
    config = Config.from_env({}, data_dir=tmp_path, database_url=pg_url, extractor="none")
    first, second = (Memory.open(config, embedder) for _ in range(2))
    try:
        session = first.store.sessions.create().id
        turns = [NewEpisode("u", f"note number {i} about topic {i % 7}") for i in range(300)]
        first.store.episodes.add(session, turns)  # stored, not yet embedded
        first.batch_size = second.batch_size = 20
        done = [0, 0]

        def repair(index: int, memory: Memory) -> None:
            done[index] = memory.sync_pending()

        threads = [
            threading.Thread(target=repair, args=pair) for pair in enumerate((first, second))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sum(done) == 300  # no episode twice
        assert min(done) > 0  # and both worked
        assert first.count_pending_vectors() == 0
        assert first.vectors.index.count() == 300
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("config", BOTH_STORES, indirect=True)
def test_an_edit_while_embedding_leaves_the_episode_pending(
    config: Config, embedder: Embedder
) -> None:
    """A vector made from text that changed meanwhile is not marked indexed (on either
    engine: the check is in the shared SQL)."""
    memory = Memory.open(config, embedder)
    try:
        store = memory.store
        session = store.sessions.create().id
        [episode] = store.episodes.add(session, [NewEpisode("u", "the old text")])
        stale = store.episodes.get(episode.id)
        store.episodes.update(episode.id, content="the new text")
        memory.index([stale])
        assert memory.vector_states([episode.id])[episode.id] == "pending"
        memory.sync_pending()
        assert memory.vector_states([episode.id])[episode.id] == "indexed"
    finally:
        memory.close()


def test_a_wrong_database_url_is_one_clear_line(
    tmp_path: Path, postgres: str, embedder: Embedder
) -> None:
    where = urlsplit(postgres)  # postgresql://postgres:@/postgres?host=/tmp/...
    url = where._replace(netloc="postgres:hunter2-secret@", path="/no_such_database").geturl()
    config = Config.from_env({}, data_dir=tmp_path, database_url=url)
    assert "hunter2" not in repr(config)
    with pytest.raises(ConfigError, match="NEXUS_DATABASE_URL") as raised:
        Memory.open(config, embedder)
    assert "no_such_database" in str(raised.value)
    assert "hunter2" not in str(raised.value)
