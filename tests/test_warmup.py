"""The start's reading ahead: `/ready` waits for it, for at most its seconds."""

from __future__ import annotations

import threading
import time

from nexusai.warmup import KeepOn, Warmup


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
