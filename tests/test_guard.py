from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.cli import cli
from nexusai.config import Config
from nexusai.memory.service import Memory
from tests.conftest import SwitchableEmbedder
from tests.live_server import free_port

KEYS = "first-secret-key,second-secret-key"


@pytest.fixture
def locked(config: Config, embedder: SwitchableEmbedder) -> Iterator[TestClient]:
    guarded = Config.from_env({}, data_dir=config.data_dir, extractor="none", api_key=KEYS)
    with TestClient(create_app(guarded, embedder)) as client:
        yield client


OPEN = {"/health", "/ready"}


def test_every_operation_but_the_open_ones_needs_a_key(
    locked: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Generated from the OpenAPI schema, so a new route is covered without a new test."""
    caplog.set_level(logging.DEBUG)
    schema = locked.get("/openapi.json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            concrete = re.sub(r"\{[^}]+\}", "1", path)
            response = locked.request(method, concrete)
            if path in OPEN:
                assert response.status_code == 200, path
                assert "401" not in operation["responses"]
                continue
            assert response.status_code == 401, (method, path)
            assert response.headers["www-authenticate"] == "Bearer"
            assert "401" in operation["responses"], (method, path)


def test_docs_open_without_a_key_and_load_nothing_from_elsewhere(locked: TestClient) -> None:
    page = locked.get("/docs")
    assert page.status_code == 200
    assert "/docs-assets/swagger-ui-bundle.js" in page.text
    assert "http://" not in page.text.replace("http://testserver", "")
    assert "https://" not in page.text
    assert locked.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
    assert locked.get("/docs-assets/swagger-ui.css").status_code == 200
    assert locked.get("/openapi.json").status_code == 200


def test_a_wrong_key_is_refused_and_never_echoed(
    locked: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = locked.get("/settings", headers={"Authorization": "Bearer first-secret-kez"})
    assert wrong.status_code == 401
    assert "secret" not in wrong.text
    assert "secret" not in caplog.text


def test_each_configured_key_opens(locked: TestClient) -> None:
    for key in KEYS.split(","):
        response = locked.get("/settings", headers={"Authorization": f"Bearer {key}"})
        assert response.status_code == 200
    assert (
        locked.get("/settings", headers={"Authorization": "Basic first-secret-key"}).status_code
        == 401
    )


def test_config_never_shows_keys() -> None:
    config = Config.from_env({"NEXUS_API_KEY": "hush-hush", "NEXUS_LLM_API_KEY": "sk-llm"})
    assert "hush" not in repr(config)
    assert "sk-llm" not in repr(config)


def test_oversized_body_is_413_with_the_limit(config: Config, embedder: SwitchableEmbedder) -> None:
    small = Config.from_env({}, data_dir=config.data_dir, extractor="none", max_body_bytes=4096)
    with TestClient(create_app(small, embedder)) as client:
        sid = client.post("/sessions").json()["id"]
        big = {"episodes": [{"speaker": "u", "content": "x" * 1000} for _ in range(10)]}
        response = client.post(f"/sessions/{sid}/episodes", json=big)
        assert response.status_code == 413
        assert "4096 bytes" in response.json()["detail"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
            yield b'{"episodes": ['
            for i in range(10):
                yield (b"," if i else b"") + b'{"speaker": "u", "content": "' + b"y" * 1000 + b'"}'
            yield b"]}"

        streamed = client.post(
            f"/sessions/{sid}/episodes",
            content=chunks(),
            headers={"content-type": "application/json"},
        )
        assert streamed.status_code == 413
        assert client.get(f"/sessions/{sid}/episodes").json() == []
        ok = client.post(f"/sessions/{sid}/episodes", json={"speaker": "u", "content": "fits"})
        assert ok.status_code == 201


def test_public_bind_without_key_warns_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)  # only the start-up check
    monkeypatch.delenv("NEXUS_API_KEY", raising=False)
    port = str(free_port())  # not 4000: a service may be running there
    args = ["serve", "--host", "0.0.0.0", "--port", port, "--role", "orchestration"]
    result = CliRunner().invoke(cli, args)
    assert "NEXUS_MEMORY_URL" in result.output  # fails on config, after the warning
    assert "WARNING nexusai.serve" in result.output
    assert "listening on 0.0.0.0 with no NEXUS_API_KEY" in result.output


def test_a_route_reached_without_the_door_is_refused_not_taken_for_the_admin(
    memory: Memory,
) -> None:
    """An app that forgot the door: memory's routes fail closed, the open ones still open."""
    from fastapi import FastAPI

    from nexusai.http import install_error_handlers
    from nexusai.memory import api

    bare = FastAPI()
    bare.state.memory = memory
    bare.state.config = Config.from_env({}, data_dir=memory.store.path.parent)  # type: ignore[attr-defined]
    install_error_handlers(bare)
    bare.include_router(api.router)
    with TestClient(bare) as client:
        refused = client.get("/sessions")
        assert refused.status_code == 401
        assert "did not pass the API key check" in refused.json()["detail"]
        assert client.get("/health").status_code == 200
