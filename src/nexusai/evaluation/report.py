"""`nexus eval locomo`: run the evaluation, print the table, write JSON and the plot."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from nexusai.config import Config
from nexusai.embedders import create_embedder
from nexusai.evaluation.locomo import evaluate, plot

RECOMMENDED = (1.0, 3.0)  # see the README: keyword-leaning, semantic as a tie-breaker


def run_locomo(
    data: Path,
    ks: Sequence[int],
    conversations: Sequence[str] | None,
    json_out: Path | None,
    plot_out: Path | None,
    depth: int | None = None,
) -> dict[str, Any]:
    # Wide enough for every column: a narrow terminal wraps lines, it never elides numbers.
    console = Console(width=max(Console().width, 120))
    embedder = create_embedder(Config.from_env())
    count = len(conversations) if conversations else 10
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("importing and asking", total=count)
        result = evaluate(
            data, embedder, ks, conversations, RECOMMENDED, lambda _: bar.advance(task), depth
        )
    console.print(table(result, ks))
    console.print(
        f"{result['questions']} questions; {result['droppedEvidenceRefs']} evidence refs "
        "resolved to no turn and were dropped"
    )
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))
    if plot_out:
        plot(result, plot_out)
    return result


def table(result: dict[str, Any], ks: Sequence[int]) -> Table:
    limit = result["semanticLimit"]
    grid = Table(
        title=f"LoCoMo retrieval ({', '.join(result['conversations'])})",
        caption=f"R@k, H@k: a turn at semanticLimit {limit}; MRR and latency: the deepest turn",
    )
    for column in ["semantic", "keyword", *(f"R@{k}" for k in ks), *(f"H@{k}" for k in ks)]:
        grid.add_column(column, justify="right")
    for column in ["MRR", "p50 ms", "p95 ms"]:
        grid.add_column(column, justify="right")
    for row in result["results"]:
        cells = [f"{row['semanticWeight']:g}", f"{row['keywordWeight']:g}"]
        cells += [f"{row['recall'][str(k)]:.3f}" for k in ks]
        cells += [f"{row['hit'][str(k)]:.3f}" for k in ks]
        cells += [
            f"{row['mrr']:.3f}",
            f"{row['latencyMs']['p50']:.1f}",
            f"{row['latencyMs']['p95']:.1f}",
        ]
        grid.add_row(*cells)
    return grid
