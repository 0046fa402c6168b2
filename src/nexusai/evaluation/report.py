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
from nexusai.orchestration.settings import read_settings_file

RECOMMENDED = (0.25, 5.0)  # see the README: keyword ranks, semantic breaks near-ties


def configured_weights(config: Config) -> tuple[float, float]:
    """The weights the store at NEXUS_DATA_DIR is set to now (read-only)."""
    current = read_settings_file(config.db_path)
    return (current.semantic_weight, current.keyword_weight)


def run_locomo(
    data: Path,
    ks: Sequence[int],
    conversations: Sequence[str] | None,
    json_out: Path | None,
    plot_out: Path | None,
    depth: int | None = None,
    turns_per_episode: int = 1,
) -> dict[str, Any]:
    # Wide enough for every column: a narrow terminal wraps lines, it never elides numbers.
    console = Console(width=max(Console().width, 120))
    config = Config.from_env()
    embedder = create_embedder(config)
    configured = configured_weights(config)
    count = len(conversations) if conversations else 10
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("importing and asking", total=count)
        result = evaluate(
            data,
            embedder,
            ks,
            conversations,
            [RECOMMENDED, configured],
            lambda _: bar.advance(task),
            depth,
            turns_per_episode,
        )
    result["recommended"] = _pair(RECOMMENDED)
    result["configured"] = _pair(configured)
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


def _pair(weights: tuple[float, float]) -> dict[str, float]:
    return {"semanticWeight": weights[0], "keywordWeight": weights[1]}


def table(result: dict[str, Any], ks: Sequence[int]) -> Table:
    limit = result["semanticLimit"]
    grid = Table(
        title=f"LoCoMo retrieval ({', '.join(result['conversations'])})",
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
