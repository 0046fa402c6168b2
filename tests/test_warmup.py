"""The start's reading ahead: `/ready` waits for it, for at most its seconds."""

from __future__ import annotations

import gc
import threading
import time
import weakref

from nexusai.warmup import KeepOn, Warmup, long_lived


def test_it_is_warming_while_work_reads_ahead_and_not_after() -> None:
    release, steps = threading.Event(), []

    def work(keep_on: KeepOn) -> None:
        while keep_on() and not release.is_set():
            steps.append(1)
            time.sleep(0.01)

    warmup = Warmup(60)
    warmup.run("a test's words", work)
    assert warmup.warming()
    release.set()
    deadline = time.monotonic() + 10
    while warmup.warming():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert steps


def test_its_seconds_spent_it_is_ready_and_the_work_is_told_to_end() -> None:
    told = threading.Event()

    def work(keep_on: KeepOn) -> None:
        while keep_on():
            time.sleep(0.01)
        told.set()

    warmup = Warmup(0.2)
    warmup.run("a test's words", work)
    assert told.wait(10)
    assert not warmup.warming()


def test_stopping_ends_the_work_and_waits_for_it() -> None:
    ended = threading.Event()

    def work(keep_on: KeepOn) -> None:
        while keep_on():
            time.sleep(0.01)
        ended.set()

    warmup = Warmup(3600)
    warmup.run("a test's words", work)
    warmup.stop()
    assert ended.is_set()
    assert not warmup.warming()


def test_work_that_fails_leaves_it_ready() -> None:
    def work(keep_on: KeepOn) -> None:
        raise RuntimeError("the index vanished")

    warmup = Warmup(60)
    warmup.run("a test's words", work)
    warmup.stop()
    assert not warmup.warming()


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_what_a_start_loads_is_frozen_and_its_garbage_collected_first() -> None:
    frozen_before = gc.get_freeze_count()
    try:
        with long_lived():
            assert not gc.isenabled()  # loading is not interrupted by collections
            kept = [_Node() for _ in range(1000)]
            cycle = _Node()
            cycle.other = _Node()
            cycle.other.other = cycle
            dropped = weakref.ref(cycle)
            del cycle
        assert gc.isenabled()
        assert dropped() is None  # the cycle made while loading was collected, not frozen
        assert gc.get_freeze_count() >= frozen_before + len(kept)
    finally:
        gc.unfreeze()


def test_a_collector_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with long_lived():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()
