"""What packing is fitted to, by conversation.

RRF's worth by place: the chance that a memory of a fused list answers, from its place,
its cost in tokens and whether it is an excerpt (`packing.PlacedWorth`), so that a
budgeted RRF turn can weigh evidence per token as the learned mode does. A logistic fit,
each dataset weighed alike; `nexus eval` scores each conversation by the fit that left it
out, and prints the fit on all of them (what `packing.PLACED_WORTH` holds). And the
`standingFloor` default, chosen the same way on the learned turns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from nexusai.errors import InvalidInput
from nexusai.evaluation.budgets import Entry, Fold, Packed
from nexusai.orchestration.packing import (
    PACK_DEPTH,
    Placed,
    PlacedWorth,
    shortest_options,
    stems_of,
    terms,
)
from nexusai.ranking.model import probabilities

L2 = 1.0  # a light pull to 0: four weights, thousands of rows
STEPS = 30  # Newton's method: converged in well under this


def features(entry: Entry) -> npt.NDArray[np.float64]:
    """A row per memory of the fused list: 1, log(place + 1), log(tokens), excerpt."""
    options = shortest_options(entry.shallowest, stems_of(entry.message))
    return np.array([terms(place, f) for place, f in enumerate(options)]).reshape(-1, 4)


def fit(entries: Sequence[Entry]) -> PlacedWorth:
    """The logistic fit to every memory of `entries` (evidence or not), in the lists every
    budget up to 1,000 tokens packs (a question about order has none: its list is as deep
    as any, and the fit stays on the places most turns pack)."""
    entries = [e for e in entries if PACK_DEPTH in e.fused]
    sizes = Counter(e.fold[0] for e in entries)
    rows, labels, weights = [], [], []
    for entry in entries:
        matrix = features(entry)
        evidence = set(entry.evidence)
        rows.append(matrix)
        labels.append([float(f.episode.id in evidence) for f in entry.shallowest])
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
        p = probabilities(x @ beta)
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


# The `standingFloor` values compared, and the budgets a floor is chosen on.
FLOORS = (0.0, 0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)
FLOOR_BUDGETS = (250, 500, 1000, 2000)


def standing_floor(packed: Packed) -> dict[str, Any]:
    """`standingFloor` chosen by conversation: for each one, the floor whose turns find the
    most on every other conversation (recall within `FLOOR_BUDGETS`, each dataset weighed
    alike), and what that floor finds on it. Returns each floor's recall per dataset and
    budget, the floor each conversation was given, the recall so found, and the floor
    chosen on all of them (what the setting's default holds)."""
    folds = list(dict.fromkeys(e.fold for e in packed.entries))
    recall = {floor: _recalls(packed, floor) for floor in FLOORS}
    chosen = {
        fold: max(FLOORS, key=lambda f: _score(recall[f], [x for x in folds if x != fold]))
        for fold in folds
    }
    held: dict[str, dict[int, list[float]]] = {}
    for fold, floor in chosen.items():
        for budget, found in recall[floor][fold].items():
            held.setdefault(fold[0], {}).setdefault(budget, []).extend(found)
    return {
        "byFloor": {str(f): _by_dataset(recall[f]) for f in FLOORS},
        "chosen": {f"{d}:{c}": floor for (d, c), floor in chosen.items()},
        "crossValidated": {d: {str(b): _mean(r) for b, r in v.items()} for d, v in held.items()},
        "onAll": max(FLOORS, key=lambda f: _score(recall[f], folds)),
    }


def _recalls(packed: Packed, floor: float) -> dict[Fold, dict[int, list[float]]]:
    """Each conversation's recall per question, per budget, at this floor."""
    given = packed.given(floor=floor, budgets=FLOOR_BUDGETS)
    out: dict[Fold, dict[int, list[float]]] = {}
    for budget, each in given.items():
        for entry, found in zip(packed.entries, each, strict=True):
            wanted = set(entry.evidence)
            share = len(found.ids & wanted) / len(wanted) if wanted else 0.0
            out.setdefault(entry.fold, {}).setdefault(budget, []).append(share)
    return out


def _score(recall: dict[Fold, dict[int, list[float]]], folds: Sequence[Fold]) -> float:
    """Mean recall over `folds` and every budget, each dataset weighed alike."""
    by_dataset: dict[str, list[float]] = {}
    for fold in folds:
        for found in recall[fold].values():
            by_dataset.setdefault(fold[0], []).extend(found)
    return _mean([_mean(v) for v in by_dataset.values()])


def _by_dataset(recall: dict[Fold, dict[int, list[float]]]) -> dict[str, dict[str, float]]:
    pooled: dict[str, dict[int, list[float]]] = {}
    for (dataset, _), budgets in recall.items():
        for budget, found in budgets.items():
            pooled.setdefault(dataset, {}).setdefault(budget, []).extend(found)
    return {d: {str(b): _mean(v) for b, v in budgets.items()} for d, budgets in pooled.items()}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
