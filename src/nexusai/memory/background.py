"""What a serving memory does behind its requests, each in a thread of its own that
`Memory.start` starts and `Memory.stop` ends: vectors for episodes left without them, the
vector indexes' upkeep, and entity extraction (`Memory.extract_behind`)."""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable
from typing import Protocol

from nexusai.errors import first_line

log = logging.getLogger("nexusai.memory")

REPAIR_RETRY_SECONDS = 5.0
TEND_SECONDS = 30.0


class Memory(Protocol):
    """What these loops ask of the memory service (`memory.service.Memory`), so that this
    module need not import it."""

    stopping: threading.Event

    def tend_vectors(self) -> None: ...

    def sync_pending(self) -> int: ...

    def count_pending_vectors(self) -> int: ...

    def forget_expired(self) -> int: ...


def tend(memory: Memory) -> None:
    """Every half minute: expired episodes are deleted, the vector indexes' buffers go to
    disk, an index with many deleted points or many outside a search graph is optimized
    behind itself (in a child process), and freed memory goes back to the system."""
    while not memory.stopping.wait(TEND_SECONDS):
        try:
            memory.forget_expired()
        except Exception as exc:  # reads already leave them out; the next round tries again
            log.warning("deleting expired episodes failed: %s", first_line(exc))
        try:
            memory.tend_vectors()
        except Exception as exc:  # a vanished index is found and rebuilt at the next start
            log.warning("tending the vector index failed: %s", first_line(exc))
        _release_free_memory()


_MALLOC_TRIM: Callable[[int], int] | None
try:
    _MALLOC_TRIM = ctypes.CDLL(None).malloc_trim  # glibc only (not musl, macOS or Windows)
except (AttributeError, OSError, TypeError):
    _MALLOC_TRIM = None


def _release_free_memory() -> None:
    """glibc keeps what each thread frees in that thread's arena and rarely returns it; a
    server whose request threads come and go (SQLite page caches, buffers) then grows by
    fragments. Trimming costs a few ms and holds the soak's heap flat."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def repair_vectors(memory: Memory) -> None:
    """Until no episode waits for its vector (or the service stops): an embedder that
    fails is tried again a few seconds later, so a rebuild of a lost index always ends."""
    while True:
        indexed = memory.sync_pending()
        if indexed:
            log.info("indexed %d episodes that were waiting for vectors", indexed)
        if memory.count_pending_vectors() == 0 or memory.stopping.wait(REPAIR_RETRY_SECONDS):
            break
