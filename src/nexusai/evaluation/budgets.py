"""Recall within a token budget: what a turn packed into `contextBudget` tokens finds, per
packer, overall and per question category, and how often the evidence it gives was cut to
an excerpt. The lists are packed by `orchestration.packing`, the stage every turn runs,
from the fused list a budgeted turn asks for; a packer that is fitted (RRF's `Placed`) is
given, for each conversation, the one fitted without it (`evaluation.calibration`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.layout import block_tokens
from nexusai.orchestration.packing import PACKERS, Packer, pack_turn
from nexusai.orchestration.settings import DEFAULTS, MAX_MEMORIES

BUDGETS = (250, 500, 1000, 2000, 4000)

Fold = tuple[str, str]  # (dataset, conversation): what cross-validation holds out together


@dataclass(frozen=True)
class Given:
    """What a packed turn gave of one question: the ids, and which came as excerpts."""

    ids: frozenset[int]
    cut: frozenset[int]
    tokens: int


@dataclass(frozen=True)
class Entry:
    """One question as a budgeted turn packs it."""

    fold: Fold
    message: str
    fused: Sequence[FusedEpisode]
    standing: Sequence[FusedEpisode]
    evidence: Sequence[int]


@dataclass
class Packed:
    """Every question's fused list (in question order), to be packed at every budget by
    the packer its mode packs with."""

    packer: str
    entries: list[Entry] = field(default_factory=list)

    def add(
        self,
        fold: Fold,
        message: str,
        fused: Sequence[FusedEpisode],
        standing: Sequence[FusedEpisode],
        evidence: Sequence[int],
    ) -> None:
        self.entries.append(Entry(fold, message, fused, standing, evidence))

    def given(
        self,
        packer_for: Callable[[Fold], Packer] | None = None,
        floor: float = DEFAULTS.standing_floor,
        budgets: Sequence[int] = BUDGETS,
    ) -> dict[int, list[Given]]:
        """{budget: what each question's turn gave}, each packed by `packer_for(its fold)`
        (the shipped packer when None), its standing candidates kept to `floor`
        (`standingFloor`)."""
        out: dict[int, list[Given]] = {b: [] for b in budgets}
        for entry in self.entries:
            packer = packer_for(entry.fold) if packer_for else PACKERS[self.packer]
            standing = [f for f in entry.standing if kept_at(f, floor)]
            for budget, given in out.items():
                kept, memories = pack_turn(
                    entry.fused, standing, entry.message, budget, MAX_MEMORIES, packer
                )
                packed = [*kept, *memories]
                ids = frozenset(f.episode.id for f in packed)
                cut = frozenset(f.episode.id for f in packed if f.excerpt is not None)
                given.append(Given(ids, cut, block_tokens(kept, memories)))
        return out


def kept_at(candidate: FusedEpisode, floor: float) -> bool:
    """Whether a turn at `standingFloor` `floor` carries this standing candidate, as
    `orchestration.standing` decides."""
    return candidate.episode.pinned or floor <= 0 or candidate.score >= floor


def within_budget(
    packer: str,
    given: dict[int, list[Given]],
    evidence: Sequence[Sequence[int]],
    categories: Sequence[str],
) -> dict[str, Any]:
    """{packer: {"recall": {budget: r}, "byCategory": {c: {budget: r}}, "cutEvidence":
    {budget: share of the evidence given that came cut}, "tokens": {budget: mean},
    "falls": [budgets whose recall is below the one before]}}."""
    names = list(dict.fromkeys(categories))
    row: dict[str, Any] = {"recall": {}, "byCategory": {c: {} for c in names}}
    row["cutEvidence"], row["tokens"] = {}, {}
    for budget, each in given.items():
        recalls = [_recall(g, e) for g, e in zip(each, evidence, strict=True)]
        row["recall"][str(budget)] = _mean(recalls)
        for name in names:
            chosen = [r for r, c in zip(recalls, categories, strict=True) if c == name]
            row["byCategory"][name][str(budget)] = _mean(chosen)
        found = [(g.ids & set(e), g.cut & set(e)) for g, e in zip(each, evidence, strict=True)]
        row["cutEvidence"][str(budget)] = sum(len(c) for _, c in found) / max(
            sum(len(f) for f, _ in found), 1
        )
        row["tokens"][str(budget)] = _mean([float(g.tokens) for g in each])
    row["falls"] = falls(row["recall"])
    return {packer: row}


def falls(recall: dict[str, float]) -> list[int]:
    """The budgets at which recall is lower than at the budget before: a packer must never
    find less with more room."""
    budgets = sorted(int(b) for b in recall)
    pairs = itertools.pairwise(budgets)
    return [b for a, b in pairs if recall[str(b)] < recall[str(a)] - 1e-9]


def _recall(given: Given, evidence: Sequence[int]) -> float:
    wanted = set(evidence)
    return len(given.ids & wanted) / len(wanted) if wanted else 0.0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
