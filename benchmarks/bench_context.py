"""Context assembly at 100,000 episodes: embedding included, LLM excluded.

Sessions are grouped into projects of 5, so a turn's scope is 5 sessions (500 episodes).
Each step is timed inside the same turns, to show where the time goes.
"""

from __future__ import annotations

import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_vectors import SESSIONS, build_store
from benchmarks.common import LATENCY_COLUMNS, Report, sentences
from nexusai.config import Config
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.memory.service import Memory
from nexusai.orchestration.settings import DEFAULTS, RuntimeSettings
from nexusai.orchestration.turn import TurnRequest, run_turn

RUNS = 300


class Timed:
    """Wraps an object and adds the time spent in each of its methods to `spent`."""

    def __init__(self, inner: object, spent: dict[str, float]) -> None:
        self._inner = inner
        self._spent = spent

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return attribute(*args, **kwargs)
            finally:
                self._spent[name] = self._spent.get(name, 0.0) + time.perf_counter() - start

        return timed


STEPS = {
    "embed_one": "embed the message",
    "search_vectors": "vector query",
    "get_episodes": "row fetch (semantic ids)",
    "search_keyword": "FTS query (rows included)",
    "recent_episodes": "recent turns",
    "scope_session_ids": "scope",
    "get_session": "session check",
}


def measure(
    report: Report, memory: Memory, embedder: LocalEmbedder, label: str, settings: RuntimeSettings
) -> None:
    """Turns through run_turn; each step's time is taken inside those same turns."""
    spent: dict[str, float] = {}
    timed_memory: Any = Timed(memory, spent)
    timed_embedder: Any = Timed(embedder, spent)
    rng = random.Random(3)
    turns = [(rng.randint(1, SESSIONS), m) for m in sentences(RUNS + 5, seed=42)]
    for turn in turns[:5]:
        run_turn(memory, embedder, settings, TurnRequest(*turn))
    spent.clear()
    totals = []
    for turn in turns[5:]:
        start = time.perf_counter()
        run_turn(timed_memory, timed_embedder, settings, TurnRequest(*turn))
        totals.append((time.perf_counter() - start) * 1000)
    report.add_latency(f"run_turn, {label}", totals, "100%")
    whole = sum(totals) / 1000
    for name, seconds in spent.items():
        report.add(
            f"  {STEPS.get(name, name)}",
            "",
            "",
            "",
            seconds * 1000 / RUNS,
            f"{seconds / whole:.0%}",
        )
    rest = whole - sum(spent.values())
    report.add("  fusion and the rest", "", "", "", rest * 1000 / RUNS, f"{rest / whole:.0%}")


def run(quick: bool = False) -> None:
    size = 10_000 if quick else 100_000
    embedder = LocalEmbedder()
    base = np.array(embedder.embed(list(sentences(2000, seed=11))), dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        build_store(Path(tmp), embedder, base, size, per_project=5)
        memory = Memory.open(Config.from_env({}, data_dir=Path(tmp), extractor="none"), embedder)
        report = Report(
            f"Context assembly at {size:,} episodes (scope: 5 sessions, 10 recent turns)",
            [*LATENCY_COLUMNS, "share"],
        )
        measure(report, memory, embedder, "default weights (1, 0)", DEFAULTS)
        measure(report, memory, embedder, "fused (1, 1)", replace(DEFAULTS, keyword_weight=1.0))
        recommended = replace(DEFAULTS, fusion="learned", context_budget=1000)
        measure(report, memory, embedder, "learned, contextBudget 1000", recommended)
        memory.close()
    report.notes.append("Target: p95 under 20 ms (embedding included, LLM excluded).")
    report.notes.append("Step rows: mean ms per turn and share of the turn's time.")
    report.print()
