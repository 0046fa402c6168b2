"""What leaving words out of the keyword query costs in recall where it would pay: a
question's own conversation inside a project of about 100,000 episodes.

Every LoCoMo and BEAM conversation (read from ../shared/data, never copied) is stored once,
then their sessions are stored again, round and round, until the store holds
NEXUS_SCALE_EPISODES (default 100,000). A question is searched in its own conversation's
sessions plus every copy of the *other* conversations (a copy of its own would hold its
evidence twice). Its evidence is the first copy. The keyword leg alone, 100 deep, at each
`keywordBudget`: recall@10/20/50/100 per set, and the query's p50 / p95 in ms.
"""

from __future__ import annotations

import itertools
import os
import random
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import Report
from nexusai.evaluation.datasets import EvalSet, load_beam, load_locomo
from nexusai.evaluation.metrics import percentile
from nexusai.memory.sqlite.store import SqliteStore

DATA = Path(__file__).parents[2] / "shared" / "data"
BUDGETS = (0, 2_000, 5_000, 10_000)
CUTOFFS = (10, 20, 50, 100)
QUESTIONS_PER_SET = 200


@dataclass
class ScaleStore:
    """Which sessions hold each conversation's first copy, which hold copies of it, and the
    episode id of each of its messages' first copy."""

    own: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    copies: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    ids: dict[tuple[int, str], int] = field(default_factory=dict)

    def scope(self, conversation: int) -> list[int]:
        others = (s for c, ss in self.copies.items() if c != conversation for s in ss)
        return [*self.own[conversation], *others]


def run(quick: bool = False) -> None:
    if not (DATA / "locomo" / "locomo10.json").exists():
        print(f"the development sets are not at {DATA}")
        return
    size = 20_000 if quick else int(os.environ.get("NEXUS_SCALE_EPISODES", "100000"))
    sets = [load_locomo(DATA / "locomo" / "locomo10.json"), load_beam(DATA / "beam")]
    report = Report(
        f"The keyword leg alone in a project of {size:,} episodes: recall@10/20/50/100, p50 / p95",
        ["keywordBudget", *(s.name for s in sets), "p50 / p95 ms"],
    )
    with tempfile.TemporaryDirectory() as tmp, SqliteStore(Path(tmp) / "s.db") as store:
        layout = _fill(store, sets, size)
        asked = _questions(sets, layout)
        for budget in BUDGETS:
            recalls, spent = _ask(store, layout, asked, budget)
            cells = [_recall_cell(recalls[s.name]) for s in sets]
            report.add(budget or "0 (the spec's query)", *cells, _latency_cell(spent))
    report.notes.append("The words a budget leaves out first are often what a question asks")
    report.notes.append("about (a speaker's name, a chat's topic): see docs/evaluation.md.")
    report.print()


def _fill(store: SqliteStore, sets: Sequence[EvalSet], size: int) -> ScaleStore:
    layout, stored = ScaleStore(), 0
    sessions = [
        (number, session)
        for number, conversation in enumerate(c for s in sets for c in s.conversations)
        for session in conversation.conversation.sessions
    ]
    project = store.projects.create("everything").id
    for number, session in sessions:
        sid = store.sessions.create(project).id
        added = store.episodes.add(sid, [source.episode for source in session.episodes])
        layout.own[number].append(sid)
        for source, episode in zip(session.episodes, added, strict=True):
            layout.ids[(number, source.key)] = episode.id
        stored += len(added)
    for number, session in itertools.cycle(sessions):
        if stored >= size:
            break
        sid = store.sessions.create(project).id
        stored += len(store.episodes.add(sid, [source.episode for source in session.episodes]))
        layout.copies[number].append(sid)
    return layout


# (set name, conversation number, question text, evidence ids)
Asked = tuple[str, int, str, set[int]]


def _questions(sets: Sequence[EvalSet], layout: ScaleStore) -> list[Asked]:
    rng, asked, number = random.Random(1), [], 0
    for evalset in sets:
        found = []
        for conversation in evalset.conversations:
            for question in conversation.questions:
                evidence = {
                    layout.ids[(number, k)] for k in question.evidence if (number, k) in layout.ids
                }
                if evidence:
                    found.append((evalset.name, number, question.text, evidence))
            number += 1
        asked += rng.sample(found, min(QUESTIONS_PER_SET, len(found)))
    return asked


def _ask(
    store: SqliteStore, layout: ScaleStore, asked: list[Asked], budget: int
) -> tuple[dict[str, list[list[float]]], list[float]]:
    recalls: dict[str, list[list[float]]] = defaultdict(list)
    spent: list[float] = []
    scopes = {number: layout.scope(number) for number in layout.own}
    for name, number, text, evidence in asked:
        started = time.perf_counter()
        found = [e.id for e in store.keywords.search(text, max(CUTOFFS), scopes[number], budget)]
        spent.append((time.perf_counter() - started) * 1000)
        recalls[name].append([len(evidence & set(found[:k])) / len(evidence) for k in CUTOFFS])
    return recalls, spent


def _recall_cell(rows: list[list[float]]) -> str:
    return " / ".join(f"{sum(r[i] for r in rows) / len(rows):.3f}" for i in range(len(CUTOFFS)))


def _latency_cell(samples: list[float]) -> str:
    return f"{percentile(samples, 50):.1f} / {percentile(samples, 95):.1f}"
