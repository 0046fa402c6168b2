"""`nexus eval`: run the evaluation on one labelled set or several, print a table per set
(and the worst case across them), write JSON and the plot."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from nexusai.config import Config
from nexusai.embedders import Embedder
from nexusai.evaluation.budgets import BUDGETS, SOURCES
from nexusai.evaluation.calibration import standing_floor
from nexusai.evaluation.datasets import EvalSet
from nexusai.evaluation.harness import Also, SetResult, budget_rows, evaluate, plot
from nexusai.evaluation.learned import LearnedEval
from nexusai.evaluation.options import EvalOptions
from nexusai.evaluation.vectors import eval_embedder
from nexusai.orchestration.modes import RRF, Learned
from nexusai.orchestration.packing import PlacedWorth
from nexusai.orchestration.settings import read_settings_file

RECOMMENDED = (1.0, 1.0)  # the one weight pair that holds on both kinds of chat
# What the README recommends: the learned ranker (weights kept at the best pair, for RRF).
RECOMMENDED_SETTINGS = {"fusion": Learned.name, "semanticWeight": 1.0, "keywordWeight": 1.0}


def configured_settings(config: Config) -> dict[str, Any]:
    """The fusion and weights the store at NEXUS_DATA_DIR is set to now (read-only)."""
    current = read_settings_file(config.db_path)
    return {
        "fusion": current.fusion,
        "semanticWeight": current.semantic_weight,
        "keywordWeight": current.keyword_weight,
    }


def _learned(
    console: Console, sets: Sequence[EvalSet], embedder: Embedder, options: EvalOptions
) -> LearnedEval | None:
    """The learned mode's collector, or None (said why) when it cannot be cross-validated."""
    if not options.learned:
        return None
    if len({(s.name, c.conversation.key) for s in sets for c in s.conversations}) < 2:
        console.print("fusion learned: not scored (cross-validation needs two conversations)")
        return None
    if importlib.util.find_spec("lightgbm") is None:
        console.print(
            "fusion learned: not scored (it needs LightGBM: pip install 'nexusai[train]')"
        )
        return None
    if options.depth or options.turns_per_episode != 1:
        console.print("fusion learned: not scored with --depth or --turns-per-episode")
        return None
    return LearnedEval(embedder, base=options.base())


def _cross_validate(
    console: Console, learned: LearnedEval, results: list[SetResult], ks: Sequence[int]
) -> None:
    conversations = len({p.fold for p in learned.pools})
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(
            "fusion learned: one ranker per held-out conversation", total=conversations
        )
        learned.rows(results, ks, lambda _: bar.advance(task))


def run_eval(sets: Sequence[EvalSet], options: EvalOptions) -> dict[str, Any]:
    """Evaluates every set with the configured embedder; prints a table per set and, with
    more than one, the worst case of each weight pair across them."""
    # Wide enough for every column: a narrow terminal wraps lines, it never elides numbers.
    console = Console(width=max(Console().width, 120))
    config = Config.from_env()
    embedder = eval_embedder(config, options.kept_vectors)
    configured = configured_settings(config)
    extra = [RECOMMENDED, (configured["semanticWeight"], configured["keywordWeight"])]
    learned = _learned(console, sets, embedder, options)
    # Only what was scored is recommended: the learned mode when it has rows, else the pair.
    recommended = RECOMMENDED_SETTINGS if learned else {**RECOMMENDED_SETTINGS, "fusion": RRF.name}
    marks = {"recommended": recommended, "configured": configured}
    collect = learned.collect if learned else None
    results = [_with_progress(console, s, embedder, options, extra, collect) for s in sets]
    floors = None
    if learned:
        _cross_validate(console, learned, results, options.ks)
        floors = standing_floor(learned.packed)
    placed = budget_rows(results)
    per_set = []
    for result in results:
        per_set.append({**result.figures, **marks})
        _print_set(console, per_set[-1], options.ks)
    combined = {
        "embedder": embedder.name,
        **marks,
        "datasets": per_set,
        "results": [row for result in per_set for row in result["results"]],
        "worst": worst_case(per_set, options.ks),
    }
    _print_fitted(console, combined, floors, placed)
    if len(per_set) > 1:
        console.print(worst_table(combined, options.ks))
    if options.json_out:
        options.json_out.write_text(json.dumps(combined, indent=2))
    if options.plot_out and per_set:
        plot(per_set[0], options.plot_out)
    return combined


def _print_set(console: Console, result: dict[str, Any], ks: Sequence[int]) -> None:
    """One set's tables and figures."""
    console.print(table(result, ks))
    console.print(
        f"{result['questions']} questions; {result['droppedEvidenceRefs']} evidence refs "
        "resolved to no message and were dropped"
    )
    if any("withinBudget" in row for row in result["results"]):
        console.print(budget_table(result))
        console.print(category_table(result))
        console.print(source_table(result))
    marked = result["standing"]
    recall = ", ".join(f"{c} {r:.2f}" for c, r in marked["probeRecall"].items())
    console.print(
        f"Standing messages: {marked['marked']} of {marked['messages']} marked"
        f" ({marked['markedAreProbeEvidence']} are a probe's evidence)"
        + (f"; recall on the probes' rules and preferences: {recall}" if recall else "")
    )
    bound = " / ".join(f"{result['legChoiceBound'][str(k)]:.3f}" for k in ks)
    console.print(
        f"Each question answered by its better single leg: R@k {bound} (no per-question"
        " choice of leg can do better)"
    )


def _print_fitted(
    console: Console,
    combined: dict[str, Any],
    floors: dict[str, Any] | None,
    placed: PlacedWorth | None,
) -> None:
    """What packing was fitted to, by conversation, into the JSON and on the screen."""
    if floors is not None:
        combined["standingFloor"] = floors
        console.print(floor_table(floors))
    if placed is not None:
        combined["placedWorth"] = asdict(placed)
        console.print(
            "RRF's worth by place, fitted on every conversation given (packing.PLACED_WORTH;"
            f" each conversation above was packed by the fit that left it out): {placed}"
        )


def _with_progress(
    console: Console,
    evalset: EvalSet,
    embedder: Embedder,
    options: EvalOptions,
    extra: Sequence[tuple[float, float]],
    also: Also | None,
) -> SetResult:
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(
            f"{evalset.name}: importing and asking", total=len(evalset.conversations)
        )
        return evaluate(evalset, embedder, options, extra, lambda _: bar.advance(task), also)


def worst_case(per_set: Sequence[dict[str, Any]], ks: Sequence[int]) -> list[dict[str, Any]]:
    """For each weight pair (and the learned mode), the lowest recall@k any dataset gave
    it."""
    worst = []
    for first in per_set[0]["results"] if per_set else []:
        rows = [r for result in per_set for r in result["results"] if _key(r) == _key(first)]
        recall = {str(k): min(r["recall"][str(k)] for r in rows) for k in ks}
        worst.append({**_setting(first), "recall": recall})
    return worst


def worst_table(combined: dict[str, Any], ks: Sequence[int]) -> Table:
    names = ", ".join(r["dataset"] for r in combined["datasets"])
    grid = Table(title=f"Worst case across {names}", caption="recall@k: the lowest any set gave")
    for column in ["semantic", "keyword", *(f"R@{k}" for k in ks)]:
        grid.add_column(column, justify="right")
    for row in combined["worst"]:
        grid.add_row(*_names(row), *(f"{row['recall'][str(k)]:.3f}" for k in ks))
    return grid


def _setting(row: dict[str, Any]) -> dict[str, Any]:
    """What a row was asked with."""
    return {name: row[name] for name in ("fusion", "semanticWeight", "keywordWeight")}


def _names(row: dict[str, Any], mark: str = "") -> list[str]:
    """A row's first two cells: its weights, or "learned"."""
    if row["fusion"] == Learned.name:
        return [f"learned{mark}", ""]
    return [f"{row['semanticWeight']:g}{mark}", f"{row['keywordWeight']:g}"]


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
        cells = _names(row, marks.get(_key(row), ""))
        cells += [f"{row['recall'][str(k)]:.3f}" for k in ks]
        cells += [f"{row['hit'][str(k)]:.3f}" for k in ks]
        cells += [
            f"{row['mrr']:.3f}",
            f"{row['latencyMs']['p50']:.1f}",
            f"{row['latencyMs']['p95']:.1f}",
        ]
        grid.add_row(*cells)
    return grid


def _key(row: dict[str, Any] | None) -> tuple[str, float, float] | tuple[str] | None:
    """Which setting a row (or a mark) is: the learned mode whatever its weights."""
    if not row:
        return None
    if row.get("fusion") == Learned.name:
        return (Learned.name,)
    return (RRF.name, row["semanticWeight"], row["keywordWeight"])


def floor_table(floors: dict[str, Any]) -> Table:
    """Recall of the learned turns within each budget at each `standingFloor`, and with the
    floor each conversation got from all the others."""
    grid = Table(
        title="standingFloor: recall within a budget, learned (each dataset, 250 to 2,000)",
        caption=f"chosen by conversation: {_counted(floors['chosen'])}; on all of them:"
        f" {floors['onAll']}",
    )
    datasets = list(floors["crossValidated"])
    budgets = list(next(iter(floors["crossValidated"].values())))
    grid.add_column("floor")
    for dataset in datasets:
        grid.add_column(f"{dataset} {'/'.join(budgets)}", justify="right")
    rows = [*floors["byFloor"].items(), ("by conversation", floors["crossValidated"])]
    for name, recall in rows:
        cells = [" ".join(f"{recall[d][b]:.3f}" for b in budgets) for d in datasets]
        grid.add_row(name, *cells)
    return grid


def _counted(chosen: dict[str, float]) -> str:
    return ", ".join(f"{f} for {n}" for f, n in sorted(Counter(chosen.values()).items()))


def budget_table(result: dict[str, Any]) -> Table:
    """Recall within each token budget, per setting and packer (`evaluation.budgets`):
    evidence recall, then answer recall."""
    grid = Table(
        title=f"{result['dataset']}: recall within a token budget (contextBudget),"
        " evidence / answer",
        caption="The most evidence per token, long episodes as excerpts; a memory's worth is"
        " the ranker's probability (dense, a learned turn) or the chance fitted to its place"
        " and length (placed, an RRF turn). Evidence: the share of the evidence messages"
        " given (an excerpt counts); answer: the share of the reference answer's words the"
        " evidence states that the prompt holds (questions with a reference). cut: share of"
        " the evidence given that came as an excerpt, at 1,000. A recall marked ↓ is lower"
        " than at the budget before it",
    )
    for column in ["setting", "packer", *(f"{b:,}" for b in BUDGETS), "cut"]:
        grid.add_column(column, justify="right")
    for row in result["results"]:
        for packer, scores in row.get("withinBudget", {}).items():
            cells = [" ".join(_names(row)).strip(), packer]
            fell = scores.get("falls", [])
            answers = scores.get("answerRecall", {})
            cells += [
                f"{scores['recall'][str(b)]:.3f}{' ↓' if b in fell else ''}"
                f" / {_share(answers.get(str(b)))}"
                for b in BUDGETS
            ]
            grid.add_row(*cells, f"{scores['cutEvidence']['1000']:.2f}")
    return grid


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def category_table(result: dict[str, Any], budget: int = 1000) -> Table:
    """Recall within `budget` tokens per question category, for each setting's packers."""
    rows = [r for r in result["results"] if "withinBudget" in r]
    names = list(next(iter(rows[0]["withinBudget"].values()))["byCategory"]) if rows else []
    grid = Table(
        title=f"{result['dataset']}: recall within {budget:,} tokens by category,"
        " evidence / answer ('-': no reference answer)"
    )
    grid.add_column("category")
    columns = [(r, p) for r in rows for p in r["withinBudget"]]
    for row, packer in columns:
        grid.add_column(f"{' '.join(_names(row)).strip()} {packer}", justify="right")
    for name in names:
        cells = [
            f"{row['withinBudget'][packer]['byCategory'][name][str(budget)]:.3f} / "
            + _share(
                row["withinBudget"][packer]
                .get("answerByCategory", {})
                .get(name, {})
                .get(str(budget))
            )
            for row, packer in columns
        ]
        grid.add_row(name, *cells)
    return grid


def source_table(result: dict[str, Any], budget: int = 1000) -> Table | str:
    """For the recommended turn (the learned row, else the first with a budget): recall
    within `budget` per category, split by the source that brought the evidence in, and
    the ceiling (the evidence anywhere packing chose from)."""
    rows = [r for r in result["results"] if "withinBudget" in r]
    row = next((r for r in rows if r.get("fusion") == Learned.name), rows[0] if rows else None)
    if row is None:
        return ""
    scores = next(iter(row["withinBudget"].values()))
    grid = Table(
        title=f"{result['dataset']}: where the evidence given within {budget:,} tokens came"
        f" from ({' '.join(_names(row)).strip()})",
        caption="Each source's part of the recall (they add up to it); ceiling: the evidence"
        " anywhere in what packing chose from, at any budget",
    )
    found, ceiling = scores["foundBy"], scores["ceiling"]
    sources = list(found["overall"][str(budget)]) if found["overall"] else list(SOURCES)
    for column in ["category", "recall", *sources, "ceiling"]:
        grid.add_column(column, justify="right")
    named = [*found["byCategory"].items(), ("overall", found["overall"])]
    ceilings = {**ceiling["byCategory"], "overall": ceiling["overall"]}
    for name, by_budget in named:
        parts = by_budget[str(budget)]
        cells = [f"{parts.get(source, 0.0):.3f}" for source in sources]
        grid.add_row(name, f"{sum(parts.values()):.3f}", *cells, f"{ceilings[name]:.3f}")
    return grid
