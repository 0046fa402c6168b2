"""`nexus eval`: run the evaluation on one labelled set or several, print a table per set
(and the worst case across them), write JSON and the plot."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from nexusai.config import Config
from nexusai.embedders import Embedder, create_embedder
from nexusai.evaluation.datasets import EvalSet
from nexusai.evaluation.harness import evaluate, plot
from nexusai.orchestration.settings import read_settings_file

RECOMMENDED = (1.0, 1.0)  # see the README: the one pair that holds on both kinds of chat


def configured_weights(config: Config) -> tuple[float, float]:
    """The weights the store at NEXUS_DATA_DIR is set to now (read-only)."""
    current = read_settings_file(config.db_path)
    return (current.semantic_weight, current.keyword_weight)


@dataclass(frozen=True)
class EvalOptions:
    ks: Sequence[int] = (5, 10, 20)
    depth: int | None = None
    turns_per_episode: int = 1
    json_out: Path | None = None
    plot_out: Path | None = None


def run_eval(sets: Sequence[EvalSet], options: EvalOptions) -> dict[str, Any]:
    """Evaluates every set with the configured embedder; prints a table per set and, with
    more than one, the worst case of each weight pair across them."""
    # Wide enough for every column: a narrow terminal wraps lines, it never elides numbers.
    console = Console(width=max(Console().width, 120))
    config = Config.from_env()
    embedder = create_embedder(config)
    configured = configured_weights(config)
    marks = {"recommended": _pair(RECOMMENDED), "configured": _pair(configured)}
    per_set = []
    for evalset in sets:
        result = _with_progress(console, evalset, embedder, options, [RECOMMENDED, configured])
        per_set.append({**result, **marks})
        console.print(table(per_set[-1], options.ks))
        console.print(
            f"{result['questions']} questions; {result['droppedEvidenceRefs']} evidence refs "
            "resolved to no message and were dropped"
        )
        bound = " / ".join(f"{result['legChoiceBound'][str(k)]:.3f}" for k in options.ks)
        console.print(
            f"Each question answered by its better single leg: R@k {bound} (no per-question"
            " choice of leg can do better)"
        )
    combined = {
        "embedder": embedder.name,
        **marks,
        "datasets": per_set,
        "results": [row for result in per_set for row in result["results"]],
        "worst": worst_case(per_set, options.ks),
    }
    if len(per_set) > 1:
        console.print(worst_table(combined, options.ks))
    if options.json_out:
        options.json_out.write_text(json.dumps(combined, indent=2))
    if options.plot_out and per_set:
        plot(per_set[0], options.plot_out)
    return combined


def _with_progress(
    console: Console,
    evalset: EvalSet,
    embedder: Embedder,
    options: EvalOptions,
    extra: Sequence[tuple[float, float]],
) -> dict[str, Any]:
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(
            f"{evalset.name}: importing and asking", total=len(evalset.conversations)
        )
        return evaluate(
            evalset,
            embedder,
            options.ks,
            extra,
            lambda _: bar.advance(task),
            options.depth,
            options.turns_per_episode,
        )


def worst_case(per_set: Sequence[dict[str, Any]], ks: Sequence[int]) -> list[dict[str, Any]]:
    """For each weight pair, the lowest recall@k any dataset gave it."""
    pairs = [_key(row) for row in per_set[0]["results"]] if per_set else []
    worst = []
    for pair in pairs:
        rows = [r for result in per_set for r in result["results"] if _key(r) == pair]
        recall = {str(k): min(r["recall"][str(k)] for r in rows) for k in ks}
        assert pair is not None
        worst.append({**_pair(pair), "recall": recall})
    return worst


def worst_table(combined: dict[str, Any], ks: Sequence[int]) -> Table:
    names = ", ".join(r["dataset"] for r in combined["datasets"])
    grid = Table(title=f"Worst case across {names}", caption="recall@k: the lowest any set gave")
    for column in ["semantic", "keyword", *(f"R@{k}" for k in ks)]:
        grid.add_column(column, justify="right")
    for row in combined["worst"]:
        cells = [f"{row['semanticWeight']:g}", f"{row['keywordWeight']:g}"]
        grid.add_row(*cells, *(f"{row['recall'][str(k)]:.3f}" for k in ks))
    return grid


def _pair(weights: tuple[float, float]) -> dict[str, float]:
    return {"semanticWeight": weights[0], "keywordWeight": weights[1]}


def table(result: dict[str, Any], ks: Sequence[int]) -> Table:
    limit = result["semanticLimit"]
    grid = Table(
        title=f"{result['dataset']} retrieval ({len(result['conversations'])} conversations)",
        caption=f"R@k, H@k: a turn at semanticLimit {limit}; MRR and latency: the deepest"
        " turn; * recommended, + configured now (settings at NEXUS_DATA_DIR)",
    )
    marks = {_key(result.get("recommended")): "*", _key(result.get("configured")): "+"}
    if _key(result.get("recommended")) == _key(result.get("configured")):
        marks[_key(result.get("recommended"))] = "*+"
    for column in ["semantic", "keyword", *(f"R@{k}" for k in ks), *(f"H@{k}" for k in ks)]:
        grid.add_column(column, justify="right")
    for column in ["MRR", "p50 ms", "p95 ms"]:
        grid.add_column(column, justify="right")
    for row in result["results"]:
        mark = marks.get(_key(row), "")
        cells = [f"{row['semanticWeight']:g}{mark}", f"{row['keywordWeight']:g}"]
        cells += [f"{row['recall'][str(k)]:.3f}" for k in ks]
        cells += [f"{row['hit'][str(k)]:.3f}" for k in ks]
        cells += [
            f"{row['mrr']:.3f}",
            f"{row['latencyMs']['p50']:.1f}",
            f"{row['latencyMs']['p95']:.1f}",
        ]
        grid.add_row(*cells)
    return grid


def _key(pair: dict[str, Any] | None) -> tuple[float, float] | None:
    return (pair["semanticWeight"], pair["keywordWeight"]) if pair else None
