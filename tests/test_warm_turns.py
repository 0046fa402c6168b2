"""The turns a start asks of itself before `/ready`: the newest messages, through the path
a `/context` turn takes, storing nothing."""

from __future__ import annotations

import logging
import time

import pytest
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.orchestration.warm import WARM_SETTINGS, warm_turns
from tests.conftest import SwitchableEmbedder

MESSAGES = [
    "I moved to Lisbon in March and started at the harbour lab.",
    "My sister Ana keeps bees on the roof of her flat.",
    "Remind me to renew the boat licence before the end of May.",
    "What did I say about the harbour lab?",
]


def _ready(client: TestClient) -> None:
    for _ in range(600):  # 503 while the start reads ahead
        if client.get("/ready").status_code == 200:
            return
        time.sleep(0.1)
    raise AssertionError("never ready")


def _stored(config: Config, embedder: SwitchableEmbedder) -> int:
    with TestClient(create_app(config, embedder)) as client:
        sid = client.post("/sessions", json={"title": "lisbon"}).json()["id"]
        episodes = [{"speaker": "user", "content": text} for text in MESSAGES]
        client.post(f"/sessions/{sid}/episodes", json={"episodes": episodes}).raise_for_status()
        client.patch("/settings", json={"keywordWeight": 1.0}).raise_for_status()
        return int(sid)


def test_a_start_asks_the_newest_messages_before_it_is_ready_and_stores_nothing(
    config: Config, embedder: SwitchableEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    _stored(config, embedder)
    caplog.set_level(logging.INFO, logger="nexusai.warmup")
    asked_before = embedder.calls
    with TestClient(create_app(config, embedder)) as client:
        _ready(client)
        health = client.get("/health").json()
        settings = client.get("/settings").json()
    said = [r.getMessage() for r in caplog.records if r.name == "nexusai.warmup"]
    assert any(m.startswith("read a turn's path ahead of the turns") for m in said), said
    assert not [m for m in said if "failed" in m]
    assert embedder.calls >= asked_before + len(MESSAGES)  # each message embedded as asked
    assert health["episodes"] == len(MESSAGES)
    assert settings["keywordWeight"] == 1.0  # as saved
    assert settings["fusion"] == "rrf"


def test_an_empty_store_starts_ready_with_no_turn_asked(
    config: Config, embedder: SwitchableEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nexusai.warmup")
    with TestClient(create_app(config, embedder)) as client:
        _ready(client)
    assert not [r for r in caplog.records if "failed" in r.getMessage()]
    assert embedder.calls == 0  # nothing was there to ask, so nothing was embedded


def test_the_warm_turns_end_when_told(config: Config, embedder: SwitchableEmbedder) -> None:
    sid = _stored(config, embedder)
    with TestClient(create_app(config, embedder)) as client:
        _ready(client)
        orchestration = client.app.state.orchestration  # type: ignore[attr-defined]
        before = embedder.calls
        warm_turns(orchestration, [(sid, MESSAGES[0])] * 3, lambda: False)
        assert embedder.calls == before
        steps = iter(range(len(WARM_SETTINGS)))
        warm_turns(orchestration, [(sid, MESSAGES[3])] * 3, lambda: next(steps, None) is not None)
        assert embedder.calls == before + len(WARM_SETTINGS)  # one turn a step allowed
