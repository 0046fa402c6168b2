"""RRF's worth by place: fitted to labelled fused lists, cross-validated by conversation,
and a fall in recall as the budget grows flagged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nexusai.errors import InvalidInput
from nexusai.evaluation.budgets import BUDGETS, Entry, Packed, depths, falls, within_budget
from nexusai.evaluation.calibration import cross_validated, fit, standing_floor
from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.settings import DEFAULTS


def entry(fold: tuple[str, str], first: int, evidence_at: int, many: int = 12) -> Entry:
    """A fused list of `many` short memories whose evidence sits at `evidence_at`."""
    fused = [
        FusedEpisode(
            Episode(
                first + i,
                1,
                "user",
                f"note {i} about the trip " * (1 + i % 3),
                "2026-03-01",
                "",
                {},
            ),
            -0.01 * i,  # falling, as a ranker's scores do
            {"semantic": i + 1},
        )
        for i in range(many)
    ]
    return Entry(fold, "the trip", at_every_depth(fused), (), [first + evidence_at])


def at_every_depth(fused: list[FusedEpisode]) -> dict[int, list[FusedEpisode]]:
    """One ranking's first rows as each depth a budget ranks to."""
    return {depth: fused[:depth] for depth in depths(BUDGETS)}


def entries() -> list[Entry]:
    found = []
    for c in range(4):
        for q in range(10):
            fold = ("chats" if c % 2 else "talks", f"c{c}")
            found.append(entry(fold, 1000 * c + 20 * q, (q % 3) if q < 9 else 7))
    return found


def test_the_fit_finds_evidence_nearer_the_top_more_likely() -> None:
    fitted = fit(entries())
    assert fitted.place < 0
    first, tenth = entries()[0].shallowest[0], entries()[0].shallowest[9]
    assert fitted.chance(0, first) > fitted.chance(9, tenth)


def test_each_conversation_gets_a_fit_that_left_it_out() -> None:
    folds = cross_validated(entries())
    assert set(folds) == {("talks", "c0"), ("chats", "c1"), ("talks", "c2"), ("chats", "c3")}
    alone = [e for e in entries() if e.fold == ("talks", "c0")]
    with pytest.raises(InvalidInput, match="two conversations"):
        cross_validated(alone)


def test_recall_by_budget_is_scored_and_a_fall_is_flagged() -> None:
    packed = Packed("placed")
    for found in entries():
        packed.add(found.fold, found.message, found.fused, found.standing, found.evidence)
    row = within_budget("placed", packed.given(), [e.evidence for e in entries()], ["x"] * 40)
    recall = row["placed"]["recall"]
    assert list(recall.values()) == sorted(recall.values())  # never falls: nested packing
    assert row["placed"]["falls"] == []
    assert falls({"250": 0.5, "500": 0.4, "1000": 0.6, "2000": 0.6}) == [500]


def test_recall_is_split_by_the_source_that_brought_the_evidence() -> None:
    """Evidence given by a standing rule, by one leg and by both legs, and evidence only in
    the pool: each source's part adds up to the recall, and the ceiling counts the pool."""
    packed = Packed("dense")
    found = entry(("talks", "c0"), 0, 0, many=60)
    ranked = found.shallowest
    legs = at_every_depth(
        [replace(f, ranks={**f.ranks, "keyword": 1}) if i == 1 else f for i, f in enumerate(ranked)]
    )
    rule = FusedEpisode(Episode(5_000, 1, "user", "Always be brief", "2026-03-01", "", {}), 0.9)
    evidence = [0, 1, 47, 5_000]  # 47: a long one deep in the pool, past what 250 tokens hold
    packed.add(found.fold, "the trip", legs, (rule,), evidence)
    row = within_budget("dense", packed.given(budgets=(250,)), [evidence], ["x"])["dense"]
    parts = row["foundBy"]["byCategory"]["x"]["250"]
    assert parts == {"semantic": 0.25, "keyword": 0.0, "both": 0.25, "standing": 0.25}
    assert sum(parts.values()) == row["recall"]["250"] == row["byCategory"]["x"]["250"]
    assert row["foundBy"]["overall"] == row["foundBy"]["byCategory"]["x"]
    assert row["ceiling"] == {"overall": 1.0, "byCategory": {"x": 1.0}}


def test_the_standing_floor_is_chosen_by_conversation() -> None:
    """More far rules than standingLimit (so the floor chooses among them), taking room from
    the evidence: every floor that drops them wins."""
    rules = [
        Episode(999_000 + i, 1, "user", "Always be brief " * 15, "2026-03-01", "", {})
        for i in range(DEFAULTS.standing_limit + 1)
    ]
    packed = Packed("dense")
    for c in range(4):
        for q in range(10):
            fold = ("chats" if c % 2 else "talks", f"c{c}")
            found = entry(fold, 1000 * c + 50 * q, 25 + 3 * (q % 3), many=40)  # at 250's edge
            far = tuple(FusedEpisode(r, 0.15) for r in rules)  # under a floor of 0.2
            packed.add(found.fold, found.message, found.fused, far, found.evidence)
    floors = standing_floor(packed)
    assert set(floors["chosen"].values()) == {0.2}  # the lowest floor that drops it
    assert floors["onAll"] == 0.2
    at = floors["byFloor"]
    assert at["0.2"]["talks"]["250"] > at["0.0"]["talks"]["250"]
    assert floors["crossValidated"]["talks"] == at["0.2"]["talks"]
