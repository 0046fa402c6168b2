"""At `fusion: "rrf"` a turn is what it was before the learned mode existed: the golden file
was written by the code of 2026-11-30 (commit 631cb9c) from the corpus built here, and
every /context answer, with explain and both legs, must match it byte for byte, but for
the fields added since (`ADDED`), each checked here against the answer's own memories."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.embedders import Embedder

GOLDEN = Path(__file__).parent / "data" / "rrf_golden.json"
WORDS = [
    "dog",
    "walk",
    "park",
    "rain",
    "coffee",
    "recipe",
    "pasta",
    "garlic",
    "trip",
    "lisbon",
    "train",
    "ticket",
    "birthday",
    "cake",
    "guitar",
    "lesson",
    "python",
    "bug",
    "deploy",
    "server",
    "garden",
    "tomato",
    "book",
    "novel",
    "chapter",
    "doctor",
    "appointment",
    "knee",
    "run",
    "marathon",
    "paint",
    "canvas",
]
QUERIES = [
    "What recipe did you give me for pasta?",
    "When is my doctor appointment about the knee?",
    "Did Alice buy the train ticket to Lisbon?",
    "How is the python server deploy going",
    "garden tomato rain",
    'NEAR( "marathon" OR -paint *',
]
SETTINGS: list[dict[str, Any]] = [
    {},
    {"keywordWeight": 0.0},
    {"semanticWeight": 0.0},
    {"keywordWeight": 5.0, "semanticLimit": 5},
    {"semanticWeight": 0.25, "keywordWeight": 2.0, "semanticLimit": 20, "recentLimit": 0},
    {"semanticWeight": 0.0, "keywordWeight": 0.0},
]


def corpus(client: TestClient) -> int:
    """Three sessions of one project, 40 turns each, from a fixed seed; the session asked."""
    rng = random.Random(20261130)
    speakers = ["user", "assistant", "Alice", "Bob"]
    session = 0
    project = client.post("/projects", json={"name": "golden"}).json()["id"]
    for number in range(3):
        made = client.post("/sessions", json={"title": f"s{number}", "projectId": project})
        session = made.json()["id"]
        batch = [
            {
                "speaker": speakers[(number + i) % 4],
                "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14))),
                "occurredAt": f"2024-0{number + 1}-{i % 28 + 1:02d}T10:{i:02d}:00Z",
            }
            for i in range(40)
        ]
        stored = client.post(f"/sessions/{session}/episodes", json={"episodes": batch})
        assert stored.status_code == 201, stored.text
    return session


def answers(client: TestClient) -> list[Any]:
    session = corpus(client)
    out = []
    for query in QUERIES:
        for settings in SETTINGS:
            body = {"sessionId": session, "message": query, "settings": settings}
            turn = client.post("/context", json={**body, "explain": True, "legs": True}).json()
            out.append(_without_clock(_without_added(turn)))
    return out


# Added to every /context answer after the golden file was written.
ADDED = ("prompt",)


def _without_added(turn: dict[str, Any]) -> dict[str, Any]:
    """The answer as the golden file has it. The block (`prompt`) must give each memory;
    a memory's `ranks` (explain) must be its two ranks by name, and the legs' `lists` the
    two lists by name."""
    prompt = turn["prompt"]
    memories = []
    for memory in turn["memories"]:
        assert memory["content"] in prompt
        if "ranks" in memory:
            by_name = {"semantic": memory.get("semanticRank"), "keyword": memory.get("keywordRank")}
            assert memory["ranks"] == {k: v for k, v in by_name.items() if v is not None}
        memories.append({k: v for k, v in memory.items() if k != "ranks"})
    legs = turn.get("legs")
    if legs is not None:
        assert legs.pop("lists") == {"semantic": legs["semantic"], "keyword": legs["keyword"]}
    return {k: v for k, v in {**turn, "memories": memories}.items() if k not in ADDED}


def _without_clock(value: Any) -> Any:
    """The answer without `createdAt`, the one field a rerun changes."""
    if isinstance(value, dict):
        return {k: _without_clock(v) for k, v in value.items() if k != "createdAt"}
    if isinstance(value, list):
        return [_without_clock(v) for v in value]
    return value


def dumped(config: Config, embedder: Embedder) -> str:
    with TestClient(create_app(config, embedder)) as client:
        return json.dumps(answers(client), indent=1, sort_keys=True) + "\n"


def test_rrf_turns_are_byte_identical_to_before_the_learned_mode(
    config: Config, embedder: Embedder
) -> None:
    assert dumped(config, embedder) == GOLDEN.read_text(encoding="utf-8")
