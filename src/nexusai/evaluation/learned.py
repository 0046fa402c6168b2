"""The learned ranker on labelled conversations: each question's candidate pool (both
legs' deeper lists, as a learned turn asks them), trees fitted to them, and
leave-one-conversation-out cross-validation, so that no conversation is ever scored by a
ranker that saw it.

Fitting needs LightGBM (`pip install 'nexusai[train]'`); scoring never does: the fitted
trees are written to the model file and scored by onnxruntime (`nexusai.ranking.model`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from nexusai.embedders import Embedder
from nexusai.errors import InvalidInput
from nexusai.evaluation.budgets import BUDGETS, Fold, Packed
from nexusai.evaluation.harness import Run, SetResult, summary
from nexusai.evaluation.replay import EvalQuestion, Imported, Read, budgeted, read, replayed
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.modes import Learned
from nexusai.orchestration.packing import PACK_DEPTH
from nexusai.orchestration.settings import DEFAULTS, RuntimeSettings
from nexusai.ranking.features import FEATURES, Matrix, candidates
from nexusai.ranking.model import ARRAYS, Ranker, from_trees

DEPTH = PACK_DEPTH  # candidates asked of each leg: docs/evaluation.md has the depths measured
LEARNED = replace(DEFAULTS, fusion=Learned.name)  # a learned turn without a budget
# Chosen by leave-one-conversation-out cross-validation on LoCoMo and BEAM 1-10 together,
# then against fewer features, weaker and stronger regularisation and other rounds on all
# three sets within budgets (`nexus ranker select`; docs/evaluation.md has both tables);
# small enough to score a turn in about a millisecond.
PARAMS: dict[str, Any] = {
    "objective": "binary",
    "learning_rate": 0.05,
    "num_leaves": 15,
    "max_depth": 6,
    "min_data_in_leaf": 50,
    "feature_fraction": 0.9,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "verbose": -1,
    "seed": 7,
    "num_threads": 2,
    "deterministic": True,
}
ROUNDS = 200
UNUSED: tuple[str, ...] = ()  # features the shipped ranker may not split on


@dataclass
class Pool:
    """One question's candidates as a learned turn sees them, with their labels."""

    dataset: str
    conversation: str
    question: EvalQuestion
    read: Read  # the question as read (both legs, without what only the indexes read)
    ids: list[int]  # the matrix's rows
    matrix: Matrix
    labels: npt.NDArray[np.float64]  # 1 for evidence
    latency_ms: float = 0.0  # the read's; `rank_ids` adds the ranking
    # When the turn was narrowed to a time its question names (timeAware), the same
    # question unnarrowed: what a ranker is fitted on, as the shipped one is.
    unfiltered: Pool | None = None

    @property
    def fold(self) -> tuple[str, str]:
        """What cross-validation holds out together: one conversation of one set."""
        return (self.dataset, self.conversation)


def pools_of(
    chat: Imported,
    dataset: str,
    conversation: str,
    embedder: Embedder,
    depth: int,
    base: RuntimeSettings = DEFAULTS,
    reads: Sequence[Read] | None = None,
) -> list[Pool]:
    """Every question of one imported conversation, read as a learned turn reads it (from
    the `base` settings' keywordBudget and timeAware): `reads` when the eval read them
    already. Both legs are read as deep as the largest budget ranks (what its turns are
    replayed from: `harness.budgeted`); the pool holds their first `depth`."""
    settings = replace(
        base,
        semantic_limit=depth,
        semantic_weight=1.0,
        keyword_weight=1.0,
        fusion="rrf",
        context_budget=BUDGETS[-1],
    )
    found = []
    for i, question in enumerate(chat.questions):
        asked = reads[i] if reads is not None else read(chat, embedder, question.text, settings)
        made = pool(dataset, conversation, question, asked, depth)
        unfiltered = None
        if asked.window is not None:  # what a ranker is fitted on: unnarrowed
            wide = read(chat, embedder, question.text, replace(settings, time_aware="off"))
            unfiltered = pool(dataset, conversation, question, wide, depth)
        found.append(replace(made, unfiltered=unfiltered))
    return found


def pool(dataset: str, conversation: str, question: EvalQuestion, asked: Read, depth: int) -> Pool:
    found = asked.gathered.found
    semantic, keyword = found.get("semantic", []), found.get("keyword", [])
    cands = candidates(question.text, semantic[:depth], keyword[:depth])
    evidence = set(question.evidence)
    labels = np.array([float(e.id in evidence) for e in cands.episodes])
    return Pool(
        dataset,
        conversation,
        question,
        asked.bare(),
        [e.id for e in cands.episodes],
        cands.matrix,
        labels,
        asked.ms,
    )


@dataclass(frozen=True)
class Recipe:
    """How a ranker is fitted: LightGBM's parameters, its rounds, and the features it may
    not split on (`unused`: a feature that would not carry to other chats)."""

    params: Mapping[str, Any] = field(default_factory=lambda: dict(PARAMS))
    rounds: int = ROUNDS
    unused: tuple[str, ...] = UNUSED

    def described(self) -> dict[str, Any]:
        return {"params": dict(self.params), "rounds": self.rounds, "unused": list(self.unused)}


SHIPPED_RECIPE = Recipe()


def fit(
    pools: Sequence[Pool],
    depth: int,
    trained_on: dict[str, Any],
    recipe: Recipe = SHIPPED_RECIPE,
) -> Ranker:
    """Trees fitted to every candidate of `pools` (evidence or not), as a Ranker."""
    lgb = _lightgbm()
    used = [fitted for p in pools if len((fitted := p.unfiltered or p).ids)]
    if not any(p.labels.any() for p in used):
        raise InvalidInput("no question's evidence is among its candidates: nothing to learn")
    matrix = np.vstack([p.matrix for p in used])
    # A constant column is never split on: the trees cannot read an unused feature.
    matrix[:, [FEATURES.index(name) for name in recipe.unused]] = 0.0
    labels = np.concatenate([p.labels for p in used])
    weights = np.concatenate(
        [np.full(len(p.ids), w) for p, w in zip(used, _balanced(used), strict=True)]
    )
    data = lgb.Dataset(matrix, labels, weight=weights, group=[len(p.ids) for p in used])
    booster = lgb.train(dict(recipe.params), data, num_boost_round=recipe.rounds)
    return ranker_from_booster(booster.dump_model(), depth, trained_on)


def _balanced(pools: Sequence[Pool]) -> list[float]:
    """A weight per question, so that each dataset counts as much as any other however
    many questions it has (BEAM 1-10 has 179, LoCoMo 1,981): a ranker for both kinds of
    chat, not for the bigger set."""
    sizes = Counter(p.dataset for p in pools)
    return [len(pools) / (len(sizes) * sizes[p.dataset]) for p in pools]


def ranker_from_booster(dump: dict[str, Any], depth: int, trained_on: dict[str, Any]) -> Ranker:
    """LightGBM's dumped trees as the model file holds them."""
    if dump["feature_names"] != [f"Column_{i}" for i in range(len(FEATURES))] and dump[
        "feature_names"
    ] != list(FEATURES):
        raise InvalidInput("the booster was trained on other features")
    trees = [_flatten(info["tree_structure"]) for info in dump["tree_info"]]
    return from_trees(trees, depth, trained_on)


def _flatten(root: dict[str, Any]) -> dict[str, list[float]]:
    """A nested LightGBM tree as arrays, each node's children after it."""
    tree: dict[str, list[float]] = {k: [] for k in ARRAYS}

    def add(node: dict[str, Any]) -> int:
        index = len(tree["feature"])
        for name in tree:
            tree[name].append(0.0)
        if "leaf_value" in node:
            tree["feature"][index] = -1
            tree["value"][index] = float(node["leaf_value"])
            return index
        if node.get("decision_type", "<=") != "<=":
            raise InvalidInput(f"a split of type {node['decision_type']} cannot be scored")
        tree["feature"][index] = int(node["split_feature"])
        tree["threshold"][index] = float(node["threshold"])
        tree["value"][index] = float(node["internal_value"])
        tree["left"][index] = add(node["left_child"])
        tree["right"][index] = add(node["right_child"])
        return index

    add(root)
    return tree


def _lightgbm() -> Any:
    try:
        import lightgbm
    except ImportError:
        raise InvalidInput(
            "training a ranker needs LightGBM: pip install 'nexusai[train]'"
        ) from None
    return lightgbm


def cross_validated(
    pools: Sequence[Pool],
    depth: int,
    limits: Sequence[int],
    progress: Callable[[str], None] | None = None,
    recipe: Recipe = SHIPPED_RECIPE,
    deep: dict[int, dict[int, list[FusedEpisode]]] | None = None,
) -> dict[int, dict[int, list[int]]]:
    """Each pool's memories at each `semanticLimit` in `limits` (ascending), ranked by a
    ranker fitted to every other conversation (pool index -> limit -> episode ids, best
    first). `deep`, when given, gets each pool's lists as budgeted turns fuse them (packing
    chooses from them: `harness.budgeted`), by the same held-out ranker."""
    ranked: dict[int, dict[int, list[int]]] = {}
    for held_out, ranker, indexes in held_out_rankers(pools, depth, recipe):
        for index in indexes:
            held = pools[index]
            ranked[index] = {k: rank_ids(ranker, held, k) for k in limits[:-1]}
            started = time.perf_counter()  # the deepest turn's, as for RRF's rows
            ranked[index][limits[-1]] = rank_ids(ranker, held, limits[-1])
            held.latency_ms += (time.perf_counter() - started) * 1000
            if deep is not None:
                deep[index] = budgeted(held.read, LEARNED, ranker)
        if progress:
            progress(held_out[1])
    return ranked


def held_out_rankers(
    pools: Sequence[Pool], depth: int, recipe: Recipe = SHIPPED_RECIPE
) -> Iterator[tuple[Fold, Ranker, list[int]]]:
    """Leave-one-conversation-out: each conversation (its fold), the ranker `recipe` fits
    to every other one, and the indexes of its own pools."""
    conversations = list(dict.fromkeys(p.fold for p in pools))
    if len(conversations) < 2:
        raise InvalidInput("cross-validation needs at least two conversations")
    for held_out in conversations:
        ranker = fit([p for p in pools if p.fold != held_out], depth, {}, recipe)
        yield held_out, ranker, [i for i, p in enumerate(pools) if p.fold == held_out]


def rank_ids(ranker: Ranker, held: Pool, limit: int) -> list[int]:
    """The memories a learned turn at `semanticLimit` `limit` gets from this pool."""
    turn = replayed(held.read, replace(LEARNED, semantic_limit=limit), ranker)
    return [f.episode.id for f in turn.memories]


class LearnedEval:
    """The learned mode in `nexus eval`: pools collected while each conversation is
    imported, then every conversation scored by a ranker fitted to all the others (of
    every set given), as a row beside the weight pairs."""

    def __init__(
        self, embedder: Embedder, depth: int = DEPTH, base: RuntimeSettings = DEFAULTS
    ) -> None:
        self.embedder = embedder
        self.depth = depth
        self.base = base
        self.pools: list[Pool] = []
        self.packed = Packed(Learned.packer)  # every set's budgeted turns, once scored

    def collect(
        self, chat: Imported, dataset: str, conversation: str, reads: Sequence[Read]
    ) -> None:
        """The pools of a conversation the eval read (`reads`: each question's deepest)."""
        shared = reads if self.depth == PACK_DEPTH else None  # else read at its own depth
        self.pools += pools_of(
            chat, dataset, conversation, self.embedder, self.depth, self.base, shared
        )

    def rows(
        self, results: Sequence[SetResult], ks: Sequence[int], progress: Callable[[str], None]
    ) -> None:
        """Adds a cross-validated learned row to each set's results."""
        deep: dict[int, dict[int, list[FusedEpisode]]] = {}
        ranked = cross_validated(self.pools, self.depth, ks, progress, deep=deep)
        start = 0
        for result in results:
            asked = result.asked
            lists = {k: [ranked[start + i][k] for i in range(len(asked))] for k in ks}
            latency = [self.pools[start + i].latency_ms for i in range(len(asked))]
            packed = Packed(Learned.packer)
            for i, question in enumerate(asked):
                fold = self.pools[start + i].fold
                packed.add(
                    fold,
                    question.text,
                    deep[start + i],
                    question.standing,
                    question.evidence,
                    question.answer,
                )
            self.packed.entries += packed.entries
            start += len(asked)
            run = Run(None, lists, latency, packed)
            row = summary(run, asked, ks, result.categories)
            result.figures["results"].append({"dataset": result.figures["dataset"], **row})
