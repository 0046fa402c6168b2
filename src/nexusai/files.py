"""Files nexusai writes for its user: created for their owner alone (a store, a backup and
an export hold the user's conversations), and a file put in place whole or not at all."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

OWNER_FILE = 0o600
OWNER_DIR = 0o700


def private_dir(path: Path) -> None:
    """The folder, made for its owner alone when missing (its parents as usual)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=OWNER_DIR)


def private_file(path: Path) -> None:
    """An empty file, made for its owner alone when missing, for a program that creates
    its files with the usual umask (SQLite: its -wal and -shm take the file's mode)."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, OWNER_FILE))


def is_regular_or_missing(path: Path) -> bool:
    """Whether a rename may put a new file where `path` is: a device, a FIFO or a link to
    one (`/dev/null`, `/dev/stdout`) would be replaced by a plain file."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True


@contextlib.contextmanager
def written_whole(out: Path) -> Iterator[IO[str]]:
    """A text stream for `out`. A regular file (or a new one) is written beside itself and
    renamed over at the end, so a failure leaves no half file and the old one stands;
    anything else (a device, a FIFO, `/dev/stdout`) is written in place, never replaced."""
    if not is_regular_or_missing(out):
        with out.open("w", encoding="utf-8") as stream:
            yield stream
        return
    part = out.with_name(out.name + ".part")
    part.unlink(missing_ok=True)
    try:
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, OWNER_FILE)
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            yield stream
        part.replace(out)
    finally:
        part.unlink(missing_ok=True)
