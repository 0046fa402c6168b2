from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from nexusai.observability import JsonFormatter, RequestIdFilter, configure_logging, request_id
from tests.conftest import HTTP_TIMEOUT
from tests.live_server import free_port, start_server


def test_metrics_in_prometheus_text(client: TestClient) -> None:
    sid = client.post("/sessions").json()["id"]
    client.post(f"/sessions/{sid}/episodes", json={"speaker": "user", "content": "walrus facts"})
    client.patch("/settings", json={"keywordWeight": 1, "recentLimit": 0})
    client.post("/context", json={"sessionId": sid, "message": "walrus"})
    client.get("/sessions/999999")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'nexus_requests_total{method="POST",route="/context",status="200"}' in text
    assert 'route="/sessions/{session_id}",status="404"' in text  # templates, not raw ids
    assert 'nexus_retrieval_seconds_count{leg="semantic"}' in text
    assert 'nexus_retrieval_seconds_count{leg="keyword"}' in text
    assert "nexus_embedding_seconds_count" in text
    assert "nexus_episodes_stored 1.0" in text
    assert "nexus_vectors_pending 0.0" in text


def test_every_response_carries_a_request_id(client: TestClient) -> None:
    assert len(client.get("/health").headers["x-request-id"]) == 16
    echoed = client.get("/health", headers={"X-Request-ID": "trace-42"})
    assert echoed.headers["x-request-id"] == "trace-42"


def test_json_logs_carry_the_request_id(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json")  # conftest puts the process's logging back after
    token = request_id.set("abc123")
    try:
        logging.getLogger("nexusai.test").warning("embedding failed for %s", "a turn")
    finally:
        request_id.reset(token)
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["requestId"] == "abc123"
    assert line["message"] == "embedding failed for a turn"
    assert line["level"] == "WARNING"


def test_formatters_are_wired() -> None:
    record = logging.LogRecord("nexusai.x", logging.INFO, __file__, 1, "hello", None, None)
    assert RequestIdFilter().filter(record)
    assert record.__dict__["request_id"] == "-"
    assert json.loads(JsonFormatter().format(record))["requestId"] == "-"


@pytest.mark.subprocess
@pytest.mark.model
def test_a_served_process_logs_every_line_in_one_format(tmp_path: Path) -> None:
    """uvicorn's lines (start-up, each request) and nexusai's, all JSON when asked."""
    log = tmp_path / "serve.log"
    port = free_port()
    process = start_server(tmp_path / "data", port, log=str(log), NEXUS_LOG_FORMAT="json")
    try:
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=HTTP_TIMEOUT)
        httpx.get(f"http://127.0.0.1:{port}/no-such-route", timeout=HTTP_TIMEOUT)
    finally:
        process.terminate()
        process.wait(timeout=60)
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line is JSON
    loggers = {entry["logger"] for entry in entries}
    assert {"uvicorn.error", "uvicorn.access"} <= loggers
    assert any("/no-such-route" in entry["message"] for entry in entries)
