"""A ranker's trees as one onnxruntime `TreeEnsemble` (ai.onnx.ml opset 5), which scores a
turn's hundred candidates in a third of the numpy walk's time, and outside Python's lock,
so the rest of the service's turns go on meanwhile.

The scores are the numpy walk's to the bit: the same trees, the same `<=` splits in doubles
(a NaN goes right in both), and one thread that adds the trees' leaves in the file's order
(`Ranker.scores` documents that order; a test holds both to it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nexusai.onnx_session import session_options
from nexusai.ranking.features import FEATURES

Tree = Mapping[str, Sequence[float]]  # one tree as the model file holds it
_BRANCH_LEQ = 0  # nodes_modes: go to the true branch when the value is at most the split
_SUM = 1  # aggregate_function


def session(trees: Sequence[Tree]) -> Any:
    """An onnxruntime session whose input X (rows, features) gives Y (rows, 1): each row's
    sum of leaf values."""
    import onnxruntime

    model = _model(_Ensemble(trees)).SerializeToString()
    try:
        return onnxruntime.InferenceSession(
            model, session_options(1), providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime's own errors share no base class but this
        raise ValueError(f"onnxruntime cannot run its trees: {exc}") from None


class _Ensemble:
    """The opset's arrays: every tree's inner nodes in one list and its leaves in another,
    each child named by its index in one of the two."""

    def __init__(self, trees: Sequence[Tree]) -> None:
        self.roots: list[int] = []
        self.features: list[int] = []
        self.splits: list[float] = []
        self.true: list[tuple[int, int]] = []  # (index, 1 when a leaf)
        self.false: list[tuple[int, int]] = []
        self.leaves: list[float] = []
        for tree in trees:
            self._add(tree)

    def _add(self, tree: Tree) -> None:
        kinds = [int(f) < 0 for f in tree["feature"]]
        inner = {n: len(self.features) + i for i, n in enumerate(_where(kinds, False))}
        leaf = {n: len(self.leaves) + i for i, n in enumerate(_where(kinds, True))}

        def child(node: int) -> tuple[int, int]:
            return (leaf[node], 1) if node in leaf else (inner[node], 0)

        if not inner:  # a tree of one leaf: a split whose two sides are that leaf
            self.roots.append(len(self.features))
            self._node(0, 0.0, (leaf[0], 1), (leaf[0], 1))
        else:
            self.roots.append(inner[0])
            for n in inner:
                left, right = int(tree["left"][n]), int(tree["right"][n])
                self._node(int(tree["feature"][n]), tree["threshold"][n], child(left), child(right))
        self.leaves += [float(tree["value"][n]) for n in leaf]

    def _node(
        self, feature: int, split: float, true: tuple[int, int], false: tuple[int, int]
    ) -> None:
        self.features.append(feature)
        self.splits.append(float(split))
        self.true.append(true)
        self.false.append(false)


def _where(kinds: list[bool], wanted: bool) -> list[int]:
    return [n for n, kind in enumerate(kinds) if kind == wanted]


def _model(ensemble: _Ensemble) -> Any:
    from onnx import TensorProto, helper, numpy_helper

    def doubles(values: list[float]) -> Any:
        return numpy_helper.from_array(np.array(values, dtype=np.float64))

    node = helper.make_node(
        "TreeEnsemble",
        ["X"],
        ["Y"],
        domain="ai.onnx.ml",
        aggregate_function=_SUM,
        n_targets=1,
        post_transform=0,
        tree_roots=ensemble.roots,
        nodes_featureids=ensemble.features,
        nodes_splits=doubles(ensemble.splits),
        nodes_modes=numpy_helper.from_array(
            np.full(len(ensemble.features), _BRANCH_LEQ, dtype=np.uint8)
        ),
        nodes_truenodeids=[index for index, _ in ensemble.true],
        nodes_trueleafs=[is_leaf for _, is_leaf in ensemble.true],
        nodes_falsenodeids=[index for index, _ in ensemble.false],
        nodes_falseleafs=[is_leaf for _, is_leaf in ensemble.false],
        leaf_targetids=[0] * len(ensemble.leaves),
        leaf_weights=doubles(ensemble.leaves),
    )
    graph = helper.make_graph(
        [node],
        "ranker",
        [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [None, len(FEATURES)])],
        [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [None, 1])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 5)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=9)
