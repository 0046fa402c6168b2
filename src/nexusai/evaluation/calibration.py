"""RRF's worth by place, fitted: the chance that a memory of a fused list answers, from its
place, its cost in tokens and whether it is an excerpt (`packing.PlacedWorth`), so that a
budgeted RRF turn can weigh evidence per token as the learned mode does. A logistic fit,
each dataset weighed alike; `nexus eval` scores each conversation by the fit that left it
out, and prints the fit on all of them (what `packing.PLACED_WORTH` holds)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from nexusai.errors import InvalidInput
from nexusai.evaluation.budgets import Entry, Fold
from nexusai.orchestration.packing import Placed, PlacedWorth, shortest_options

L2 = 1.0  # a light pull to 0: four weights, thousands of rows
STEPS = 30  # Newton's method: converged in well under this


def features(entry: Entry) -> npt.NDArray[np.float64]:
    """A row per memory of the fused list: 1, log(place + 1), log(tokens), excerpt."""
    options = shortest_options(entry.fused, entry.message)
    return np.array(
        [
            [1.0, math.log(place + 1), math.log(max(f.tokens, 1)), float(f.excerpt is not None)]
            for place, f in enumerate(options)
        ]
    ).reshape(-1, 4)


def fit(entries: Sequence[Entry]) -> PlacedWorth:
    """The logistic fit to every memory of `entries` (evidence or not)."""
    sizes = Counter(e.fold[0] for e in entries)
    rows, labels, weights = [], [], []
    for entry in entries:
        matrix = features(entry)
        evidence = set(entry.evidence)
        rows.append(matrix)
        labels.append([float(f.episode.id in evidence) for f in entry.fused])
        weights.append(np.full(len(matrix), 1.0 / sizes[entry.fold[0]]))
    x, y, w = np.vstack(rows), np.concatenate(labels), np.concatenate(weights)
    if not y.any():
        raise InvalidInput("no evidence is among the fused lists: nothing to fit")
    return PlacedWorth(*(round(float(b), 3) for b in _logistic(x, y, w * len(w) / w.sum())))


def _logistic(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], w: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    beta = np.zeros(x.shape[1])
    for _ in range(STEPS):
        p = 1.0 / (1.0 + np.exp(-x @ beta))
        gradient = x.T @ (w * (p - y)) + L2 * beta
        hessian = (x * (w * p * (1 - p))[:, None]).T @ x + L2 * np.eye(len(beta))
        beta -= np.linalg.solve(hessian, gradient)
    return beta


def cross_validated(entries: Sequence[Entry]) -> dict[Fold, Placed]:
    """For each conversation, the packer fitted to every other one."""
    folds = list(dict.fromkeys(e.fold for e in entries))
    if len(folds) < 2:
        raise InvalidInput("cross-validation needs at least two conversations")
    return {fold: Placed(fit([e for e in entries if e.fold != fold])) for fold in folds}
