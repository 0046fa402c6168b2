"""Commands that must refuse a data directory a running `nexus serve` holds: they say so in
one line and open nothing, so the service's index upkeep goes on untouched."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import HTTP_TIMEOUT
from tests.live_server import free_port, start_server

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


def _snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    """Every file under the folder: its modification time and its content's hash."""
    return {
        str(path.relative_to(folder)): (
            path.stat().st_mtime_ns,
            hashlib.sha256(path.read_bytes()).hexdigest(),
        )
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _nexus(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "NEXUS_URL"}
    environment.update(NEXUS_EXTRACTOR="none", NEXUS_DATA_DIR=str(data_dir))
    return subprocess.run(
        [sys.executable, "-m", "nexusai.cli", *args],
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_refused_commands_touch_nothing_and_upkeep_stays_clean(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    log = tmp_path / "service.log"
    port = free_port()
    service = start_server(data_dir, port, log=str(log))
    url = f"http://127.0.0.1:{port}"
    try:
        sid = httpx.post(f"{url}/sessions", json={}, timeout=HTTP_TIMEOUT).json()["id"]
        turns = [{"speaker": "user", "content": f"turn {i} about the garden"} for i in range(20)]
        assert httpx.post(
            f"{url}/sessions/{sid}/episodes", json={"episodes": turns}, timeout=HTTP_TIMEOUT
        ).is_success
        line = {"session": "s", "speaker": "user", "content": "hello"}
        (tmp_path / "one.jsonl").write_text(json.dumps(line) + "\n")
        before = _snapshot(data_dir / "vectors")
        for command in (["import", str(tmp_path / "one.jsonl")], ["doctor"], ["mcp"]):
            result = _nexus(data_dir, *command)
            assert result.returncode != 0, command
            assert "open in another process" in result.stderr, (command, result.stderr)
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr  # no traceback
        assert _snapshot(data_dir / "vectors") == before
        more = [{"speaker": "user", "content": "and one more about roses"}]
        assert httpx.post(
            f"{url}/sessions/{sid}/episodes", json={"episodes": more}, timeout=HTTP_TIMEOUT
        ).is_success
        assert httpx.get(f"{url}/health", timeout=HTTP_TIMEOUT).json()["episodes"] == 21
    finally:
        service.terminate()
        service.wait(timeout=60)
    said = log.read_text()
    assert "could not be saved" not in said, said
    assert "failed" not in said, said
    # What the service wrote is all there for the next process (the refused ones are gone).
    checked = _nexus(data_dir, "doctor")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "missing from the vector index: 0" in checked.stdout
