"""One message must not freeze the service: entity extraction works behind the requests
within bounds per message, a stop is seen within seconds whatever it is doing, and a
message it read in part is not read again at the next start."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import HTTP_TIMEOUT
from tests.live_server import free_port, start_server

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

SEPARATOR = "Build log:\n" + "=" * 12000
EMOJI_MiB = "\U0001f600" * 262_000  # just under 1 MiB of UTF-8
PROSE = "My sister Maria went to Lisbon with Tom last May and loved the trams. " * 2800
SPACED_EMOJI = "\U0001f600 " * 100_000


def _timed(call: httpx.Request, http: httpx.Client) -> float:
    started = time.monotonic()
    assert http.send(call).status_code == 200
    return time.monotonic() - started


def test_requests_are_answered_while_extraction_reads_what_froze_it(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(tmp_path / "data", port, NEXUS_EXTRACTOR="spacy")
    try:
        with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT) as http:
            sid = http.post("/sessions", json={"title": "logs"}).json()["id"]
            http.post(
                f"/sessions/{sid}/episodes",
                json={
                    "episodes": [{"speaker": "user", "content": "My dog Biscuit loves the beach"}]
                },
            )
            for text in (SEPARATOR, EMOJI_MiB, PROSE, SPACED_EMOJI):
                said = {"episodes": [{"speaker": "user", "content": text}]}
                assert http.post(f"/sessions/{sid}/episodes", json=said).status_code == 201
            health = http.build_request("GET", "/health")
            turn = http.build_request(
                "POST", "/context", json={"sessionId": sid, "message": "What is my dog called?"}
            )
            waits: list[float] = []
            while http.get("/health").json()["entitiesPending"]:
                waits += [_timed(health, http), _timed(turn, http)]
                time.sleep(0.05)
            assert len(waits) >= 10, "extraction ended before the requests beside it were timed"
            assert max(waits) < 1.0, sorted(waits)[-5:]
            # More work behind the writes, then a stop in the middle of it.
            said = {"episodes": [{"speaker": "user", "content": PROSE + " again"}]}
            http.post(f"/sessions/{sid}/episodes", json=said)
            time.sleep(1)
            assert http.get("/health").json()["entitiesPending"]
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)
        server = start_server(tmp_path / "data", port, NEXUS_EXTRACTOR="spacy")
        with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT) as http:
            deadline = time.monotonic() + 5
            while http.get("/ready").status_code != 200:
                assert time.monotonic() < deadline, "the service did not come up ready"
                time.sleep(0.1)
            assert _timed(http.build_request("GET", "/health"), http) < 1.0
    finally:
        server.kill()
        server.wait(timeout=30)
