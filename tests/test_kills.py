"""SIGKILL at random points of `nexus reindex`, `nexus restore`, `nexus import` and the
migration of an existing store, KILLS times each: the next start (or, for an import, the
import run again) finishes the work or rolls it back, and the store holds exactly what
its source held."""

from __future__ import annotations

import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from nexusai.config import Config
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.memory.service import Memory
from nexusai.memory.sqlite import fts
from nexusai.memory.sqlite.migrations import MIGRATIONS, apply_migrations
from nexusai.memory.sqlite.store import SqliteStore
from nexusai.models import NewEpisode

# Kills per command, each at a random point of its run (seeded). 8 keep the suite under ten
# minutes on two cores; each kill costs a run and a restart (about 5 s).
KILLS = 8
TOPICS = ["walrus", "violin", "glacier", "saffron", "lantern", "orchard", "comet", "harbor"]


def _config(data_dir: Path) -> Config:
    return Config.from_env({}, data_dir=data_dir, extractor="none")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, minilm: LocalEmbedder) -> Path:
    """A data directory of 3 sessions and 360 indexed episodes, and its backup."""
    data_dir = tmp_path_factory.mktemp("source")
    memory = Memory.open(_config(data_dir), minilm)
    try:
        for s in range(3):
            session = memory.store.sessions.create(None, f"chat {s}").id
            memory.add_episodes(
                session,
                [
                    NewEpisode("user", f"note {s}-{i} about the {TOPICS[i % 8]} and more")
                    for i in range(120)
                ],
            )
    finally:
        memory.close()
    from nexusai.memory import upkeep

    upkeep.backup(_config(data_dir), data_dir.parent / "source-backup.db")
    with closing(sqlite3.connect(_config(data_dir).db_path)) as conn:  # all of it in the one file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return data_dir


def _copy(source: Path, target: Path) -> None:
    """The data directory as a stopped service leaves it: the checkpointed store file and
    the vectors (a stray WAL file would belong to no one)."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*-wal", "*-shm"))


def _rows(db: Path) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT id, session_id, content FROM episodes ORDER BY id").fetchall()


class Killer:
    """SIGKILLs commands at a random share of how long a whole run takes. A run that ends
    before its kill shortens the estimate, so one slow first run (cold caches, a busy
    machine) does not leave the later kills landing after the work is done."""

    def __init__(self, full: float, seed: int, low: float) -> None:
        self.full = full
        self.rng = random.Random(seed)
        self.low = low
        self.kills = 0

    def run(self, command: list[str]) -> None:
        after = self.rng.uniform(self.low, 0.9) * self.full
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            process.wait(timeout=after)
            self.full = min(self.full, time.monotonic() - started)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
            self.kills += 1

    def assert_most_killed(self) -> None:
        assert self.kills >= KILLS * 3 // 4, "most runs must be killed before they end"


def _timed(*commands: list[str]) -> float:
    """The quickest of the runs: the estimate a kill point is drawn against."""
    times = []
    for command in commands:
        started = time.monotonic()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.monotonic() - started)
    return min(times)


def _next_start_finishes(
    data_dir: Path, expected: list[tuple[object, ...]], model: LocalEmbedder
) -> None:
    """What `nexus serve` does at start: open (checks, reconciles), then index what waits."""
    memory = Memory.open(_config(data_dir), model)
    try:
        memory.sync_pending()
        assert memory.count_pending_vectors() == 0
        assert memory.vectors.count() == len(expected)
        assert memory.store.keywords.ok()
    finally:
        memory.close()
    assert _rows(_config(data_dir).db_path) == expected


NEXUS = [sys.executable, "-m", "nexusai.cli"]


def test_killed_reindex(source: Path, minilm: LocalEmbedder, tmp_path: Path) -> None:
    expected = _rows(_config(source).db_path)
    work = tmp_path / "work"
    _copy(source, work)
    reindex = [*NEXUS, "reindex", "--data-dir", str(work)]
    killer = Killer(_timed(reindex, reindex), seed=14, low=0.3)
    for _ in range(KILLS):
        shutil.rmtree(work)
        _copy(source, work)
        killer.run(reindex)
        _next_start_finishes(work, expected, minilm)
    killer.assert_most_killed()


def test_killed_restore(source: Path, minilm: LocalEmbedder, tmp_path: Path) -> None:
    backup = source.parent / "source-backup.db"
    expected = _rows(backup)
    restore = [*NEXUS, "restore", str(backup), "--data-dir"]
    killer = Killer(
        _timed([*restore, str(tmp_path / "timing-1")], [*restore, str(tmp_path / "timing-2")]),
        seed=15,
        low=0.05,
    )
    for n in range(KILLS):
        target = tmp_path / f"restored-{n}"
        killer.run([*restore, str(target)])
        if not _config(target).db_path.exists():  # killed before the copy was in place
            assert not list(target.glob("nexus.db*")) or list(target.glob("*.restoring"))
            continue  # rolled back: nothing to start on, and `nexus restore` may run again
        _next_start_finishes(target, expected, minilm)
    killer.assert_most_killed()


def _old_store(path: Path, episodes: int) -> list[tuple[object, ...]]:
    """A store as an early version left it (migrations m001 to m006), full of episodes."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    apply_migrations(conn, MIGRATIONS[:6])
    conn.execute("INSERT INTO sessions (id, created_at) VALUES (1, 't'), (2, 't')")
    conn.executemany(
        "INSERT INTO episodes (id, session_id, speaker, content, occurred_at, created_at,"
        " search_text) VALUES (?, ?, 'user', ?, ?, 't', ?)",
        [
            (
                i,
                1 + i % 2,
                f"turn {i} on the {TOPICS[i % 8]}",
                f"2024-01-01T00:{i % 60:02}:00Z",
                f"user: turn {i} on the {TOPICS[i % 8]}",
            )
            for i in range(1, episodes + 1)
        ],
    )
    conn.execute("COMMIT")
    rows = conn.execute("SELECT id, session_id, content FROM episodes ORDER BY id").fetchall()
    conn.close()
    return rows


OPEN_STORE = [
    sys.executable,
    "-c",
    "import sys\nfrom nexusai.memory.sqlite.store import SqliteStore\nSqliteStore(sys.argv[1]).close()",
]


def test_killed_migration(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    expected = _old_store(old, 6_000)
    timings = [tmp_path / "timing-1.db", tmp_path / "timing-2.db"]
    for timing in timings:
        shutil.copyfile(old, timing)
    killer = Killer(_timed(*([*OPEN_STORE, str(t)] for t in timings)), seed=16, low=0.2)
    for n in range(KILLS):
        work = tmp_path / f"migrating-{n}.db"
        shutil.copyfile(old, work)
        killer.run([*OPEN_STORE, str(work)])
        with SqliteStore(work) as store:  # the next start: migrations done, or done now
            assert {m.__name__ for m in MIGRATIONS} <= set(_applied(store))
            assert fts.integrity_check(store.connection())
            assert [e.id for e in store.keywords.search("saffron", 3)]
        assert _rows(work) == expected
    killer.assert_most_killed()


def _applied(store: SqliteStore) -> list[str]:
    return [row[0] for row in store.connection().execute("SELECT name FROM _migrations")]


def test_killed_import_run_again_stores_every_message_once(
    minilm: LocalEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`nexus import` killed mid-way (each conversation is one transaction, embedded after
    it) and run again: every message once, each with its vector after the next start."""
    monkeypatch.setenv("NEXUS_EXTRACTOR", "none")  # the child's: entities are not at stake
    lines = [
        f'{{"session": "chat {c}", "speaker": "user", "content": "line {c}-{i} on the'
        f' {TOPICS[i % 8]}"}}'
        for c in range(20)
        for i in range(60)
    ]
    file = tmp_path / "chats.jsonl"
    file.write_text("\n".join(lines) + "\n")
    expected = sorted(f"line {c}-{i} on the {TOPICS[i % 8]}" for c in range(20) for i in range(60))

    def importing(n: int) -> list[str]:
        return [*NEXUS, "import", str(file), "--data-dir", str(tmp_path / f"data-{n}")]

    killer = Killer(_timed(importing(-1), importing(-2)), seed=16, low=0.3)
    cut_short = 0  # imports killed with some conversations stored and some not
    for n in range(KILLS):
        killer.run(importing(n))
        cut_short += 0 < _stored(tmp_path / f"data-{n}") < len(expected)
        subprocess.run(importing(n), check=True, capture_output=True)
        memory = Memory.open(_config(tmp_path / f"data-{n}"), minilm)
        try:
            memory.sync_pending()
            contents = memory.store.connection().execute("SELECT content FROM episodes")
            assert sorted(row[0] for row in contents) == expected
            assert memory.count_pending_vectors() == 0
            assert memory.vectors.count() == len(expected)
            assert memory.store.keywords.ok()
        finally:
            memory.close()
    killer.assert_most_killed()
    assert cut_short >= KILLS // 2, "most kills must land while conversations are written"


def _stored(data_dir: Path) -> int:
    db = _config(data_dir).db_path
    if not db.exists():
        return 0
    with closing(sqlite3.connect(db)) as conn:
        try:
            return int(conn.execute("SELECT count(*) FROM episodes").fetchone()[0])
        except sqlite3.OperationalError:  # killed before the tables were made
            return 0
