"""What a start reads ahead of the first turns (the keyword index's copy, the standing
memories' vectors), each in a thread of its own, for at most NEXUS_WARM_SECONDS: `/ready`
answers 503 meanwhile, and turns are served as ever. And what a start loads, kept out of
the garbage collector's way (`long_lived`)."""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

KeepOn = Callable[[], bool]  # whether the work may go on (checked between its steps)


class Warmup:
    def __init__(self, seconds: float) -> None:
        self._until = time.monotonic() + seconds
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def run(self, name: str, work: Callable[[KeepOn], None]) -> None:
        """Starts `work`, which reads ahead while the `KeepOn` it is given says so."""
        thread = threading.Thread(target=self._run, args=(name, work), daemon=True)
        self._threads.append(thread)
        thread.start()

    def keep_on(self) -> bool:
        return not self._stop.is_set() and time.monotonic() < self._until

    def warming(self) -> bool:
        """Whether some of it is still being read (and its time is not spent)."""
        return self.keep_on() and any(thread.is_alive() for thread in self._threads)

    def stop(self) -> None:
        """The service is stopping: the work ends at its next step, and is waited for."""
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _run(self, name: str, work: Callable[[KeepOn], None]) -> None:
        started = time.monotonic()
        try:
            work(self.keep_on)
        except Exception as exc:  # the turns read what they need themselves
            log.warning("reading %s ahead of the turns failed: %s", name, exc)
            return
        log.info("read %s ahead of the turns in %.1f s", name, time.monotonic() - started)


@contextmanager
def long_lived() -> Iterator[None]:
    """What is made inside lives as long as the process (the model, spaCy's pipeline, the
    app): the collector waits until it is made, then never scans it again. A full
    collection walks every object tracked and holds the GIL throughout: with spaCy loaded,
    150-200 ms, and whatever turn was running waited that long (the first ones after
    `/ready` were caught by one in four starts of six). Garbage made inside is
    collected once, before the rest is frozen."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
        if was_enabled:
            gc.enable()
