"""`nexus ranker select`: how a ranker is fitted (its parameters, the features it may
split on), chosen by the figure that matters out of fold. Each recipe is fitted
leave-one-conversation-out over every set given, and each held-out question is asked
as a budgeted learned turn is, by the ranker that never saw its conversation, then
packed at each budget. A recipe that wins only on the set that has the most questions is
not a win: the table is per set, with the mean over sets (each weighed alike) and the
worst set's mean."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from nexusai.config import Config
from nexusai.evaluation.budgets import Packed, within_budget
from nexusai.evaluation.datasets import EvalSet
from nexusai.evaluation.learned import (
    DEPTH,
    LEARNED,
    PARAMS,
    ROUNDS,
    Pool,
    Recipe,
    held_out_rankers,
)
from nexusai.evaluation.replay import budgeted
from nexusai.evaluation.training import collect
from nexusai.evaluation.vectors import eval_embedder
from nexusai.orchestration.modes import Learned
from nexusai.ranking.features import FEATURES

SELECTION_BUDGETS = (500, 1000, 2000)  # the budgets a recommended turn is judged at
Figures = dict[str, dict[str, dict[str, float]]]  # candidate -> set -> budget -> recall


@dataclass(frozen=True)
class Candidate:
    name: str
    recipe: Recipe


def candidate(
    name: str,
    unused: Sequence[str] = (),
    rounds: int = ROUNDS,
    **params: Any,
) -> Candidate:
    """A way of fitting: the shipped parameters with `params` changed, `rounds` trees, and
    the `unused` features left out."""
    unknown = [f for f in unused if f not in FEATURES]
    if unknown:
        raise ValueError(f"no such features: {unknown}")
    return Candidate(name, Recipe({**PARAMS, **params}, rounds, tuple(unused)))


# Features whose values depend on how one set was written rather than on what a question
# wants: message lengths, the question's wording, which kind of chat it is, raw scores
# whose scale moves with the size of the store, and ids stored one after another.
LENGTHS = ("candidate_length", "query_words")
CHAT_KIND = ("assistant_chat",)
RAW_SCORES = ("bm25", "cosine")
ID_SPACING = ("adjacent_best_rrf",)
CANDIDATES = (
    candidate("shipped"),
    candidate("without lengths", LENGTHS),
    candidate("without the chat's kind", CHAT_KIND),
    candidate("without raw scores", RAW_SCORES),
    candidate("without id spacing", ID_SPACING),
    candidate("without id spacing or the chat's kind", ID_SPACING + CHAT_KIND),
    candidate("stronger regularisation", num_leaves=7, min_data_in_leaf=200, lambda_l2=10.0),
    candidate("fewer rounds", rounds=100),
    candidate("more rounds", rounds=400),
    candidate("larger trees", num_leaves=31, max_depth=8, min_data_in_leaf=20),
)


def out_of_fold(
    pools: Sequence[Pool],
    recipe: Recipe,
    budgets: Sequence[int] = SELECTION_BUDGETS,
    progress: Callable[[], None] | None = None,
) -> dict[str, dict[str, float]]:
    """{set: {budget: recall}}: every question packed from the budgeted learned turn of
    the ranker fitted, by `recipe`, to every other conversation."""
    packed: dict[str, Packed] = {}
    held: dict[str, list[Pool]] = {}
    for _, ranker, indexes in held_out_rankers(pools, DEPTH, recipe):
        for pool in (pools[i] for i in indexes):
            fused = budgeted(pool.read, LEARNED, ranker)
            question = pool.question  # its turn carries the standing ones its read found
            packed.setdefault(pool.dataset, Packed(Learned.packer)).add(
                pool.fold,
                question.text,
                fused,
                tuple(pool.read.gathered.standing_candidates),
                question.evidence,
                question.answer,
            )
            held.setdefault(pool.dataset, []).append(pool)
        if progress:
            progress()
    return {name: _recall(packed[name], held[name], budgets) for name in packed}


def _recall(packed: Packed, pools: Sequence[Pool], budgets: Sequence[int]) -> dict[str, float]:
    evidence = [p.question.evidence for p in pools]
    categories = [p.question.category for p in pools]
    row = within_budget(packed.packer, packed.given(budgets=budgets), evidence, categories)
    recall: dict[str, float] = row[packed.packer]["recall"]
    return recall


def compared(
    pools: Sequence[Pool],
    candidates: Sequence[Candidate] = CANDIDATES,
    progress: Callable[[], None] | None = None,
) -> Figures:
    """{candidate: {set: {budget: recall}}}, every candidate out of fold on `pools`."""
    return {c.name: out_of_fold(pools, c.recipe, progress=progress) for c in candidates}


def select(sets: Sequence[EvalSet], candidates: Sequence[Candidate] = CANDIDATES) -> Figures:
    """`nexus ranker select`: every candidate out of fold on the sets' questions, a table."""
    console = Console(width=max(Console().width, 110))
    pools = [
        p for c in collect(console, sets, DEPTH, eval_embedder(Config.from_env())) for p in c.pools
    ]
    folds = len({p.fold for p in pools})
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("fitting out of fold", total=folds * len(candidates))
        figures = compared(pools, candidates, lambda: bar.advance(task))
    console.print(table(figures))
    return figures


def table(figures: Figures) -> Table:
    """A row per candidate: recall within each budget per set, and its worst set's mean."""
    first = next(iter(figures.values()))
    grid = Table(title="recall within each budget, out of fold", caption="each set weighed alike")
    grid.add_column("fitted")
    for name, budgets in first.items():
        for budget in budgets:
            grid.add_column(f"{name} {budget}", justify="right")
    grid.add_column("mean, sets alike", justify="right")
    grid.add_column("worst set", justify="right")
    for label, sets in figures.items():
        cells = [f"{r:.3f}" for budgets in sets.values() for r in budgets.values()]
        means = set_means(sets)
        grid.add_row(label, *cells, f"{sum(means) / len(means):.3f}", f"{min(means):.3f}")
    return grid


def set_means(sets: Mapping[str, Mapping[str, float]]) -> list[float]:
    """Each set's mean recall over the budgets."""
    return [sum(b.values()) / len(b) for b in sets.values()]
