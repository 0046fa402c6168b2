"""A ranker model file and its scoring, in numpy: a sum of small regression trees over the
features of `nexusai.ranking.features`, higher is better.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from nexusai.errors import InvalidInput
from nexusai.ranking.features import FEATURES, Matrix

FORMAT = "nexusai-ranker/1"
SHIPPED = Path(__file__).parent / "weights" / "ranker.json"
ARRAYS = ("feature", "threshold", "left", "right", "value")
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Ranker:
    """Trees padded to one node count, so that every tree walks down at once."""

    feature: Ints  # (trees, nodes); -1 at a leaf
    threshold: Matrix
    left: Ints
    right: Ints
    value: Matrix
    levels: int  # the longest root-to-leaf path
    depth: int  # how many candidates each leg is asked for
    trained_on: dict[str, Any] = field(default_factory=dict)

    @property
    def bias(self) -> float:
        """The score of a row that no split moves: the trees' root values."""
        return float(self.value[:, 0].sum())

    def scores(self, matrix: Matrix) -> Matrix:
        """One score per row of `matrix` (features in `FEATURES` order)."""
        leaves = self._walk(matrix, None)
        scores: Matrix = self.value[np.arange(self.value.shape[0]), leaves].sum(axis=1)
        return scores

    def contributions(self, matrix: Matrix) -> Matrix:
        """Per row and feature, how much the feature moved the row's score: each step down
        a tree credits its node's feature with the change in node value. A row sums to its
        score minus `bias`."""
        moved = np.zeros(matrix.shape)
        self._walk(matrix, moved)
        return moved

    def _walk(self, matrix: Matrix, moved: Matrix | None) -> Ints:
        """Every row down every tree at once, one level a step; the leaves reached."""
        trees = np.arange(self.feature.shape[0])
        node = np.zeros((matrix.shape[0], trees.size), dtype=np.int64)
        rows = np.broadcast_to(np.arange(matrix.shape[0])[:, None], node.shape)
        for _ in range(self.levels):
            feature = self.feature[trees, node]
            inner = feature >= 0
            x = matrix[rows, np.maximum(feature, 0)]
            goes_left = x <= self.threshold[trees, node]
            child = np.where(goes_left, self.left[trees, node], self.right[trees, node])
            child = np.where(inner, child, node)
            if moved is not None:
                step = self.value[trees, child] - self.value[trees, node]
                np.add.at(moved, (rows[inner], feature[inner]), step[inner])
            node = child
        return node


def from_trees(
    trees: Sequence[Mapping[str, Sequence[float]]], depth: int, trained_on: dict[str, Any]
) -> Ranker:
    """A ranker from trees as the file holds them, padded with leaves to one size."""
    if not trees:
        raise InvalidInput("a ranker needs at least one tree")
    size = max(len(tree["feature"]) for tree in trees)
    padded = {name: np.zeros((len(trees), size)) for name in ARRAYS}
    padded["feature"][:] = -1
    for i, tree in enumerate(trees):
        for name in ARRAYS:
            padded[name][i, : len(tree[name])] = tree[name]
    ints = {name: padded[name].astype(np.int64) for name in ("feature", "left", "right")}
    levels = max(_levels(tree) for tree in trees)
    return Ranker(
        ints["feature"],
        padded["threshold"],
        ints["left"],
        ints["right"],
        padded["value"],
        levels,
        depth,
        trained_on,
    )


def _levels(tree: Mapping[str, Sequence[float]]) -> int:
    deepest, stack = 0, [(0, 0)]
    while stack:
        node, level = stack.pop()
        if tree["feature"][node] < 0:
            deepest = max(deepest, level)
        else:
            stack += [(int(tree["left"][node]), level + 1), (int(tree["right"][node]), level + 1)]
    return deepest


def to_json(ranker: Ranker) -> dict[str, Any]:
    trees = []
    for i in range(ranker.feature.shape[0]):
        used = _tree_size(ranker.feature[i], ranker.left[i], ranker.right[i])
        tree: dict[str, list[Any]] = {
            "feature": ranker.feature[i, :used].tolist(),
            "threshold": ranker.threshold[i, :used].tolist(),
            "left": ranker.left[i, :used].tolist(),
            "right": ranker.right[i, :used].tolist(),
            "value": ranker.value[i, :used].tolist(),
        }
        trees.append(tree)
    return {
        "format": FORMAT,
        "features": list(FEATURES),
        "depth": ranker.depth,
        "trees": trees,
        "trainedOn": ranker.trained_on,
    }


def _tree_size(feature: Ints, left: Ints, right: Ints) -> int:
    inner = feature >= 0
    children = np.concatenate([left[inner], right[inner]])
    return int(max(children.max(initial=0), 0)) + 1


def configured(path: Path | None) -> Ranker:
    """The ranker NEXUS_RANKER names, or the one nexusai ships (None)."""
    return load(path) if path is not None else shipped()


@functools.cache
def shipped() -> Ranker:
    """The ranker in the package, trained on LoCoMo and BEAM 1-10 (see THIRD_PARTY.md)."""
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
        return _parse(data)
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


def _check_tree(tree: Mapping[str, Sequence[float]]) -> None:
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
