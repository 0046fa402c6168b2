"""LangGraph's store: `NexusStore.get` and an update-`put` of one key in a namespace of 10
items and of 1,000 (or `NEXUS_LANGGRAPH_SIZES`), against `nexus serve` in a process of its
own. A get is one indexed read of the item's key label, so its time should not grow with
the namespace: the target is the get at the largest size within 2x its time at 10.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.common import LATENCY_COLUMNS, Report, served, sizes, time_ms
from nexusai.evaluation.metrics import percentile
from nexusai.integrations.langgraph import NexusStore

RUNS = 200


def run(quick: bool = False) -> None:
    counts = sizes(quick, "NEXUS_LANGGRAPH_SIZES", "10,1000")
    report = Report("LangGraph's store: get and update-put by key", [*LATENCY_COLUMNS])
    gets: dict[int, float] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        served(Path(tmp) / "data", NEXUS_EXTRACTOR="none") as (http, _),
        NexusStore(base_url=str(http.base_url)) as store,
    ):
        for count in counts:
            got, put = _timed(store, count, RUNS // (2 if quick else 1))
            report.add_latency(f"get, {count:,} items", got)
            report.add_latency(f"update-put, {count:,} items", put)
            gets[count] = percentile(got, 50)
    smallest, largest = min(gets), max(gets)
    report.notes.append(
        f"get p50 at {largest:,} items / at {smallest:,}: {gets[largest] / gets[smallest]:.2f}"
        " (target: at most 2)"
    )
    report.print()


def _timed(store: NexusStore, count: int, runs: int) -> tuple[list[float], list[float]]:
    """A namespace of `count` items, then the times of a get and an update-put of one."""
    namespace = ("bench", f"items{count}")
    for i in range(count):
        store.put(namespace, f"k{i}", {"content": f"fact {i}", "i": i})
    key = f"k{count // 2}"
    got = time_ms(lambda: store.get(namespace, key), runs)
    put = time_ms(lambda: store.put(namespace, key, {"content": "changed"}), runs // 4)
    return got, put
