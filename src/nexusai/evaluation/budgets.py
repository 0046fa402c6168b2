"""Recall within a token budget: what a turn packed into `contextBudget` tokens finds, per
packer, overall and per question category, and how often the evidence it gives was cut to
an excerpt. The lists are packed by `orchestration.packing`, the stage every turn runs,
from the fused list a budgeted turn asks for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.packing import PACKERS, pack_turn
from nexusai.orchestration.settings import MAX_MEMORIES

BUDGETS = (250, 500, 1000, 2000, 4000)


@dataclass(frozen=True)
class Given:
    """What a packed turn gave of one question: the ids, and which came as excerpts."""

    ids: frozenset[int]
    cut: frozenset[int]
    tokens: int


@dataclass
class Packed:
    """Per packer and budget, what each question's turn gave (in question order): the
    packer the mode packs with, and the others beside it for comparison."""

    packers: Sequence[str] = tuple(PACKERS)
    given: dict[str, dict[int, list[Given]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.given = {name: {b: [] for b in BUDGETS} for name in self.packers}

    def add(
        self, message: str, fused: Sequence[FusedEpisode], standing: Sequence[FusedEpisode] = ()
    ) -> None:
        """One question's fused list, packed by every packer at every budget beside its
        standing candidates, as a turn packs them."""
        for name, budgets in self.given.items():
            for budget, given in budgets.items():
                kept, memories = pack_turn(fused, standing, message, budget, MAX_MEMORIES, name)
                packed = [*kept, *memories]
                ids = frozenset(f.episode.id for f in packed)
                cut = frozenset(f.episode.id for f in packed if f.excerpt is not None)
                given.append(Given(ids, cut, sum(f.tokens for f in packed)))


def within_budget(
    packed: Packed, evidence: Sequence[Sequence[int]], categories: Sequence[str]
) -> dict[str, Any]:
    """{packer: {"recall": {budget: r}, "byCategory": {c: {budget: r}}, "cutEvidence":
    {budget: share of the evidence given that came cut}, "tokens": {budget: mean}}}."""
    names = list(dict.fromkeys(categories))
    out: dict[str, Any] = {}
    for packer, budgets in packed.given.items():
        row: dict[str, Any] = {"recall": {}, "byCategory": {c: {} for c in names}}
        row["cutEvidence"], row["tokens"] = {}, {}
        for budget, given in budgets.items():
            recalls = [_recall(g, e) for g, e in zip(given, evidence, strict=True)]
            row["recall"][str(budget)] = _mean(recalls)
            for name in names:
                chosen = [r for r, c in zip(recalls, categories, strict=True) if c == name]
                row["byCategory"][name][str(budget)] = _mean(chosen)
            found = [(g.ids & set(e), g.cut & set(e)) for g, e in zip(given, evidence, strict=True)]
            row["cutEvidence"][str(budget)] = sum(len(c) for _, c in found) / max(
                sum(len(f) for f, _ in found), 1
            )
            row["tokens"][str(budget)] = _mean([float(g.tokens) for g in given])
        out[packer] = row
    return out


def _recall(given: Given, evidence: Sequence[int]) -> float:
    wanted = set(evidence)
    return len(given.ids & wanted) / len(wanted) if wanted else 0.0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
