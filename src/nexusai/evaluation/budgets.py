"""Recall within a token budget: what a turn packed into `contextBudget` tokens finds, per
packer, overall and per question category, and how often the evidence it gives was cut to
an excerpt. The lists are packed by `orchestration.packing`, the stage every turn runs,
from the fused lists a turn of that budget asks for (as deep as the budget ranks, in
stages: `packing.stages`); a packer that is fitted (RRF's `Placed`) is
given, for each conversation, the one fitted without it (`evaluation.calibration`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from nexusai.evaluation.answers import answer_recall
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.layout import (
    MEMORIES_CAPTION,
    block_tokens,
    render,
    standing_section,
)
from nexusai.orchestration.modes import RRF
from nexusai.orchestration.packing import PACK_DEPTH, PACKERS, Packer, Packing, packing_for
from nexusai.orchestration.settings import DEFAULTS
from nexusai.orchestration.standing import carried
from nexusai.orchestration.turn import TurnPlan, TurnRequest, plan
from nexusai.orchestration.turn.pack import carry_and_pack

BUDGETS = (250, 500, 1000, 2000, 4000)
_LIMIT = DEFAULTS.standing_limit  # the standing ones a turn carries, as `budget_turn`'s

Fold = tuple[str, str]  # (dataset, conversation): what cross-validation holds out together


# What brought a given memory in: one source by its name, "both" for several, "standing".
SOURCES = ("semantic", "keyword", "both", "standing")


@dataclass(frozen=True)
class Given:
    """What a packed turn gave of one question: the ids, which came as excerpts, which
    source brought each in (`found_by`), and every id packing chose from."""

    ids: frozenset[int]
    cut: frozenset[int]
    tokens: int
    sources: dict[int, str] = field(default_factory=dict)
    pool: frozenset[int] = frozenset()
    answer: float | None = None  # answer recall: the answer's words the prompt holds


def found_by(fused: FusedEpisode) -> str:
    """Which of a turn's sources found a memory fusion gave: "both" when several did, else
    the one that did (by its name), from the memory's ranks."""
    if len(fused.ranks) > 1:
        return "both"
    return next(iter(fused.ranks), "none")


@dataclass(frozen=True)
class Entry:
    """One question as a budgeted turn packs it: fusion's list at each depth a budget
    ranks for it (`depths`), packed in stages."""

    fold: Fold
    message: str
    fused: Mapping[int, Sequence[FusedEpisode]]
    standing: Sequence[FusedEpisode]
    evidence: Sequence[int]
    answer: frozenset[str] = frozenset()  # the answer's words its evidence states

    def packing(self, budget: int) -> Packing:
        return packing_for(budget, self.message)

    def pool(self, budget: int) -> frozenset[int]:
        """Every id a turn of this budget packs from, in any of its stages."""
        staged = self.packing(budget).stages
        return frozenset(f.episode.id for s in staged for f in self.fused[s.depth])

    @property
    def shallowest(self) -> Sequence[FusedEpisode]:
        """The list every budget up to 1,000 packs from (what RRF's packer is fitted on;
        a question about order has none: `calibration.fit` leaves it out)."""
        return self.fused[PACK_DEPTH]


def depths(budgets: Sequence[int], message: str = "") -> dict[int, int]:
    """{depth: the first of `budgets` whose turn of `message` ranks that deep}: one fused
    list a depth (`packing.packing_for`)."""
    found: dict[int, int] = {}
    for budget in budgets:
        found.setdefault(packing_for(budget, message).stages[-1].depth, budget)
    return found


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
        fused: Mapping[int, Sequence[FusedEpisode]],
        standing: Sequence[FusedEpisode],
        evidence: Sequence[int],
        answer: frozenset[str] = frozenset(),
    ) -> None:
        self.entries.append(Entry(fold, message, fused, standing, evidence, answer))

    def given(
        self,
        packer_for: Callable[[Fold], Packer] | None = None,
        floor: float = DEFAULTS.standing_floor,
        budgets: Sequence[int] = BUDGETS,
    ) -> dict[int, list[Given]]:
        """{budget: what each question's turn gave}, each packed by `packer_for(its fold)`
        (the shipped packer when None) as a turn of that budget and `standingFloor` `floor`
        packs what fusion gave it (`turn.pack.carry_and_pack`, the stage `assemble` runs
        after fusion)."""
        out: dict[int, list[Given]] = {b: [] for b in budgets}
        for entry in self.entries:
            packer = packer_for(entry.fold) if packer_for else PACKERS[self.packer]
            carried_ids = {f.episode.id for f in carried(entry.standing, _LIMIT, floor)}
            for budget, given in out.items():
                turn = budget_turn(entry.message, budget, floor, packer)
                kept, memories, _ = carry_and_pack(turn, entry.fused, entry.standing, floor)
                pool = entry.pool(budget) | carried_ids
                packed = [*kept, *memories]
                ids = frozenset(f.episode.id for f in packed)
                cut = frozenset(f.episode.id for f in packed if f.excerpt is not None)
                sources = {f.episode.id: found_by(f) for f in memories}
                sources.update({f.episode.id: "standing" for f in kept})
                answer = answer_recall(entry.answer, prompt_of(kept, memories))
                tokens = block_tokens(kept, memories)
                given.append(Given(ids, cut, tokens, sources, pool, answer))
        return out


def budget_turn(message: str, budget: int, floor: float, packer: Packer) -> TurnPlan:
    """The plan of a turn of `message` at this budget and standing floor, packed by
    `packer`: what its packing reads of it (stages, excerpts, limits, order)."""
    settings = replace(DEFAULTS, context_budget=budget, standing_floor=floor)
    return plan(settings, TurnRequest(0, message), RRF(), packer=packer)


def prompt_of(standing: Sequence[FusedEpisode], memories: Sequence[FusedEpisode]) -> str:
    """The memory sections of the prompt, as a turn gives them to the model."""
    return f"{standing_section(standing)}\n\n{render(MEMORIES_CAPTION, memories)}"


def within_budget(
    packer: str,
    given: dict[int, list[Given]],
    evidence: Sequence[Sequence[int]],
    categories: Sequence[str],
) -> dict[str, Any]:
    """{packer: {"recall": {budget: r}, "byCategory": {c: {budget: r}}, "cutEvidence":
    {budget: share of the evidence given that came cut}, "tokens": {budget: mean},
    "answerRecall": {budget: mean over the questions with answer words}, "answerByCategory":
    {c: {budget: r, or None where no question of c has answer words}}, "answered": how
    many questions have answer words,
    "falls": [budgets whose recall is below the one before], "foundBy": {"overall":
    {budget: {source: the part of recall it brought}}, "byCategory": {c: ...}}, "ceiling":
    {"overall": recall of everything packing chose from, "byCategory": {c: ...}}}}."""
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
    row.update(_answer_rows(given, categories))
    row["falls"] = falls(row["recall"])
    row["foundBy"], row["ceiling"] = _by_source(given, evidence, categories)
    return {packer: row}


def _answer_rows(given: dict[int, list[Given]], categories: Sequence[str]) -> dict[str, Any]:
    """Answer recall per budget, overall and per category (`evaluation/answers.py`), over
    the questions that have answer words."""
    names = list(dict.fromkeys(categories))
    overall: dict[str, float | None] = {}
    by_category: dict[str, dict[str, float | None]] = {c: {} for c in names}
    counted = 0
    for budget, each in given.items():
        found = [
            (g.answer, c) for g, c in zip(each, categories, strict=True) if g.answer is not None
        ]
        counted = len(found)
        overall[str(budget)] = _mean([a for a, _ in found]) if found else None
        for name in names:
            mine = [a for a, c in found if c == name]
            by_category[name][str(budget)] = _mean(mine) if mine else None
    return {"answerRecall": overall, "answerByCategory": by_category, "answered": counted}


def _by_source(
    given: dict[int, list[Given]], evidence: Sequence[Sequence[int]], categories: Sequence[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Recall split by the source that brought each piece of evidence in, and the ceiling
    of the deepest pool (the largest budget's), overall and per category: where the next
    gain must come from."""
    groups: dict[str, list[int]] = {}
    for i, category in enumerate(categories):
        groups.setdefault(category, []).append(i)
    deepest = given[max(given)] if given else []
    seen = {s for each in given.values() for g in each for s in g.sources.values()}
    sources = [*SOURCES, *sorted(seen - set(SOURCES))]  # a source added finds by its name

    def split(members: Sequence[int]) -> dict[str, dict[str, float]]:
        return {
            str(budget): {
                s: _mean([_share(each[i], evidence[i], s) for i in members]) for s in sources
            }
            for budget, each in given.items()
        }

    def ceiling(members: Sequence[int]) -> float:
        if not deepest:
            return 0.0
        return _mean([_recall_of(deepest[i].pool, evidence[i]) for i in members])

    every = range(len(evidence))
    found_by = {"overall": split(every), "byCategory": {c: split(m) for c, m in groups.items()}}
    ceilings = {"overall": ceiling(every), "byCategory": {c: ceiling(m) for c, m in groups.items()}}
    return found_by, ceilings


def _share(given: Given, evidence: Sequence[int], source: str) -> float:
    """The part of this question's recall that `source` brought."""
    wanted = set(evidence)
    brought = {i for i in given.ids & wanted if given.sources.get(i) == source}
    return len(brought) / len(wanted) if wanted else 0.0


def falls(recall: dict[str, float]) -> list[int]:
    """The budgets at which recall is lower than at the budget before: a packer must never
    find less with more room."""
    budgets = sorted(int(b) for b in recall)
    pairs = itertools.pairwise(budgets)
    return [b for a, b in pairs if recall[str(b)] < recall[str(a)] - 1e-9]


def _recall(given: Given, evidence: Sequence[int]) -> float:
    return _recall_of(given.ids, evidence)


def _recall_of(ids: frozenset[int], evidence: Sequence[int]) -> float:
    wanted = set(evidence)
    return len(ids & wanted) / len(wanted) if wanted else 0.0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
