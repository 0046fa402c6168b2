from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.llm import OpenAIChat
from tests.conftest import SwitchableEmbedder
from tests.openai_stub import StubState, openai_stub


@pytest.fixture
def stub() -> Iterator[tuple[str, StubState]]:
    with openai_stub() as running:
        yield running


@pytest.fixture
def chat_client(
    config: Config, embedder: SwitchableEmbedder, stub: tuple[str, StubState]
) -> Iterator[TestClient]:
    llm = OpenAIChat(stub[0], "llama3", api_key="k-123", timeout=1.0)
    with TestClient(create_app(config, embedder, llm)) as client:
        yield client


def seed(client: TestClient) -> int:
    sid = int(client.post("/sessions").json()["id"])
    episodes = [
        {
            "speaker": "user",
            "content": "I adopted a puppy called Biscuit",
            "occurredAt": "2023-05-08T10:00:00Z",
        },
        {"speaker": "assistant", "content": "Lovely name!", "occurredAt": "2023-05-08T10:00:01Z"},
    ]
    client.post(f"/sessions/{sid}/episodes", json={"episodes": episodes})
    client.patch("/settings", json={"recentLimit": 1})
    return sid


def test_chat_turn_builds_prompt_and_stores_both_episodes(
    chat_client: TestClient, stub: tuple[str, StubState]
) -> None:
    sid = seed(chat_client)
    response = chat_client.post(
        "/chat", json={"sessionId": sid, "message": "What is my dog's name?"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["reply"] == "Your dog is called Biscuit."
    episodes = chat_client.get(f"/sessions/{sid}/episodes").json()
    assert [e["id"] for e in episodes[-2:]] == [body["userEpisodeId"], body["assistantEpisodeId"]]
    assert episodes[-1]["speaker"] == "assistant"
    [request] = stub[1].requests
    assert request["auth"] == "Bearer k-123"
    messages = request["body"]["messages"]
    assert messages[0]["role"] == "system"
    assert "8 May 2023\nuser: I adopted a puppy called Biscuit" in messages[0]["content"]
    context = body["context"]
    assert context["prompt"]
    assert context["prompt"] in messages[0]["content"]  # the same block
    assert messages[1:] == [
        {"role": "assistant", "content": "Lovely name!"},
        {"role": "user", "content": "What is my dog's name?"},
    ]


def test_llm_failure_is_502_and_keeps_the_message(
    chat_client: TestClient, stub: tuple[str, StubState]
) -> None:
    sid = seed(chat_client)
    stub[1].mode = "error"
    response = chat_client.post("/chat", json={"sessionId": sid, "message": "hello?"})
    assert response.status_code == 502
    assert "HTTP 500" in response.json()["detail"]
    stored = chat_client.get(f"/episodes/{response.json()['userEpisodeId']}").json()
    assert stored["content"] == "hello?"


def test_llm_timeout_is_502(chat_client: TestClient, stub: tuple[str, StubState]) -> None:
    sid = seed(chat_client)
    stub[1].mode = "stall"
    response = chat_client.post("/chat", json={"sessionId": sid, "message": "hello?"})
    assert response.status_code == 502
    assert "did not answer in time" in response.json()["detail"]


def test_streamed_reply(chat_client: TestClient) -> None:
    sid = seed(chat_client)
    response = chat_client.post("/chat", json={"sessionId": sid, "message": "dog?", "stream": True})
    events = [
        (block.split("\n")[0][7:], json.loads(block.split("\n")[1][6:]))
        for block in response.text.strip().split("\n\n")
    ]
    assert events[0][0] == "context"
    assert "".join(d["text"] for e, d in events if e == "delta") == "Your dog is called Biscuit. "
    assert events[-1][0] == "done"
    reply = chat_client.get(f"/episodes/{events[-1][1]['assistantEpisodeId']}").json()
    assert reply["content"] == "Your dog is called Biscuit. "


def test_streamed_failure_is_an_error_event(
    chat_client: TestClient, stub: tuple[str, StubState]
) -> None:
    sid = seed(chat_client)
    stub[1].mode = "error"
    response = chat_client.post("/chat", json={"sessionId": sid, "message": "dog?", "stream": True})
    assert "event: error" in response.text


@pytest.mark.parametrize("stream", [False, True])
def test_without_llm_chat_is_503_and_stores_nothing(client: TestClient, stream: bool) -> None:
    sid = seed(client)
    before = client.get(f"/sessions/{sid}/episodes").json()
    response = client.post(
        "/chat", json={"sessionId": sid, "message": "What is my dog's name?", "stream": stream}
    )
    assert response.status_code == 503
    assert "no LLM is configured" in response.json()["detail"]
    assert "POST /context" in response.json()["detail"]
    assert client.get(f"/sessions/{sid}/episodes").json() == before


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"sessionId": 999, "message": "hi"}, 404),
        ({"sessionId": 1, "message": ""}, 422),
        ({"sessionId": 1, "message": "   "}, 422),
        ({"message": "hi"}, 422),
        ({"sessionId": 1, "message": "x" * 10_001}, 422),
    ],
)
def test_bad_turns(client: TestClient, body: dict[str, object], status: int) -> None:
    client.post("/sessions")
    for path in ("/context", "/chat"):
        response = client.post(path, json=body)
        assert response.status_code == status, response.text
        assert response.json()["detail"]


def test_context_explain_carries_ranks_and_score(client: TestClient) -> None:
    sid = seed(client)
    client.patch("/settings", json={"keywordWeight": 1.0, "recentLimit": 0})
    ask = {"sessionId": sid, "message": "what is Biscuit?"}
    plain = client.post("/context", json=ask).json()
    assert "score" not in plain["memories"][0]
    explained = client.post("/context", json={**ask, "explain": True}).json()
    top = explained["memories"][0]
    assert top["content"] == "I adopted a puppy called Biscuit"
    assert (top["semanticRank"], top["keywordRank"]) == (1, 1)
    assert top["score"] == pytest.approx(2 / 61)
    reply = explained["memories"][1]  # found by keyword through the turn it answers
    assert (reply["content"], reply["keywordRank"]) == ("Lovely name!", 2)


def test_a_chat_turn_never_sends_more_memory_than_half_the_llms_window(
    config: Config, embedder: SwitchableEmbedder, stub: tuple[str, StubState]
) -> None:
    """With the default settings a long memory went to the LLM whole (one turn sent a 420 KB
    system prompt). `/context` stays the spec's; a chat turn packs into half the window."""
    from dataclasses import replace

    from nexusai.tokens import count_tokens

    small = replace(config, llm_context_tokens=1000)
    llm = OpenAIChat(stub[0], "llama3", timeout=5.0)
    with TestClient(create_app(small, embedder, llm)) as client:
        project = client.post("/projects", json={"name": "p"}).json()["id"]
        sid = int(client.post("/sessions", json={"projectId": project}).json()["id"])
        long = "My dog Biscuit loves the beach. " + "We walked along the shore and talked. " * 400
        client.post(f"/sessions/{sid}/episodes", json={"speaker": "user", "content": long})
        later = int(client.post("/sessions", json={"projectId": project}).json()["id"])
        spec = client.post("/context", json={"sessionId": later, "message": "my dog?"}).json()
        assert spec["memories"][0]["content"] == long  # the spec's turn: whole
        answer = client.post("/chat", json={"sessionId": later, "message": "my dog?"}).json()
        [said] = [w for w in answer["context"]["warnings"] if "NEXUS_LLM_CONTEXT_TOKENS" in w]
        assert "packed into 500 tokens" in said
        system = stub[1].requests[-1]["body"]["messages"][0]["content"]
        assert count_tokens(system) <= 600  # the memories' 500, and the system's own words
        assert "Biscuit" in system


def test_where_others_speak_every_user_role_message_names_its_speaker() -> None:
    """A user's line "Maria: I'll pay you back" must not read as Maria's own."""
    from nexusai.models import Episode
    from nexusai.orchestration.chat import build_prompt
    from nexusai.orchestration.context import Context

    said = [
        ("Maria", "Dinner is on me tonight"),
        ("user", "Maria: I'll pay you back"),
        ("assistant", "Noted."),
    ]
    recent = [
        Episode(i, 1, who, text, f"2026-03-01T10:00:0{i}Z", "2026-03-01T10:00:00Z", {})
        for i, (who, text) in enumerate(said, start=1)
    ]
    context = Context(session_id=1, message="Who pays?", recent=recent, memories=[])
    sent = [(m["role"], m["content"]) for m in build_prompt(context)[1:]]
    assert sent == [
        ("user", "Maria: Dinner is on me tonight"),
        ("user", "user: Maria: I'll pay you back"),
        ("assistant", "Noted."),
        ("user", "user: Who pays?"),
    ]
    plain = Context(session_id=1, message="Who pays?", recent=recent[1:], memories=[])
    assert build_prompt(plain)[1]["content"] == "Maria: I'll pay you back"  # two speakers only
