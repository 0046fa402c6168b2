"""A ranker model file and its scoring: a sum of small regression trees over the features
of `nexusai.ranking.features`, higher is better. onnxruntime scores a turn
(`nexusai.ranking.onnx_trees`); numpy walks the trees again for what `explain` shows.

The file is JSON, written by `nexus ranker train`:

    {"format": "nexusai-ranker/1", "features": [...], "depth": 50,
     "trees": [{"feature": [...], "threshold": [...], "left": [...], "right": [...],
                "value": [...]}, ...],
     "trainedOn": {...}}

Each tree is its nodes in arrays, the root first. A node goes left when its feature's value
is at most its threshold; a leaf has feature -1. `value` holds every node's value, the
inner ones too (the mean of the leaves under it, weighted by the rows that reached them),
so that each step down a tree says how much its feature moved the score: those steps are
what `explain` shows.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from nexusai.errors import InvalidInput
from nexusai.ranking import onnx_trees
from nexusai.ranking.features import FEATURES, Matrix
from nexusai.ranking.onnx_trees import Tree

FORMAT = "nexusai-ranker/1"
SHIPPED = Path(__file__).parent / "weights" / "ranker.json"
ARRAYS = ("feature", "threshold", "left", "right", "value")
Ints = npt.NDArray[np.int64]


def probability(log_odds: float) -> float:
    """A score in log-odds (the ranker's, a fitted worth's) as a chance from 0 to 1."""
    return 1.0 / (1.0 + math.exp(-log_odds))


def probabilities(log_odds: Matrix) -> Matrix:
    """`probability` of every entry of an array (the fits' Newton steps)."""
    chances: Matrix = 1.0 / (1.0 + np.exp(-log_odds))
    return chances


@dataclass(frozen=True)
class Ranker:
    """Every tree's nodes in flat arrays, so that all rows walk down all trees at once, a
    level a step, for what `explain` shows (`scores` are onnxruntime's). A leaf points at
    itself and never goes left or right of anything, so a row that reached one stays
    there."""

    trees: tuple[Tree, ...]  # as the file holds them
    feature: Ints  # (all nodes,)
    threshold: Matrix  # +inf at a leaf
    children: Ints  # (all nodes * 2,): a node's right child, then its left
    value: Matrix
    roots: Ints  # (trees,)
    levels: int  # the longest root-to-leaf path
    depth: int  # how many candidates each leg is asked for
    trained_on: dict[str, Any] = field(default_factory=dict)

    @property
    def bias(self) -> float:
        """The score of a row that no split moves: the trees' root values."""
        return float(self.value[self.roots].sum())

    def scores(self, matrix: Matrix) -> Matrix:
        """One score per row of `matrix` (features in `FEATURES` order): the leaf each
        tree sends the row to, their values added one tree at a time in the file's order.
        onnxruntime walks the trees (`onnx_trees`)."""
        if not len(matrix):
            return np.zeros(0)
        rows = np.ascontiguousarray(matrix, dtype=np.float64)
        [summed] = self._session.run(None, {"X": rows})
        scores: Matrix = summed[:, 0]
        return scores

    @functools.cached_property
    def _session(self) -> Any:
        return onnx_trees.session(self.trees)

    def contributions(self, matrix: Matrix) -> Matrix:
        """Per row and feature, how much the feature moved the row's score: each step down
        a tree credits its node's feature with the change in node value. A row sums to its
        score minus `bias`."""
        moved = np.zeros(matrix.shape)
        node = np.repeat(self.roots[None, :], matrix.shape[0], axis=0)  # (rows, trees)
        rows = np.arange(matrix.shape[0])[:, None]
        cells = np.ascontiguousarray(matrix).ravel()
        row_start = rows * matrix.shape[1]
        # Flat gathers: a few times faster than take_along_axis and np.where at this size.
        for _ in range(self.levels):
            feature = self.feature[node]
            goes_left = cells[row_start + feature] <= self.threshold[node]
            child = self.children[2 * node + goes_left]
            # A leaf points at itself: its step is 0, and adds nothing.
            np.add.at(moved, (rows, feature), self.value[child] - self.value[node])
            node = child
        return moved


def from_trees(trees: Sequence[Tree], depth: int, trained_on: dict[str, Any]) -> Ranker:
    """A ranker from trees as the file holds them."""
    if not trees:
        raise InvalidInput("a ranker needs at least one tree")
    sizes = [len(tree["feature"]) for tree in trees]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    flat = {
        name: np.concatenate([np.asarray(t[name], dtype=np.float64) for t in trees])
        for name in ARRAYS
    }
    leaf = flat["feature"] < 0
    shift = np.repeat(offsets, sizes)
    own = np.arange(leaf.size, dtype=np.int64)
    left = np.where(leaf, own, flat["left"].astype(np.int64) + shift)
    right = np.where(leaf, own, flat["right"].astype(np.int64) + shift)
    return Ranker(
        tuple(trees),
        np.where(leaf, 0, flat["feature"]).astype(np.int64),
        np.where(leaf, np.inf, flat["threshold"]),
        np.stack([right, left], axis=1).ravel(),
        flat["value"],
        offsets,
        max(_levels(tree) for tree in trees),
        depth,
        trained_on,
    )


def _levels(tree: Tree) -> int:
    deepest, stack = 0, [(0, 0)]
    while stack:
        node, level = stack.pop()
        if tree["feature"][node] < 0:
            deepest = max(deepest, level)
        else:
            stack += [(int(tree["left"][node]), level + 1), (int(tree["right"][node]), level + 1)]
    return deepest


def to_json(ranker: Ranker) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "features": list(FEATURES),
        "depth": ranker.depth,
        "trees": [{name: list(tree[name]) for name in ARRAYS} for tree in ranker.trees],
        "trainedOn": ranker.trained_on,
    }


def configured(path: Path | None) -> Ranker:
    """The ranker NEXUS_RANKER names, or the one nexusai ships (None)."""
    return load(path) if path is not None else shipped()


@functools.cache
def shipped() -> Ranker:
    """The ranker in the package, trained on LoCoMo and BEAM's 100K and 500K tiers (see
    THIRD_PARTY.md)."""
    return load(SHIPPED)


def save(ranker: Ranker, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(ranker), separators=(",", ":")) + "\n", encoding="utf-8")


def load(path: Path) -> Ranker:
    """The ranker in `path`, or InvalidInput saying what is wrong with the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInput(f"ranker model {path} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"ranker model {path} is not a readable JSON file: {exc}") from None
    try:
        ranker = _parse(data)
        ranker.scores(np.zeros((1, len(FEATURES))))  # builds its session: not in a turn
        return ranker
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise InvalidInput(f"ranker model {path} is not a nexusai ranker: {exc}") from None


def _parse(data: Any) -> Ranker:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"format is {found!r}, not {FORMAT!r}")
    if tuple(data["features"]) != FEATURES:
        raise ValueError(
            "it was trained on other features than this version computes: train it again"
            " with `nexus ranker train`"
        )
    trees = data["trees"]
    for tree in trees:
        _check_tree(tree)
    return from_trees(trees, int(data["depth"]), dict(data.get("trainedOn") or {}))


def _check_tree(tree: Tree) -> None:
    size = len(tree["feature"])
    if size == 0 or any(len(tree[name]) != size for name in ARRAYS):
        raise ValueError("a tree's arrays differ in length")
    for node in range(size):
        feature = int(tree["feature"][node])
        if feature >= len(FEATURES):
            raise ValueError(f"a tree splits on feature {feature}, of {len(FEATURES)}")
        children = (int(tree["left"][node]), int(tree["right"][node]))
        if feature >= 0 and not all(node < child < size for child in children):
            raise ValueError("a tree's node points outside it, or back up")
