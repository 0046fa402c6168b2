"""What a serving memory does behind its requests, each in a thread of its own that
`Memory.start` starts and `Memory.stop` ends: vectors for episodes left without them, the
vector indexes' upkeep, and entity extraction (`Memory.extract_behind`)."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from nexusai.embedders import Embedder
from nexusai.errors import first_line

log = logging.getLogger("nexusai.memory")

REPAIR_RETRY_SECONDS = 5.0
TEND_SECONDS = 30.0


class Memory(Protocol):
    """What these loops ask of the memory service (`memory.service.Memory`), so that this
    module need not import it."""

    stopping: threading.Event
    vectors_due: threading.Event
    forgetting: Forgetting
    embedder: Embedder

    def tend_vectors(self) -> None: ...

    def sync_pending(
        self,
        max_batches: int | None = None,
        *,
        limit: int | None = None,
        embedder: Embedder | None = None,
    ) -> int: ...

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


class Forgetting:
    """The forgets under way. The vectors they leave waiting (the turns after forgotten
    ones) are made once none runs, so that a forget's chunks and the turns beside it have
    the cores to themselves; those episodes keep their old vectors meanwhile and are found
    as before. Measured beside a forget of 10,000 at 100,000 episodes: see
    docs/benchmarks.md."""

    def __init__(self) -> None:
        self._running = 0
        self._waiting = 0
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def under_way(self) -> Iterator[None]:
        """A forget runs while this is held."""
        with self._changed:
            self._running += 1
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                self._changed.notify_all()

    def wait_out(self, stopping: threading.Event) -> None:
        """Returns once no forget runs, or the memory is stopping."""
        with self._changed:
            self._waiting += 1
            try:
                while self._running and not stopping.is_set():
                    self._changed.wait(0.5)
            finally:
                self._waiting -= 1

    def waiting(self) -> int:
        """How many threads wait in `wait_out` for the forgets to end (the background's
        indexing, held back)."""
        with self._changed:
            return self._waiting


BEHIND_BATCH = 32  # episodes a batch behind the requests: a turn's query waits for less
# The share of the time it embeds: the embedder's threads are the process's (a nice
# thread does not make them nice), so it rests as long as a batch took after each, and
# the turns and writes beside it keep a core.
BEHIND_SHARE = 0.5


def index_behind(memory: Memory) -> None:
    """Vectors for the episodes writes left waiting (the turns after a forget's deletes,
    each indexed with its new neighbour), in small batches, resting between them,
    whenever a write says some wait, until none do; never while a forget runs."""
    yield_the_cpu()
    behind = memory.embedder.behind()
    while not memory.stopping.is_set():
        memory.vectors_due.wait()
        memory.vectors_due.clear()
        try:
            while not memory.stopping.is_set():
                memory.forgetting.wait_out(memory.stopping)
                started = time.monotonic()
                done = memory.sync_pending(1, limit=BEHIND_BATCH, embedder=behind)
                if done < BEHIND_BATCH:
                    break
                rest = (time.monotonic() - started) * (1 / BEHIND_SHARE - 1)
                memory.stopping.wait(rest)
        except Exception as exc:  # they stay pending: the next write or start tries again
            log.warning("indexing the episodes waiting for vectors failed: %s", first_line(exc))


def yield_the_cpu() -> None:
    """Work behind the writes should take the cores the writes leave: this thread runs at
    nice 10 (Linux sets niceness per thread), so the embedder's threads come first."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux or not allowed: as it is
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)


def take_idle_time() -> None:
    """Work that nobody waits for (entity extraction) takes only the time nobody else
    wants: Linux's idle class, for this thread alone. At nice 10 spaCy still took slices
    from the turns: beside it their p95 was 1.45-1.56 times the quiet one, 1.23-1.39 in
    the idle class, and the extraction took about 1.5 times as long (docs/benchmarks.md).
    Where the class cannot be set, nice 10."""
    try:
        os.sched_setscheduler(threading.get_native_id(), os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        yield_the_cpu()
