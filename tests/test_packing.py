"""A turn's memories packed into a token budget (`contextBudget`): never over it, long
episodes cut to the passage that holds the message's words, offsets that point at it, and
without a budget the spec's turn unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.packing import (
    Dense,
    Greedy,
    excerpt_span,
    memory_line,
    pack,
    stems_of,
)
from nexusai.tokens import count_tokens

pytestmark = pytest.mark.model

FILLER = (
    "Here is a long answer about many other things: the weather, the trains, the museums, "
    "the food and the people, said at length so that it costs a lot of tokens. "
)
LONG = FILLER * 6 + "Your cat Miso is allergic to salmon, so avoid fish treats. " + FILLER * 6


def episode(i: int, content: str, speaker: str = "user") -> Episode:
    return Episode(i, 1, speaker, content, "2026-03-01T10:00:00.000000Z", "", {})


def fused(*contents: str) -> list[FusedEpisode]:
    """Best first, as the learned mode gives them: log-odds falling with rank."""
    return [
        FusedEpisode(episode(i + 1, c), -0.1 * i, i + 1, None, placed_by="ranker")
        for i, c in enumerate(contents)
    ]


def test_a_budget_of_zero_is_the_spec_turn() -> None:
    ranked = fused(*(f"note {i}" for i in range(20)))
    assert pack(ranked, "note", 0, 5, "dense") == ranked[:5]  # the same objects, uncounted


def test_greedy_lets_one_long_reply_take_the_budget_and_dense_does_not() -> None:
    ranked = fused(LONG, "My cat is Miso", "Miso hates baths", "Miso was born in May")
    budget = count_tokens(memory_line(ranked[0].episode, LONG)) + 5  # the reply, and no more
    greedy = Greedy().pack(ranked, "what is my cat allergic to?", budget, 50)
    dense = Dense().pack(ranked, "what is my cat allergic to?", budget, 50)
    assert [f.episode.id for f in greedy] == [1]  # the reply, whole, and nothing else fits
    assert [f.episode.id for f in dense] == [1, 2, 3, 4]
    assert dense[0].excerpt is not None
    assert "allergic to salmon" in dense[0].content


@pytest.mark.parametrize("budget", [20, 60, 150, 400, 1000, 5000])
def test_a_packed_turn_never_exceeds_its_budget(budget: int) -> None:
    ranked = fused(LONG, *(f"short note {i} about Miso" for i in range(60)), LONG * 2)
    for packer in (Dense(), Greedy()):
        packed = packer.pack(ranked, "Miso allergic", budget, 50)
        assert sum(f.tokens for f in packed) <= budget
        for memory in packed:
            assert memory.tokens == count_tokens(memory_line(memory.episode, memory.content))
        ids = [f.episode.id for f in packed]
        assert ids == sorted(ids)  # fusion's order kept


def test_an_excerpt_holds_the_words_asked_about_and_opens_when_none() -> None:
    start, end = excerpt_span(LONG, stems_of("allergic to salmon?"))
    assert "allergic to salmon" in LONG[start:end]
    assert excerpt_span(LONG, stems_of("nothing"))[0] == 0  # the opening, what the vector read
    assert excerpt_span("short", stems_of("short")) == (0, 5)


def memories(client: TestClient, sid: int, message: str, **settings: Any) -> Any:
    body = {"sessionId": sid, "message": message, "settings": {"recentLimit": 0, **settings}}
    return client.post("/context", json=body).json()


def test_the_api_reports_tokens_and_excerpts_whose_offsets_point_at_the_text(
    client: TestClient,
) -> None:
    sid = client.post("/sessions", json={}).json()["id"]
    said = [
        {"speaker": "assistant", "content": LONG},
        *({"speaker": "user", "content": f"Miso note {i}"} for i in range(4)),
    ]
    client.post(f"/sessions/{sid}/episodes", json={"episodes": said})
    spec = memories(client, sid, "What is Miso allergic to?", keywordWeight=1)
    assert "tokens" not in spec
    assert all("tokens" not in m and "excerpt" not in m for m in spec["memories"])
    assert len(spec["memories"]) == 5
    asked = {"fusion": "learned", "contextBudget": 200}  # the learned mode packs by worth
    packed = memories(client, sid, "What is Miso allergic to?", **asked)
    assert packed["budget"] == 200
    assert packed["tokens"] == sum(m["tokens"] for m in packed["memories"]) <= 200
    cut = [m for m in packed["memories"] if "excerpt" in m]
    assert cut, packed
    whole = client.get(f"/episodes/{cut[0]['id']}").json()["content"]
    span = cut[0]["excerpt"]
    assert whole[span["start"] : span["end"]] == cut[0]["content"]
    assert span["length"] == len(whole)
    assert "allergic to salmon" in cut[0]["content"]


def test_memory_limit_caps_a_budgeted_turn_and_semantic_limit_an_unbudgeted_one(
    client: TestClient,
) -> None:
    sid = client.post("/sessions", json={}).json()["id"]
    said = [{"speaker": "user", "content": f"Miso note {i}"} for i in range(12)]
    client.post(f"/sessions/{sid}/episodes", json={"episodes": said})
    for fusion in ("rrf", "learned"):
        asked: dict[str, Any] = {"fusion": fusion, "semanticLimit": 3, "keywordWeight": 1}
        assert len(memories(client, sid, "Miso note", **asked)["memories"]) == 3
        budgeted = memories(client, sid, "Miso note", contextBudget=1000, **asked)
        assert len(budgeted["memories"]) == 12  # the budget decides, up to memoryLimit
        capped = memories(client, sid, "Miso note", contextBudget=1000, memoryLimit=4, **asked)
        assert len(capped["memories"]) == 4


def test_the_budget_is_a_setting_checked_like_the_others(client: TestClient) -> None:
    assert client.get("/settings").json()["contextBudget"] == 0
    refused = client.patch("/settings", json={"contextBudget": -1})
    assert refused.status_code == 422
    assert "contextBudget must be from 0 to 32000" in refused.json()["detail"]
    assert client.patch("/settings", json={"contextBudget": 1000}).json()["contextBudget"] == 1000


def test_memories_can_come_in_time_order(client: TestClient) -> None:
    sid = client.post("/sessions", json={}).json()["id"]
    said = [
        {
            "speaker": "user",
            "content": f"Miso trip {day}",
            "occurredAt": f"2026-03-0{day}T10:00:00Z",
        }
        for day in (3, 1, 2)
    ]
    client.post(f"/sessions/{sid}/episodes", json={"episodes": said})
    ranked = memories(client, sid, "Miso trip 2", keywordWeight=1)["memories"]
    dated = memories(client, sid, "Miso trip 2", keywordWeight=1, memoryOrder="time")["memories"]
    assert sorted(m["id"] for m in dated) == sorted(m["id"] for m in ranked)
    assert [m["occurredAt"][:10] for m in dated] == ["2026-03-01", "2026-03-02", "2026-03-03"]
