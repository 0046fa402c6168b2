"""Faults a server meets in a year of running, each injected for real: a full disk, a lost
or damaged vector index, an embedder or LLM that hangs, fails or talks nonsense."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.config import Config
from tests.conftest import SwitchableEmbedder


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
    with sqlite3.connect(config.db_path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM episodes").fetchone()[0] == stored + 1
