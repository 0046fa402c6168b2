"""`nexus ranker train`: pools from every labelled set given, the cross-validated table
against RRF's weight pairs, then one ranker fitted to everything, written to a file."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from nexusai.config import Config
from nexusai.embedders import Embedder
from nexusai.evaluation.datasets import EvalSet
from nexusai.evaluation.harness import SWEEP
from nexusai.evaluation.learned import (
    DEPTH,
    SHIPPED_RECIPE,
    Pool,
    cross_validated,
    fit,
    pools_of,
    rank_ids,
)
from nexusai.evaluation.metrics import recall_at
from nexusai.evaluation.replay import imported, replayed
from nexusai.evaluation.vectors import eval_embedder
from nexusai.orchestration.settings import DEFAULTS
from nexusai.ranking.model import Ranker, save

KS = (5, 10, 20)
PAIRS = [(1.0, 0.0), (0.0, 1.0), *((1.0, w) for w in SWEEP[1:]), (0.25, 1.0), (0.5, 1.0)]


@dataclass
class Collected:
    name: str
    pools: list[Pool]


def train(sets: Sequence[EvalSet], out: Path, depth: int = DEPTH) -> Ranker:
    console = Console(width=max(Console().width, 110))
    embedder = eval_embedder(Config.from_env())
    collected = collect(console, sets, depth, embedder)
    everything = [p for c in collected for p in c.pools]
    table = _cross_validated_table(console, collected, depth)
    trained_on = {
        "embedder": embedder.name,  # its cosines are features: a turn says when they differ
        "datasets": {c.name: _counts(c.pools) for c in collected},
        "trainedAt": datetime.date.today().isoformat(),
        **SHIPPED_RECIPE.described(),
        "crossValidated": table,
    }
    ranker = fit(everything, depth, trained_on)
    save(ranker, out)
    console.print(
        f"Wrote {out} ({len(ranker.trees)} trees). Use it: NEXUS_RANKER={out} nexus"
        ' serve, then PATCH /settings {"fusion": "learned"}'
    )
    return ranker


def _counts(pools: Sequence[Pool]) -> dict[str, int]:
    return {"conversations": len({p.fold for p in pools}), "questions": len(pools)}


def collect(
    console: Console, sets: Sequence[EvalSet], depth: int, embedder: Embedder
) -> list[Collected]:
    collected = []
    with Progress(console=console) as bar:
        for evalset in sets:
            task = bar.add_task(
                f"{evalset.name}: importing and asking", total=len(evalset.conversations)
            )
            pools: list[Pool] = []
            for item in evalset.conversations:
                with imported(item, embedder) as chat:
                    pools += pools_of(chat, evalset.name, item.conversation.key, embedder, depth)
                bar.advance(task)
            collected.append(Collected(evalset.name, pools))
    return collected


def _cross_validated_table(
    console: Console, collected: Sequence[Collected], depth: int
) -> dict[str, Any]:
    """Per set: RRF's pairs on the same lists, and the learned mode left-one-conversation
    out (over every set, within the set alone, and trained only on the other sets)."""
    everything = [p for c in collected for p in c.pools]
    with Progress(console=console, transient=True) as bar:
        conversations = len({p.fold for p in everything})
        task = bar.add_task("cross-validating", total=conversations)
        ranked = cross_validated(everything, depth, KS, lambda _: bar.advance(task))
    figures: dict[str, Any] = {}
    start = 0
    for c in collected:
        mine = [ranked[start + i] for i in range(len(c.pools))]
        start += len(c.pools)
        rows = {f"rrf {s:g},{k:g}": _rrf_recall(c.pools, (s, k)) for s, k in PAIRS}
        rows["learned (cross-validated)"] = _recall(c.pools, mine)
        rows |= _alone_and_across(collected, c, depth)
        figures[c.name] = rows
        console.print(_table(c.name, rows, len(c.pools)))
    return figures


def _alone_and_across(
    collected: Sequence[Collected], held: Collected, depth: int
) -> dict[str, dict[str, float]]:
    """With more than one set: trained on this set alone (cross-validated), and trained on
    the other sets only."""
    if len(collected) < 2:
        return {}
    rows = {}
    if len({p.fold for p in held.pools}) >= 2:
        alone = cross_validated(held.pools, depth, KS)
        rows["learned, this set alone"] = _recall(
            held.pools, [alone[i] for i in range(len(held.pools))]
        )
    others = [p for c in collected if c is not held for p in c.pools]
    ranker = fit(others, depth, {})
    across = [{k: rank_ids(ranker, p, k) for k in KS} for p in held.pools]
    rows["learned, other sets only"] = _recall(held.pools, across)
    return rows


def _rrf_recall(pools: Sequence[Pool], weights: tuple[float, float]) -> dict[str, float]:
    """recall@k of a turn at semanticLimit k (the semantic leg's k, the keyword leg's 2k)."""
    out = {}
    pair = replace(DEFAULTS, semantic_weight=weights[0], keyword_weight=weights[1])
    for k in KS:
        total = 0.0
        for p in pools:
            turn = replayed(p.read.at(k), replace(pair, semantic_limit=k))
            total += recall_at([f.episode.id for f in turn.memories], p.question.evidence, k)
        out[str(k)] = total / max(len(pools), 1)
    return out


def _recall(pools: Sequence[Pool], ranked: Sequence[dict[int, list[int]]]) -> dict[str, float]:
    """recall@k of the turns at semanticLimit k."""
    pairs = list(zip(pools, ranked, strict=True))
    return {
        str(k): sum(recall_at(r[k], p.question.evidence, k) for p, r in pairs) / max(len(pools), 1)
        for k in KS
    }


def _table(name: str, rows: dict[str, dict[str, float]], questions: int) -> Table:
    grid = Table(
        title=f"{name}: recall@k, {questions} questions", caption="cross-validated by conversation"
    )
    grid.add_column("fusion")
    for k in KS:
        grid.add_column(f"R@{k}", justify="right")
    for label, recall in rows.items():
        grid.add_row(label, *(f"{recall[str(k)]:.3f}" for k in KS))
    return grid
