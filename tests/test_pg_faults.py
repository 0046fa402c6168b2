"""The PostgreSQL store when the database goes away under it: a read recovers from
connections the server closed, a request the database cannot answer is a 503 that says
so, and nothing stored is lost."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.memory.postgres.store import PgStore
from tests.conftest import SwitchableEmbedder


def _terminate(admin_url: str, database: str) -> None:
    """What a server restart or a failover does to the pool's connections."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            [database],
        )


def test_closed_connections_are_replaced_and_a_lost_database_is_a_503(
    tmp_path: Path, pg_url: str, postgres: str, embedder: SwitchableEmbedder
) -> None:
    database = pg_url.split("?")[0].rsplit("/", 1)[1]
    config = Config.from_env({}, data_dir=tmp_path / "data", extractor="none", database_url=pg_url)
    with TestClient(create_app(config, embedder, role="memory")) as client:
        session = client.post("/sessions", json={}).json()["id"]
        episode = {"speaker": "user", "content": "my bicycle is a green gravel bike"}
        assert client.post(f"/sessions/{session}/episodes", json=episode).status_code == 201

        _terminate(postgres, database)
        assert client.get(f"/sessions/{session}").status_code == 200  # read again, alive
        second = {"speaker": "user", "content": "and my helmet is orange"}
        assert client.post(f"/sessions/{session}/episodes", json=second).status_code == 201

        with psycopg.connect(postgres, autocommit=True) as admin:
            admin.execute(f"ALTER DATABASE {database} WITH ALLOW_CONNECTIONS false")
        try:
            _terminate(postgres, database)
            for method, path, body in [
                ("GET", f"/sessions/{session}/episodes", None),
                ("POST", f"/sessions/{session}/episodes", second),
            ]:
                answer = client.request(method, path, json=body)
                assert answer.status_code == 503, (path, answer.text)
                assert "does not answer" in answer.json()["detail"]
                assert "Traceback" not in answer.text
        finally:
            with psycopg.connect(postgres, autocommit=True) as admin:
                admin.execute(f"ALTER DATABASE {database} WITH ALLOW_CONNECTIONS true")
        listed = _once_back(client, f"/sessions/{session}/episodes")
        assert [e["content"] for e in listed] == [episode["content"], second["content"]]


def test_a_transaction_begun_on_a_connection_the_server_closed_is_begun_again(
    pg_url: str, postgres: str
) -> None:
    """A restart closes the pool's idle connections too. A transaction whose BEGIN meets one
    has run nothing of its caller's, so it is begun again on a live connection: the write
    is stored, not refused with a 503 (a read before it no longer has to clear the pool)."""
    database = pg_url.split("?")[0].rsplit("/", 1)[1]
    store = PgStore(pg_url)
    try:
        session = store.sessions.create(title="t")
        _terminate(postgres, database)
        with store.atomic() as conn:
            conn.execute("UPDATE sessions SET title = %s WHERE id = %s", ["renamed", session.id])
        assert store.sessions.get(session.id).title == "renamed"
    finally:
        store.close()


def _once_back(client: TestClient, path: str) -> Any:
    """The answer once the pool has replaced its connections: it retries in the background,
    and on a loaded machine that can take a few seconds after the database is back. Until
    then each request is the same clean 503."""
    deadline = time.monotonic() + 20
    while True:
        answer = client.get(path)
        if answer.status_code != 503 or time.monotonic() > deadline:
            assert answer.status_code == 200, answer.text
            return answer.json()
        assert "does not answer" in answer.json()["detail"]
        time.sleep(0.2)


def test_a_test_postgresql_that_died_is_started_again_for_the_next_test(
    postgres_server: Any,
) -> None:
    """The suite's own fixture: one crash of the embedded server (as under a loaded run)
    must not fail every later PostgreSQL test of the worker."""
    import os
    import signal

    from tests.conftest import running

    before = running(postgres_server)
    pid = postgres_server.get_pid()
    os.kill(pid, signal.SIGQUIT)  # an immediate shutdown: what a crash leaves behind
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    try:
        psycopg.connect(before, connect_timeout=2).close()
        raise AssertionError("the server was to be down")
    except psycopg.OperationalError:
        pass
    again = running(postgres_server)
    assert again == before  # what the session's tests hold still reaches it
    with psycopg.connect(again, autocommit=True, connect_timeout=5) as admin:
        assert admin.execute("SELECT 1").fetchone() == (1,)


def test_the_runs_temporary_files_are_its_own(tmp_path: Path) -> None:
    """pytest's shared root keeps only the last few runs' folders (and tightens it to
    0700): another run on the machine deleted this run's database under it. Each run
    keeps its files in a folder of its own."""
    assert "pytest-of-" not in str(tmp_path)
    assert Path(tempfile.gettempdir()) in tmp_path.parents


def test_a_failed_start_says_why_from_the_servers_log(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from tests.conftest import _log_tail

    data = tmp_path / "data"
    data.mkdir()
    (data / "log").write_text('FATAL:  could not create lock file "/run/x": Permission denied\n')
    said = _log_tail(SimpleNamespace(pgdata=data, log=data / "log"))
    assert "Permission denied" in said
    gone = _log_tail(SimpleNamespace(pgdata=tmp_path / "gone", log=tmp_path / "gone" / "log"))
    assert "is gone" in gone
