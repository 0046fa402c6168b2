"""Retrieval quality on labelled conversations, through the real retrieval path.

Each conversation is imported into a fresh store; every question with evidence is asked
as a turn of it, scoped to the conversation's sessions, with no recent turns. A turn is
the one every face runs, in its two halves: the question is read (`turn.gather`, both
legs) once per depth, and each weight pair's turn, and each fold's ranker's, is assembled
from that read (`turn.assemble`), as a live turn would give it (tests/test_congruence.py).
The question is embedded once, as a real turn's one vector serves every source.

recall@k is what a turn that gets k memories finds: the question is asked at
`semanticLimit` k (the semantic leg asks for k, the keyword leg for 2k, k are kept), as a
user who gives the LLM k memories has it. With `depth`, it is instead the top k of a single
turn at `semanticLimit` depth: how well that one list is ordered. MRR and latency are
always of the deepest turn asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nexusai.embedders import Embedder
from nexusai.errors import InvalidInput
from nexusai.evaluation.budgets import BUDGETS, Fold, Packed, within_budget
from nexusai.evaluation.calibration import cross_validated, fit
from nexusai.evaluation.datasets import EvalConversation, EvalSet
from nexusai.evaluation.metrics import hit_at, percentile, recall_at, reciprocal_rank
from nexusai.evaluation.options import EvalOptions
from nexusai.evaluation.replay import (
    SLICES,
    EvalQuestion,
    Imported,
    Read,
    budgeted,
    imported,
    read,
    replayed,
)
from nexusai.evaluation.standing import standing_figures
from nexusai.orchestration.modes import RRF, Learned
from nexusai.orchestration.packing import Packer, PlacedWorth
from nexusai.orchestration.settings import RuntimeSettings

SWEEP = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0]  # keywordWeight at semanticWeight 1


Weights = tuple[float, float]


# Called with each conversation while it is imported, and each question's deepest read.
Also = Callable[["Imported", str, str, "Sequence[Read]"], None]


@dataclass
class Run:
    """What one weight pair (or the learned ranker) retrieved for every question, per
    `semanticLimit` asked."""

    weights: Weights | None  # None: fusion "learned"
    ranked: dict[int, list[list[int]]]
    latency_ms: list[float]  # at the deepest limit
    packed: Packed | None = None  # what budgeted turns gave (`BUDGET_PAIRS` and learned)


# The pairs whose turns are also packed into token budgets: each leg alone and both.
BUDGET_PAIRS = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0))


def weight_pairs(extra: Sequence[Weights]) -> list[Weights]:
    """Semantic only and keyword only first, then `extra`, then the sweep; each once."""
    pairs = [(1.0, 0.0), (0.0, 1.0), *extra, *((1.0, w) for w in SWEEP)]
    return list(dict.fromkeys(pairs))


@dataclass
class SetResult:
    """One set's figures (`figures`: what its tables and the JSON show), and what rows
    scored later read: every question as asked, their categories, and each budgeted
    weight pair's fused lists (`budget_rows`, the learned rows)."""

    figures: dict[str, Any]
    asked: list[EvalQuestion]
    categories: list[str]
    packed: dict[Weights, Packed]


def evaluate(
    evalset: EvalSet,
    embedder: Embedder,
    options: EvalOptions,
    extra: Sequence[Weights] = (),
    progress: Callable[[str], None] | None = None,
    also: Also | None = None,
) -> SetResult:
    """Every weight pair's scores on one labelled set, as `options` ask; `also` is called
    with each conversation while it is imported (the learned ranker's pools are collected
    there)."""
    ks, depth, base = options.ks, options.depth, options.base()
    turns_per_episode = options.turns_per_episode
    if depth is not None and depth < max(ks):
        raise InvalidInput(f"--depth {depth} is less than the largest k ({max(ks)})")
    limits = [depth] if depth else sorted(set(ks))
    pairs = weight_pairs(extra)
    runs = {pair: Run(pair, {limit: [] for limit in limits}, []) for pair in pairs}
    packed = {pair: Packed(RRF.packer) for pair in BUDGET_PAIRS}  # scored by `budget_rows`
    for pair in BUDGET_PAIRS:
        runs[pair].packed = packed[pair]
    questions: list[EvalQuestion] = []
    dropped = 0
    for item in evalset.conversations:
        asked, lost = _evaluate_conversation(
            evalset.name, item, embedder, runs, turns_per_episode, also, base
        )
        questions += asked
        dropped += lost
        if progress:
            progress(item.conversation.key)
    categories = list(dict.fromkeys(q.category for q in questions))
    figures = {
        "dataset": evalset.name,
        "conversations": [c.conversation.key for c in evalset.conversations],
        "questions": len(questions),
        "droppedEvidenceRefs": dropped,
        "semanticLimit": depth or "k",
        "turnsPerEpisode": turns_per_episode,
        "keywordBudget": base.keyword_budget,
        "timeAware": base.time_aware,
        "results": [
            {"dataset": evalset.name, **summary(runs[pair], questions, ks, categories)}
            for pair in pairs
        ],
        "legChoiceBound": leg_choice_bound(runs[(1.0, 0.0)], runs[(0.0, 1.0)], questions, ks),
        "standing": standing_figures(evalset),
    }
    return SetResult(figures, questions, categories, packed)


def leg_choice_bound(
    semantic: Run, keyword: Run, questions: list[EvalQuestion], ks: Sequence[int]
) -> dict[str, float]:
    """Recall@k if each question were answered by whichever single leg did better on it:
    what no per-question choice of leg (or weights leaning all one way) can pass. Fusion
    can, only by taking finds from both lists for one question."""

    def best(k: int, i: int) -> float:
        lists = (_ranked_at(semantic, k)[i], _ranked_at(keyword, k)[i])
        return max(recall_at(ranked, questions[i].evidence, k) for ranked in lists)

    n = max(len(questions), 1)
    return {str(k): sum(best(k, i) for i in range(len(questions))) / n for k in ks}


def _evaluate_conversation(
    dataset: str,
    item: EvalConversation,
    embedder: Embedder,
    runs: dict[Weights, Run],
    turns_per_episode: int,
    also: Also | None,
    base: RuntimeSettings,
) -> tuple[list[EvalQuestion], int]:
    fold = (dataset, item.conversation.key)
    with imported(item, embedder, turns_per_episode) as chat:
        deep = []
        for i, question in enumerate(chat.questions):
            chat.questions[i], deepest = _ask(chat, embedder, fold, question, runs, base)
            deep.append(deepest)
        if also:
            also(chat, dataset, item.conversation.key, deep)
    return chat.questions, chat.dropped


def _ask(
    chat: Imported,
    embedder: Embedder,
    fold: Fold,
    question: EvalQuestion,
    runs: dict[Weights, Run],
    base: RuntimeSettings,
) -> tuple[EvalQuestion, Read]:
    """The question read once per depth, each weight pair's turns assembled from those
    reads. Returns it with the standing candidates its turn carries at any floor, and its
    deepest read (a budgeted turn's, which the learned mode ranks)."""
    limits = sorted(next(iter(runs.values())).ranked)
    reads = {limit: read(chat, embedder, question.text, _at(base, limit)) for limit in limits}
    deep = read(chat, embedder, question.text, replace(base, context_budget=BUDGETS[-1]))
    question = replace(question, standing=tuple(deep.gathered.standing_candidates))
    for (semantic, keyword), run in runs.items():  # every run here is a weight pair
        weighed = replace(base, semantic_weight=semantic, keyword_weight=keyword)
        for limit, ranked in run.ranked.items():
            started = time.perf_counter()
            turn = replayed(reads[limit], _at(weighed, limit))
            if limit == limits[-1]:
                spent = (time.perf_counter() - started) * 1000
                run.latency_ms.append(reads[limit].ms + spent)
            ranked.append([f.episode.id for f in turn.memories])
        if run.packed is not None:  # asked as budgeted turns ask (deeper), packed at each
            lists = budgeted(deep, weighed)
            run.packed.add(
                fold, question.text, lists, question.standing, question.evidence, question.answer
            )
    return question, deep


def _at(settings: RuntimeSettings, limit: int) -> RuntimeSettings:
    return replace(settings, semantic_limit=limit)


def _scores(
    run: Run, chosen: list[int], questions: list[EvalQuestion], ks: Sequence[int]
) -> dict[str, Any]:
    """Scores over the questions at the indexes `chosen`; recall@k and hit@k from the turn
    at `semanticLimit` k (or the one deep turn), MRR from the deepest."""

    def ranked(limit: int) -> list[tuple[list[int], list[int]]]:
        lists = _ranked_at(run, limit)
        return [(lists[i], questions[i].evidence) for i in chosen]

    n = max(len(chosen), 1)
    recall, hit = {}, {}
    for k in ks:
        pairs = ranked(k)
        recall[str(k)] = sum(recall_at(r, evidence, k) for r, evidence in pairs) / n
        hit[str(k)] = sum(hit_at(r, evidence, k) for r, evidence in pairs) / n
    deepest = ranked(max(run.ranked))
    mrr = sum(reciprocal_rank(r, evidence) for r, evidence in deepest) / n
    return {"recall": recall, "hit": hit, "mrr": mrr, "questions": len(chosen)}


def _ranked_at(run: Run, k: int) -> list[list[int]]:
    """Every question's ranking from the turn asked at semanticLimit k (or the one deep
    turn, with --depth)."""
    return run.ranked[k if k in run.ranked else max(run.ranked)]


def summary(
    run: Run, questions: list[EvalQuestion], ks: Sequence[int], categories: Sequence[str]
) -> dict[str, Any]:
    """A row of the results: recall, hit and MRR overall, per category and per slice."""
    by_category = {
        name: _scores(
            run, [i for i, q in enumerate(questions) if q.category == name], questions, ks
        )
        for name in categories
    }
    by_slice = {
        name: _scores(run, [i for i, q in enumerate(questions) if name in q.slices], questions, ks)
        for name in SLICES
    }
    overall = _scores(run, list(range(len(questions))), questions, ks)
    return {
        "fusion": RRF.name if run.weights else Learned.name,
        "semanticWeight": run.weights[0] if run.weights else None,
        "keywordWeight": run.weights[1] if run.weights else None,
        "recall": overall["recall"],
        "hit": overall["hit"],
        "mrr": overall["mrr"],
        "latencyMs": {"p50": percentile(run.latency_ms, 50), "p95": percentile(run.latency_ms, 95)},
        "byCategory": by_category,
        "bySlice": by_slice,
        **(
            {"withinBudget": scored_budgets(run.packed, questions)}
            if run.packed is not None and run.packed.packer == Learned.packer
            else {}
        ),
    }


def scored_budgets(
    packed: Packed,
    questions: Sequence[EvalQuestion],
    packer_for: Callable[[Fold], Packer] | None = None,
) -> dict[str, Any]:
    """Recall within each budget of what `packed`'s turns gave (`evaluation.budgets`)."""
    evidence = [q.evidence for q in questions]
    categories = [q.category for q in questions]
    return within_budget(packed.packer, packed.given(packer_for), evidence, categories)


def budget_rows(results: Sequence[SetResult]) -> PlacedWorth | None:
    """The budget rows of the RRF pairs of every set's results, each conversation packed
    by RRF's worth fitted to every other conversation of every set (with one conversation
    in all, the shipped fit). Returns the fit on all (1, 1)'s lists, or None with one."""
    shipped: PlacedWorth | None = None
    for pair in BUDGET_PAIRS:
        entries = [e for r in results for e in r.packed[pair].entries]
        many = len({e.fold for e in entries}) > 1
        fitted = cross_validated(entries) if many else {}
        for result in results:
            row = next(r for r in result.figures["results"] if _pair(r) == pair)
            packed = result.packed[pair]
            packer_for = fitted.__getitem__ if many else None
            row["withinBudget"] = scored_budgets(packed, result.asked, packer_for)
        if pair == (1.0, 1.0) and many:
            shipped = fit(entries)
    return shipped


def _pair(row: dict[str, Any]) -> Weights | None:
    if row.get("fusion") != RRF.name:
        return None
    return (row["semanticWeight"], row["keywordWeight"])


def plot(result: dict[str, Any], path: Path, k: int | None = None) -> None:
    """recall@k against keywordWeight at semanticWeight 1, with keyword-only for scale; k is
    10 when the run measured it, else the largest cut-off it did."""
    try:
        import matplotlib
    except ImportError:
        raise InvalidInput("--plot needs matplotlib: pip install 'nexusai[plot]'") from None
    measured = sorted(int(cut) for cut in result["results"][0]["recall"])
    k = k if k is not None else (10 if 10 in measured else measured[-1])
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(
        (r["keywordWeight"], r["recall"][str(k)])
        for r in result["results"]
        if r["semanticWeight"] == 1.0
    )
    keyword_only = next(
        r["recall"][str(k)] for r in result["results"] if r["semanticWeight"] == 0.0
    )
    figure, axes = plt.subplots(figsize=(7, 4.2))
    axes.plot([w for w, _ in rows], [v for _, v in rows], marker="o", label="semanticWeight 1")
    axes.axhline(keyword_only, linestyle="--", color="gray", label="keyword only (0, 1)")
    axes.set_xlabel("keywordWeight")
    axes.set_ylabel(f"evidence recall@{k}")
    axes.set_title(f"{result['dataset']} ({result['questions']} questions): recall@{k}")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
