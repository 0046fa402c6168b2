"""Faults a server meets in a year of running, each injected for real: a full disk, a lost
or damaged vector index, an embedder or LLM that hangs, fails or talks nonsense."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.embedders import Vector
from nexusai.memory.service import Memory
from nexusai.memory.vectors import EdgeVectorIndex, VectorPoint
from nexusai.models import NewEpisode
from tests.conftest import HTTP_TIMEOUT, SwitchableEmbedder
from tests.live_server import live_server
from tests.openai_stub import openai_stub


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 12 MiB filesystem of its own (tmpfs), so that filling it fills nothing else."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        reason = f"mounting a small filesystem needs root: {mounted.stderr.decode().strip()}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_disk_refuses_writes_keeps_reads_and_recovers(
    small_disk: Path, embedder: SwitchableEmbedder
) -> None:
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * (3 * 1024 * 1024))  # freed later, as an operator would
    config = Config.from_env({}, data_dir=small_disk / "data", extractor="none")
    with TestClient(create_app(config, embedder)) as client:
        session = client.post("/sessions", json={}).json()["id"]
        stored, refused = 0, None
        for n in range(200):
            text = f"note {n} about the garden " + "tomatoes and basil " * 12_000
            answer = client.post(
                f"/sessions/{session}/episodes", json={"speaker": "user", "content": text}
            )
            if answer.status_code != 201:
                refused = answer
                break
            stored += 1
        assert refused is not None, "the disk never filled"
        assert refused.status_code == 507
        assert refused.json()["detail"].startswith("the disk is full: nothing of this request")
        assert stored > 0

        # Reads go on, and hold exactly what was acknowledged.
        listed = client.get(f"/sessions/{session}/episodes?limit=1000")
        assert listed.status_code == 200
        assert len(listed.json()) == stored
        assert client.get("/episodes/search", params={"q": "garden"}).status_code == 200
        batch = [{"speaker": "user", "content": "x" * 900_000} for _ in range(4)]
        whole = client.post(f"/sessions/{session}/episodes", json={"episodes": batch})
        assert whole.status_code == 507
        assert len(client.get(f"/sessions/{session}/episodes?limit=1000").json()) == stored

        ballast.unlink()  # space is freed: writes work again, without a restart
        again = client.post(
            f"/sessions/{session}/episodes", json={"speaker": "user", "content": "back again"}
        )
        assert again.status_code == 201
    with closing(sqlite3.connect(config.db_path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM episodes").fetchone()[0] == stored + 1


def test_the_vector_index_takes_no_write_on_a_nearly_full_disk(small_disk: Path) -> None:
    """Its files are mapped: a write the disk has no room for would kill the process."""
    index = EdgeVectorIndex(small_disk / "episodes", 3)
    try:
        with pytest.raises(OSError, match="MB free") as refused:
            index.upsert([VectorPoint(1, [1.0, 0.0, 0.0], 1)])
        assert refused.value.errno == errno.ENOSPC
        assert index.count() == 0
    finally:
        index.close()


# -- the vector index lost or damaged -------------------------------------------------------


class GatedEmbedder(SwitchableEmbedder):
    """The real model; batches of several texts (a rebuild's, never a query's) wait at a
    gate, so a test sees the service while the rebuild is under way."""

    def __init__(self, inner: SwitchableEmbedder) -> None:
        super().__init__(inner.inner)
        self.gate = threading.Event()

    def embed_batch(self, texts: Sequence[str]) -> list[Vector]:
        if len(texts) > 1:
            self.gate.wait(timeout=60)
        return super().embed_batch(texts)


GARDEN = [f"turn {n}: the weather was mild" for n in range(29)] + [
    "I planted heirloom tomatoes along the south fence"
]


def _stored_garden(config: Config, embedder: SwitchableEmbedder) -> tuple[int, int]:
    """A project with a chat of 30 turns, all indexed; returns (that session, a new one)."""
    memory = Memory.open(config, embedder)
    try:
        project = memory.store.projects.create("home").id
        chat = memory.store.sessions.create(project, "garden").id
        memory.add_episodes(chat, [NewEpisode("user", text) for text in GARDEN])
        later = memory.store.sessions.create(project, "later").id
        assert memory.count_pending_vectors() == 0
        return chat, later
    finally:
        memory.close()


def _damage(config: Config, how: str) -> None:
    episodes = config.vectors_path / "episodes"
    if how == "deleted":
        shutil.rmtree(episodes)
    else:
        for chunk in episodes.glob("segments/*/vector_storage/vectors/chunk_*.mmap"):
            os.truncate(chunk, 100)


@pytest.mark.parametrize("how", ["deleted", "truncated"])
def test_a_lost_vector_index_is_rebuilt_while_keyword_search_serves(
    how: str, tmp_path: Path, embedder: SwitchableEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    config = Config.from_env({}, data_dir=tmp_path / "data", extractor="none")
    _, later = _stored_garden(config, embedder)
    before = _rows(config.db_path)
    _damage(config, how)
    gated = GatedEmbedder(embedder)
    turn = {"sessionId": later, "message": "what did I plant by the fence?", "explain": True}
    with caplog.at_level(logging.WARNING), TestClient(create_app(config, gated)) as client:
        assert "lacks the vectors of 30 episodes" in caplog.text
        if how == "truncated":
            assert "could not be read" in caplog.text
            assert list(config.vectors_path.glob("episodes.damaged-*"))
        _wait_for(lambda: bool(_ready(client)))  # the start's read-ahead is done
        assert _ready(client)["pendingVectors"] == 30
        assert client.get("/health").json()["vectorsRebuilding"] == 30
        assert "nexus_vectors_pending 30.0" in client.get("/metrics").text
        during = client.post("/context", json={**turn, "settings": {"keywordWeight": 1}})
        assert during.status_code == 200
        assert during.json()["warnings"] == [
            "the vector index is being rebuilt: 30 episodes are found by keyword only until it ends"
        ]
        found = during.json()["memories"][0]
        assert "heirloom tomatoes" in found["content"]
        assert (found["semanticRank"], found["keywordRank"]) == (None, 1)

        gated.gate.set()
        _wait_for(lambda: _ready(client).get("pendingVectors") == 0)
        after = client.post("/context", json=turn).json()
        assert after["warnings"] == []
        assert after["memories"][0]["semanticRank"] == 1
    assert _rows(config.db_path) == before, "SQLite is the source: nothing in it changed"


def _rows(db: Path) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT id, session_id, speaker, content FROM episodes").fetchall()


def _ready(client: TestClient) -> dict[str, object]:
    """`GET /ready`'s body once it answers 200; empty while the start still reads ahead
    (503, which says nothing of pending vectors)."""
    answer = client.get("/ready")
    return answer.json() if answer.status_code == 200 else {}


def _wait_for(condition: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_an_index_deleted_while_running_is_rebuilt_at_the_next_start(
    tmp_path: Path, embedder: SwitchableEmbedder
) -> None:
    config = Config.from_env({}, data_dir=tmp_path / "data", extractor="none")
    chat, later = _stored_garden(config, embedder)
    turn = {"sessionId": later, "message": "what did I plant by the fence?", "explain": True}
    with TestClient(create_app(config, embedder)) as client:
        shutil.rmtree(config.vectors_path / "episodes")
        assert client.post("/context", json=turn).status_code == 200
        added = client.post(
            f"/sessions/{chat}/episodes",
            json={"speaker": "user", "content": "the rain stopped at noon"},
        )
        assert added.status_code == 201, "the write is kept even if its vector is not"
    with TestClient(create_app(config, embedder)) as client:
        _wait_for(lambda: _ready(client).get("pendingVectors") == 0)
        memories = client.post("/context", json=turn).json()["memories"]
        # The new turn follows the tomato one, and is embedded with its end: both lead.
        assert any("heirloom tomatoes" in m["content"] for m in memories[:2])
        assert all(m.get("semanticRank") for m in memories[:2])


# -- an embedder or an LLM that hangs, fails or talks nonsense -----------------------------


POOLS = ("nexus-turn", "AnyIO worker thread", "ThreadPoolExecutor")


def _pool(prefix: str) -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith(prefix))


def _others() -> list[str]:
    """Threads outside the bounded pools (the stub server's own are not the service's)."""
    return sorted(
        t.name
        for t in threading.enumerate()
        if not t.name.startswith(POOLS) and "process_request_thread" not in t.name
    )


def _sockets() -> int:
    return sum(1 for fd in Path("/proc/self/fd").iterdir() if _target(fd).startswith("socket:"))


def _target(fd: Path) -> str:
    try:
        return os.readlink(fd)
    except FileNotFoundError:  # closed by another thread since the listing
        return ""


def _calls(url: str, path: str, body: dict[str, object], times: int) -> list[httpx.Response]:
    with httpx.Client(base_url=url, timeout=30) as http, ThreadPoolExecutor(16) as pool:
        return list(pool.map(lambda _: http.post(path, json=body), range(times)))


@pytest.mark.slow
def test_a_hanging_failing_or_garbled_embedder_or_llm_piles_nothing_up(tmp_path: Path) -> None:
    with openai_stub() as (stub_url, stub):
        stub.stall_seconds = 1.0
        config = Config.from_env(
            {},
            data_dir=tmp_path / "data",
            extractor="none",
            embedder="openai",
            embedder_base_url=stub_url,
            embedder_model="stub-embed",
            embedder_timeout=0.2,
            llm_base_url=stub_url,
            llm_model="stub-chat",
            llm_timeout=0.2,
        )
        app = create_app(config)
        with live_server(app) as url:
            session = httpx.post(f"{url}/sessions", json={}, timeout=HTTP_TIMEOUT).json()["id"]
            httpx.post(
                f"{url}/sessions/{session}/episodes",
                json={"speaker": "user", "content": "my bicycle is a green gravel bike"},
                timeout=HTTP_TIMEOUT,
            )
            httpx.patch(
                f"{url}/settings",
                json={"keywordWeight": 1.0, "recentLimit": 0},
                timeout=HTTP_TIMEOUT,
            )
            turn = {"sessionId": session, "message": "what colour is my bicycle?"}
            _calls(url, "/context", turn, 32)  # warm: every pool at its working size
            others, sockets = _others(), _sockets()

            for mode in ("stall", "error", "garbage"):
                stub.embed_mode = mode
                answers = _calls(url, "/context", turn, 200 if mode == "stall" else 50)
                assert {a.status_code for a in answers} == {200}, mode
                for answer in answers:
                    found = answer.json()
                    assert found["warnings"] == [
                        "the embedder failed: only keyword memories this turn"
                    ]
                    assert "green gravel bike" in found["memories"][0]["content"]
            stub.embed_mode = "ok"
            for mode in ("stall", "error", "garbage"):
                stub.mode = mode
                answers = _calls(url, "/chat", turn, 200 if mode == "stall" else 50)
                assert {a.status_code for a in answers} == {502}, mode
                assert all("userEpisodeId" in a.json() for a in answers)
            time.sleep(stub.stall_seconds + 0.5)  # the stub's stalled handlers end
            # Threads come only from the two bounded pools, each within its bound; nothing
            # else was started on the way.
            assert _pool("nexus-turn") <= 16
            assert _pool("AnyIO worker thread") <= 40
            assert _others() == others, "threads piled up"
            assert _sockets() <= sockets + 4, "connections piled up"
