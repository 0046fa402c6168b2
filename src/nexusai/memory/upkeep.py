"""Keeping a store whole: `nexus doctor` (find and repair drift between SQLite, FTS5 and the
vector index) and `nexus backup` / `nexus restore`.

A backup is the SQLite file alone, taken with SQLite's online backup API, which gives a
consistent copy while the service keeps writing. Vectors are derived data: a restore
rebuilds them from SQLite with the configured embedder.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from nexusai.config import Config
from nexusai.errors import Conflict, InvalidInput
from nexusai.files import private_dir, private_file
from nexusai.memory.repositories.derived import VectorState
from nexusai.memory.service import Memory, Progress
from nexusai.memory.sqlite.store import readable_store


@dataclass
class Checkup:
    fts_ok: bool = True
    pending_vectors: int = 0
    vectors_without_rows: list[int] = field(default_factory=list)
    rows_without_vectors: list[int] = field(default_factory=list)
    pending_entities: int = 0

    @property
    def healthy(self) -> bool:
        return (
            self.fts_ok
            and not self.pending_vectors
            and not self.vectors_without_rows
            and not self.rows_without_vectors
        )

    def lines(self) -> list[str]:
        return [
            f"keyword index agrees with the episodes table: {'yes' if self.fts_ok else 'NO'}",
            f"episodes waiting for a vector: {self.pending_vectors}",
            f"vectors whose episode is gone: {len(self.vectors_without_rows)}",
            f"episodes marked indexed but missing from the vector index: "
            f"{len(self.rows_without_vectors)}",
            f"episodes waiting for entity extraction: {self.pending_entities}",
        ]


def check(memory: Memory) -> Checkup:
    derived = memory.store.derived
    indexed = derived.indexed()
    every = set(memory.store.episodes.ids())
    points = memory.vectors.ids()
    return Checkup(
        fts_ok=memory.store.keywords.ok(),
        pending_vectors=derived.count_vectors(VectorState.PENDING),
        vectors_without_rows=sorted(points - every),
        rows_without_vectors=sorted(indexed - points),
        pending_entities=derived.count_pending_extraction(),
    )


def repair(memory: Memory, found: Checkup, progress: Progress | None = None) -> None:
    if not found.fts_ok:
        memory.store.keywords.rebuild()
    memory.vectors.delete(found.vectors_without_rows)
    memory.store.derived.set_vectors(found.rows_without_vectors, VectorState.PENDING)
    memory.sync_pending(progress=progress)
    memory.entities.sync()


def backup(config: Config, destination: Path) -> int:
    """A consistent copy of the SQLite store, taken while the service may be writing.
    Returns its size in bytes."""
    _sqlite_only(config, "backup")
    if destination.exists():
        raise Conflict(f"{destination} exists already; choose a new file")
    if not config.db_path.exists():
        raise InvalidInput(f"there is no store at {config.db_path}")
    destination.parent.mkdir(parents=True, exist_ok=True)
    private_file(destination)
    source = sqlite3.connect(f"file:{config.db_path}?mode=ro", uri=True)
    target = sqlite3.connect(destination)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    return destination.stat().st_size


def restore(config: Config, source: Path, progress: Progress | None = None) -> int:
    """Puts a backup in place of an empty data directory and rebuilds the vectors from it.
    Returns how many episodes it holds."""
    _sqlite_only(config, "restore")
    if config.db_path.exists():
        raise Conflict(
            f"{config.db_path} exists; restore into an empty data directory (NEXUS_DATA_DIR)"
        )
    check_backup(source)
    private_dir(config.data_dir)
    _put_in_place(source, config.db_path)
    shutil.rmtree(config.vectors_path, ignore_errors=True)
    memory = Memory.open(config, check=False, reconcile=False)  # rebuilt here, in front
    try:
        memory.reindex(progress)
        return memory.store.episodes.count()
    finally:
        memory.close()


def _sqlite_only(config: Config, command: str) -> None:
    if config.database_url:
        raise InvalidInput(
            f"`nexus {command}` is for the SQLite store; NEXUS_DATABASE_URL points at"
            f" PostgreSQL, whose own tools do this (pg_dump, pg_restore)"
        )


def _put_in_place(source: Path, target: Path) -> None:
    """The copy appears whole or not at all: written beside the target, flushed to disk,
    then renamed over it. A restore killed midway leaves no half-copied store to start on
    (the next restore clears its leftover)."""
    partial = target.with_name(target.name + ".restoring")
    for stale in (
        partial,
        target.with_name(target.name + "-wal"),
        target.with_name(target.name + "-shm"),
        target.with_name(target.name + ".keywords.npz"),  # another store's keyword copy
    ):
        stale.unlink(missing_ok=True)  # pieces of no store: the target does not exist
    private_file(partial)
    shutil.copyfile(source, partial)  # into the file made for its owner: its mode stays
    with partial.open("rb") as written:
        os.fsync(written.fileno())
    os.replace(partial, target)


def check_backup(source: Path) -> None:
    if not readable_store(source):
        raise InvalidInput(f"{source} is not a readable nexusai backup")
