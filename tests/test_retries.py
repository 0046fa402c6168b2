"""Writes a client sends again are stored once: a chat turn retried while its slow LLM still
answers, through the real `openai` SDK and our own clients with short timeouts, against a
live service and a loopback LLM that takes its time."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import openai
import pytest

from nexusai.app import create_app
from nexusai.client import Client, UnavailableError
from nexusai.config import Config
from nexusai.llm import OpenAIChat
from tests.conftest import HTTP_TIMEOUT, SwitchableEmbedder
from tests.live_server import live_server
from tests.openai_stub import StubState, openai_stub

pytestmark = pytest.mark.model


@dataclass
class Served:
    url: str
    llm: StubState

    def llm_calls(self) -> int:
        return sum(r["path"].endswith("/chat/completions") for r in self.llm.requests)

    def said(self, session_id: int) -> list[tuple[str, str]]:
        stored = httpx.get(
            f"{self.url}/sessions/{session_id}/episodes", timeout=HTTP_TIMEOUT
        ).json()
        return [(e["speaker"], e["content"]) for e in stored]


@pytest.fixture
def served(config: Config, embedder: SwitchableEmbedder) -> Iterator[Served]:
    with openai_stub() as (llm_url, state):
        state.mode, state.stall_seconds = "stall", 2.5  # the LLM takes 2.5 s to answer
        app = create_app(config, embedder, OpenAIChat(llm_url, "llama3", timeout=30))
        with live_server(app) as url:
            yield Served(url, state)


def new_session(served: Served) -> int:
    return int(
        httpx.post(f"{served.url}/sessions", json={"title": "t"}, timeout=HTTP_TIMEOUT).json()["id"]
    )


def test_the_openai_sdk_retrying_a_slow_turn_gets_its_one_answer(served: Served) -> None:
    sid = new_session(served)
    ai = openai.OpenAI(
        base_url=f"{served.url}/v1",
        api_key="unused",
        timeout=1.0,
        max_retries=4,  # each try gives up after 1 s; the turn takes 2.5 s
        default_headers={"X-Nexus-Session": str(sid)},
    )
    answer = ai.chat.completions.create(
        model="nexusai", messages=[{"role": "user", "content": "What is my dog called?"}]
    )
    assert answer.choices[0].message.content == served.llm.reply
    assert served.llm_calls() == 1
    assert served.said(sid) == [("user", "What is my dog called?"), ("assistant", served.llm.reply)]


def test_the_same_body_after_its_answer_is_a_new_turn_on_every_face(served: Served) -> None:
    """A short message said again ("ok", "tell me more", "ok"; "sure" twice) is a turn of
    its own: a body is a retry only while its first try runs, or with the same key."""
    served.llm.mode = "ok"
    sid = new_session(served)
    with Client(served.url) as nexus:
        for said in ("ok", "tell me more", "ok"):
            nexus.chat(sid, said)
        nexus.chat(sid, "sure")
        again = httpx.post(
            f"{served.url}/chat", json={"sessionId": sid, "message": "sure"}, timeout=HTTP_TIMEOUT
        )
        assert "Idempotent-Replayed" not in again.headers
        streamed = {"sessionId": sid, "message": "sure", "stream": True}
        assert (
            "event: done"
            in httpx.post(f"{served.url}/chat", json=streamed, timeout=HTTP_TIMEOUT).text
        )
    body = {"model": "nexusai", "messages": [{"role": "user", "content": "ok"}]}
    headers = {"X-Nexus-Session": str(sid)}
    for _ in range(2):
        httpx.post(
            f"{served.url}/v1/chat/completions", json=body, headers=headers, timeout=HTTP_TIMEOUT
        )
    users = [text for speaker, text in served.said(sid) if speaker == "user"]
    assert users == ["ok", "tell me more", "ok", "sure", "sure", "sure", "ok", "ok"]
    assert served.llm_calls() == 8


def test_our_client_says_a_timeout_may_have_applied_and_a_second_call_waits(
    served: Served,
) -> None:
    sid = new_session(served)
    with (
        Client(served.url, timeout=0.5, retries=0) as hasty,
        pytest.raises(UnavailableError) as timed_out,
    ):
        hasty.chat(sid, "Where did I go in May?")
    assert timed_out.value.timed_out
    assert "timed out" in timed_out.value.detail
    assert "may have applied it" in timed_out.value.detail
    with Client(served.url, timeout=30) as patient:  # the turn still runs: this waits for it
        answer = patient.chat(sid, "Where did I go in May?")
    assert answer.reply == served.llm.reply
    assert served.llm_calls() == 1
    assert [s for s, _ in served.said(sid)] == ["user", "assistant"]


def test_an_idempotency_key_is_one_turn_and_a_new_key_is_another(served: Served) -> None:
    served.llm.mode = "ok"
    sid = new_session(served)
    with Client(served.url) as nexus:
        first = nexus.chat(sid, "continue", idempotency_key="turn-1")
        again = nexus.chat(sid, "continue", idempotency_key="turn-1")
        assert again == first
        assert len(served.said(sid)) == 2
        nexus.chat(sid, "continue", idempotency_key="turn-2")  # said again, on purpose
    assert served.llm_calls() == 2
    assert len(served.said(sid)) == 4


def test_episode_batches_with_a_key_are_stored_once(served: Served) -> None:
    sid = new_session(served)
    url = f"{served.url}/sessions/{sid}/episodes"
    batch = {"episodes": [{"speaker": "user", "content": "I live in Lisbon"}]}
    key = {"Idempotency-Key": "batch-1"}
    first = httpx.post(url, json=batch, headers=key, timeout=HTTP_TIMEOUT)
    again = httpx.post(url, json=batch, headers=key, timeout=HTTP_TIMEOUT)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    other = {"episodes": [{"speaker": "user", "content": "I live in Porto"}]}
    reused = httpx.post(url, json=other, headers=key, timeout=HTTP_TIMEOUT)
    assert reused.status_code == 422
    assert "Idempotency-Key" in reused.json()["detail"]
    assert "'batch-1'" in reused.json()["detail"]  # the key as sent, not its digest
    elsewhere = new_session(served)
    moved = httpx.post(
        f"{served.url}/sessions/{elsewhere}/episodes", json=batch, headers=key, timeout=HTTP_TIMEOUT
    )
    assert moved.status_code == 422  # the same key for another session is the client's bug
    assert served.said(elsewhere) == []
    httpx.post(url, json=batch, timeout=HTTP_TIMEOUT)  # without a key, a batch is a batch
    assert served.said(sid) == [("user", "I live in Lisbon")] * 2


def test_the_clients_add_episodes_retries_with_its_own_key(served: Served) -> None:
    sid = new_session(served)
    with Client(served.url) as nexus:
        call = nexus.add_episodes  # the same key for each of its tries
        stored = call(sid, [{"speaker": "user", "content": "I play the cello"}], "mine")
        again = call(sid, [{"speaker": "user", "content": "I play the cello"}], "mine")
    assert [e.id for e in again] == [e.id for e in stored]
    assert served.said(sid) == [("user", "I play the cello")]
