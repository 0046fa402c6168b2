"""An embedded index belongs to one process at a time. The claim is an advisory lock on a
file beside the index, taken before anything of the index is opened: a process that is
refused has opened nothing (opening a Qdrant Edge shard touches its files before the
engine's own lock says no, and that left the owner's flushes failing)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from nexusai.errors import NexusError


class VectorIndexBusy(NexusError):
    status_code = 409


class OwnerLock:
    """Held from `claim` to `release`; the system drops it if the process dies."""

    def __init__(self, index: Path) -> None:
        # A dot name: the index's siblings named `episodes.*` are its leftovers.
        self.path = index.with_name(f".{index.name}.lock")
        self._fd: int | None = None

    def claim(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise VectorIndexBusy(
                f"the vector index in {self.path.parent / self.path.name[1:-5]} is open in"
                " another process (a running `nexus serve`?); only one process may use it"
                " at a time: stop it first, or send the work to it over HTTP (the commands"
                " take --url; `nexus import --url URL FILE`)"
            ) from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
