"""The retrieval suite in both deployments: one process, and memory + orchestration as two
HTTP services on loopback."""

from __future__ import annotations

import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.errors import ConfigError
from nexusai.llm import OpenAIChat
from nexusai.memory.extractors import SpacyExtractor
from tests.conftest import SwitchableEmbedder, entities_settled
from tests.live_server import live_server
from tests.openai_stub import openai_stub

TURNS = [
    ("user", "I adopted a puppy called Biscuit"),
    ("assistant", "Biscuit is a lovely name for a dog"),
    ("user", "My sister Ana moved to Lisbon last spring"),
    ("assistant", "Lisbon is beautiful in spring"),
    ("user", "The quarterly report for Qdrant is due Friday"),
]
QUESTIONS = ["what is my dog called?", "where does Ana live?", "when is the report due?"]


def seed(client: httpx.Client | TestClient) -> int:
    """The turns written in a first session, their entities extracted (behind the write,
    on the time the turns leave): the id of a second session to ask from."""
    project = client.post("/projects", json={"name": "home"}).json()["id"]
    first = client.post("/sessions", json={"projectId": project}).json()["id"]
    second = client.post("/sessions", json={"projectId": project}).json()["id"]
    episodes = [{"speaker": s, "content": c} for s, c in TURNS]
    client.post(f"/sessions/{first}/episodes", json={"episodes": episodes})
    entities_settled(client)
    return int(second)


@pytest.fixture
def counted_memory(
    tmp_path: Path, embedder: SwitchableEmbedder, spacy_extractor: SpacyExtractor
) -> Iterator[tuple[str, list[str]]]:
    """The memory service on loopback with real entity extraction, recording every path it
    is asked for."""
    paths: list[str] = []
    config = Config.from_env({}, data_dir=tmp_path / "memory", extractor="none")
    app = create_app(config, embedder, role="memory")

    @app.middleware("http")
    async def record(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        paths.append(request.url.path)
        return await call_next(request)

    with live_server(app) as url:
        app.state.memory.entities.extractor = spacy_extractor
        yield url, paths


@pytest.fixture
def split(
    counted_memory: tuple[str, list[str]], tmp_path: Path, embedder: SwitchableEmbedder
) -> Iterator[tuple[TestClient, list[str], int]]:
    url, paths = counted_memory
    with httpx.Client(base_url=url) as memory:
        second = seed(memory)
    config = Config.from_env({}, data_dir=tmp_path / "orchestration", memory_url=url)
    with TestClient(create_app(config, embedder, role="orchestration")) as orchestration:
        yield orchestration, paths, second


@pytest.fixture
def single(client: TestClient, spacy_extractor: SpacyExtractor) -> tuple[TestClient, int]:
    client.app.state.memory.entities.extractor = spacy_extractor  # type: ignore[attr-defined]
    return client, seed(client)


def contexts(client: TestClient, session_id: int) -> list[Any]:
    client.patch("/settings", json={"keywordWeight": 1.0})
    return [
        client.post(
            "/context", json={"sessionId": session_id, "message": q, "explain": True}
        ).json()
        for q in QUESTIONS
    ]


def without_times(context: Any) -> Any:
    for memory in context["memories"] + context["recent"]:
        memory.pop("createdAt")
        memory.pop("occurredAt")
    for entity in context["entities"]:
        entity.pop("firstSeen")
        entity.pop("lastSeen")
    return context


def test_same_context_in_both_modes(
    split: tuple[TestClient, list[str], int], single: tuple[TestClient, int]
) -> None:
    two = [without_times(c) for c in contexts(split[0], split[2])]
    one = [without_times(c) for c in contexts(single[0], single[1])]
    assert two == one
    # Entities reach a turn in split mode too (they once came only in one process).
    assert {"Biscuit", "Lisbon"} <= {e["name"] for c in two for e in c["entities"]}
    top_two = {m["content"] for m in two[0]["memories"][:2]}
    assert "I adopted a puppy called Biscuit" in top_two


def test_keyword_weight_zero_sends_no_keyword_request(
    split: tuple[TestClient, list[str], int],
) -> None:
    orchestration, paths, session = split
    orchestration.patch("/settings", json={"keywordWeight": 0})
    paths.clear()
    assert (
        orchestration.post("/context", json={"sessionId": session, "message": "dog?"}).status_code
        == 200
    )
    assert "/episodes/search" not in paths
    assert "/vectors/search/episodes" in paths
    orchestration.patch("/settings", json={"keywordWeight": 1})
    orchestration.post("/context", json={"sessionId": session, "message": "dog?"})
    assert paths.count("/episodes/search") == 1


def test_chat_through_two_services_stores_in_memory(
    counted_memory: tuple[str, list[str]], tmp_path: Path, embedder: SwitchableEmbedder
) -> None:
    url, _ = counted_memory
    with httpx.Client(base_url=url) as memory:
        session = seed(memory)
    config = Config.from_env({}, data_dir=tmp_path / "orchestration", memory_url=url)
    with openai_stub() as (llm_url, _):
        app = create_app(config, embedder, OpenAIChat(llm_url, "m"), role="orchestration")
        with TestClient(app) as orchestration:
            body = orchestration.post("/chat", json={"sessionId": session, "message": "hi"})
            assert body.status_code == 200, body.text
            recent = orchestration.post(
                "/context", json={"sessionId": session, "message": "x"}
            ).json()["recent"]
    ids = [e["id"] for e in recent[-2:]]
    assert ids == [body.json()["userEpisodeId"], body.json()["assistantEpisodeId"]]


def test_unknown_session_is_404_across_the_wire(split: tuple[TestClient, list[str], int]) -> None:
    response = split[0].post("/context", json={"sessionId": 999, "message": "hi"})
    assert response.status_code == 404
    assert "session 999" in response.json()["detail"]


def test_memory_down_is_503_naming_it(tmp_path: Path, embedder: SwitchableEmbedder) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()  # nothing listens here now
    config = Config.from_env({}, data_dir=tmp_path, memory_url=url)
    with TestClient(create_app(config, embedder, role="orchestration")) as orchestration:
        for path in ("/context", "/chat"):
            response = orchestration.post(path, json={"sessionId": 1, "message": "hi"})
            assert response.status_code == 503
            assert "memory service" in response.json()["detail"]


def test_memory_slow_is_503_within_the_time_out(
    tmp_path: Path, embedder: SwitchableEmbedder
) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()  # accepts connections, never answers
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    config = Config.from_env({}, data_dir=tmp_path, memory_url=url, memory_timeout=0.5)
    try:
        with TestClient(create_app(config, embedder, role="orchestration")) as orchestration:
            started = time.monotonic()
            response = orchestration.post("/context", json={"sessionId": 1, "message": "hi"})
            assert response.status_code == 503
            assert "did not answer in time" in response.json()["detail"]
            assert time.monotonic() - started < 5
    finally:
        silent.close()


def test_orchestration_role_needs_the_memory_url(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="NEXUS_MEMORY_URL"):
        create_app(Config.from_env({}, data_dir=tmp_path), role="orchestration")


def test_memory_role_serves_no_orchestration(tmp_path: Path, embedder: SwitchableEmbedder) -> None:
    config = Config.from_env({}, data_dir=tmp_path, extractor="none")
    app: FastAPI = create_app(config, embedder, role="memory")
    with TestClient(app) as memory:
        assert memory.get("/settings").status_code == 404
        assert memory.get("/health").status_code == 200


def test_a_project_keys_session_check_and_the_scope_are_one_request(
    counted_memory: tuple[str, list[str]], embedder: SwitchableEmbedder
) -> None:
    """A project key's turn reads its session's scope to check the project, and the turn
    uses that scope: one `/scope` request a turn (the round trips ARCHITECTURE.md draws)."""
    from nexusai.orchestration.http_memory import HttpMemoryClient
    from nexusai.orchestration.settings import DEFAULTS
    from nexusai.orchestration.turn import TurnRequest, run_turn

    url, paths = counted_memory
    with httpx.Client(base_url=url) as memory:
        project = memory.post("/projects", json={"name": "p"}).json()["id"]
        sid = memory.post("/sessions", json={"projectId": project}).json()["id"]
    client = HttpMemoryClient(url, None, 5.0)
    try:
        paths.clear()
        scope = client.scope(sid)  # what the key's check reads
        assert scope.project_id == project
        run_turn(client, embedder, DEFAULTS, TurnRequest(sid, "hello", scope=scope))
        assert paths.count(f"/sessions/{sid}/scope") == 1
        run_turn(client, embedder, DEFAULTS, TurnRequest(sid, "hello"))  # the admin's turn
        assert paths.count(f"/sessions/{sid}/scope") == 2
    finally:
        client.close()
