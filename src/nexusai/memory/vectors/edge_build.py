"""Building Qdrant Edge's HNSW graph in another process, behind a serving index.

Qdrant Edge holds the GIL while its optimizer builds a graph (minutes at 100,000 vectors),
so a build inside the service would stall every request. Instead the service copies its
shard (after a flush, under its write lock) and a child process, at the lowest CPU
priority, opens the copy and builds the graph there; the service keeps serving from its
own shard and journals what it writes meanwhile. When the child is done the service opens
the built copy, replays the journal onto it and swaps it in (`EdgeVectorIndex`'s side).

This module is the parent's handle on the child and what the child does to its process;
the child itself is `edge_child`, so that this module imports no engine.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

log = logging.getLogger("nexusai.vectors")

# How often a waiting parent looks whether it was told to give up.
POLL_SECONDS = 0.5
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def run_build(copy: Path, dimension: int, layout: str, cancelled: threading.Event) -> bool:
    """Builds the graph of the shard copied to `copy`, in `layout`, in a child process;
    True once built, False if it failed or `cancelled` was set (the child is stopped)."""
    with tempfile.TemporaryFile() as errors:  # a pipe could fill and stall the child
        with subprocess.Popen(
            [
                sys.executable,
                "-m",
                "nexusai.memory.vectors.edge_child",
                str(copy),
                str(dimension),
                layout,
                str(os.getpid()),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        ) as child:
            if not _waited(child, cancelled):
                return False
        if child.returncode == 0:
            return True
        errors.seek(0)
        said = errors.read().decode(errors="replace").strip().splitlines() or [""]
        log.warning(
            "building the vector index's graph failed (exit %s): %s",
            child.returncode,
            said[-1][:200],
        )
        return False


def _waited(child: subprocess.Popen[bytes], cancelled: threading.Event) -> bool:
    """Until the child ends (True) or `cancelled` is set (False, the child killed)."""
    while True:
        try:
            child.wait(POLL_SECONDS)
            return True
        except subprocess.TimeoutExpired:
            if cancelled.is_set():
                child.kill()
                child.wait()
                return False


def dies_with_parent(parent: int) -> bool:
    """A service killed mid-build takes its child along (Linux), rather than leaving it to
    build, for minutes, a copy the next start deletes. False if the parent is gone."""
    with contextlib.suppress(AttributeError, OSError, TypeError):  # elsewhere: no matter
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    return os.getppid() == parent


def run_on_idle_cpu() -> None:
    """The service's requests come first on every core: Linux's idle class runs the child
    only on time nobody else wants (nice 19 alone still took slices from the turns)."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)
