"""Replays agree with live turns: on development-set questions, a turn assembled from one
read of the question (as `nexus eval` and `nexus ranker train` make them) gives what the
live turn gives, memory by memory: ids, scores, both ranks, the fused list packing chose
from and the standing ones. Two implementations of one answer, compared answer by answer
(as qdrant-client's congruence tests compare its local mode with the server)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from nexusai.embedders import Embedder
from nexusai.evaluation.budgets import BUDGETS, Packed
from nexusai.evaluation.datasets import load_beam, load_locomo
from nexusai.evaluation.harness import SWEEP
from nexusai.evaluation.replay import (
    Imported,
    Read,
    asked_as_a_turn,
    budgeted,
    imported,
    read,
    replayed,
)
from nexusai.orchestration.context import Context
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.layout import memory_tokens
from nexusai.orchestration.packing import packing_for
from nexusai.orchestration.settings import DEFAULTS, RuntimeSettings
from nexusai.ranking.model import shipped

QUESTIONS = 8  # per conversation: every pair, limit and budget of each is compared
LIMITS = (5, 10, 20)
PAIRS = [(1.0, 0.0), (0.0, 1.0), *((1.0, w) for w in SWEEP)]


def _shown(fused: list[FusedEpisode]) -> list[tuple[int, float, int | None, int | None, int]]:
    return [
        (f.episode.id, f.score, f.ranks.get("semantic"), f.ranks.get("keyword"), f.tokens)
        for f in fused
    ]


def _same(live: Context, replay: Context) -> None:
    assert live.fused, "a turn that finds nothing compares nothing"
    assert _shown(replay.memories) == _shown(live.memories)
    assert _shown(replay.fused) == _shown(live.fused)
    assert _shown(replay.standing) == _shown(live.standing)
    assert replay.warnings == live.warnings


@pytest.fixture(scope="module", params=["locomo", "beam"])
def chat(request: pytest.FixtureRequest, dev_data: Path, minilm: Embedder) -> Iterator[Imported]:
    """The first conversation of each kind, imported as `nexus eval` imports it."""
    if request.param == "locomo":
        evalset = load_locomo(dev_data / "locomo" / "locomo10.json", ["conv-26"])
    else:
        evalset = load_beam(dev_data / "beam", ["1"])
    item = evalset.conversations[0]
    with imported(replace(item, questions=item.questions[: QUESTIONS * 3]), minilm) as chat:
        del chat.questions[QUESTIONS:]
        assert len(chat.questions) == QUESTIONS
        yield chat


def test_a_replay_of_one_read_is_the_live_turn_for_every_pair_and_limit(
    chat: Imported, minilm: Embedder
) -> None:
    for question in chat.questions:
        for limit in LIMITS:
            asked = read(chat, minilm, question.text, replace(DEFAULTS, semantic_limit=limit))
            for semantic, keyword in PAIRS:
                settings = replace(
                    DEFAULTS,
                    semantic_weight=semantic,
                    keyword_weight=keyword,
                    semantic_limit=limit,
                )
                live = asked_as_a_turn(chat, minilm, question.text, settings)
                _same(live, replayed(asked, settings))


def _budgeted(fusion: str, semantic: float = 1.0, keyword: float = 1.0) -> RuntimeSettings:
    return replace(
        DEFAULTS,
        fusion=fusion,
        semantic_weight=semantic,
        keyword_weight=keyword,
        context_budget=BUDGETS[-1],
    )


def test_budgets_and_the_learned_mode_replay_the_deep_read(
    chat: Imported, minilm: Embedder
) -> None:
    """One deep read serves every budget (cut to the depth each budget ranks), each leg
    alone and both, and the learned mode at every limit and budget: its ranker scores the
    same candidates a live turn's does."""
    ranker = shipped()
    for question in chat.questions:
        deep = read(chat, minilm, question.text, _budgeted("rrf"))
        for budget in BUDGETS:
            for fusion, pair in (("rrf", (1.0, 0.0)), ("rrf", (0.0, 1.0)), ("learned", (1, 1))):
                settings = replace(_budgeted(fusion, *pair), context_budget=budget)
                live = asked_as_a_turn(chat, minilm, question.text, settings)
                depth = packing_for(budget, question.text).stages[-1].depth
                _same(live, replayed(deep.at(depth), settings, ranker))
                lists = budgeted(deep, _budgeted(fusion, *pair), ranker)
                assert _shown(lists[depth]) == _shown(live.fused)
                _same_given(live, lists, deep, budget, "dense" if fusion == "learned" else "placed")
        for limit in LIMITS:
            settings = replace(DEFAULTS, fusion="learned", semantic_limit=limit)
            live = asked_as_a_turn(chat, minilm, question.text, settings)
            _same(live, replayed(deep, settings, ranker))


def _same_given(
    live: Context,
    lists: dict[int, list[FusedEpisode]],
    deep: Read,
    budget: int,
    packer: str,
) -> None:
    """The eval's budget rows (`Packed.given`) from the replayed lists give what the live
    turn gave: the same memories and standing ones, the same excerpts, the same tokens."""
    packed = Packed(packer)
    question = deep.request.message
    packed.add(("set", "chat"), question, lists, deep.gathered.standing_candidates, [])
    [given] = packed.given(budgets=(budget,))[budget]
    assert given.ids == {f.episode.id for f in [*live.standing, *live.memories]}
    assert given.cut == {f.episode.id for f in live.memories if f.excerpt is not None}
    assert given.tokens == memory_tokens(live)


def test_a_deep_read_cut_to_a_depth_is_the_read_at_that_depth(
    chat: Imported, minilm: Embedder
) -> None:
    """What the ranker's training compares RRF with: the deep read's first rows."""
    for question in chat.questions:
        deep = read(chat, minilm, question.text, _budgeted("rrf"))
        for limit in LIMITS:
            settings = replace(DEFAULTS, keyword_weight=1.0, semantic_limit=limit)
            live = asked_as_a_turn(chat, minilm, question.text, settings)
            _same(live, replayed(deep.at(limit), settings))
