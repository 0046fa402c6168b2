"""The OpenAI-compatible endpoint, driven by the official `openai` client against a live
nexusai, with a loopback OpenAI-protocol server as the LLM."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import openai
import pytest

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.llm import OpenAIChat
from tests.conftest import SwitchableEmbedder
from tests.live_server import live_server
from tests.openai_stub import StubState, openai_stub


@dataclass
class Served:
    url: str
    llm: StubState


@pytest.fixture
def served(config: Config, embedder: SwitchableEmbedder) -> Iterator[Served]:
    with openai_stub() as (llm_url, state):
        app = create_app(config, embedder, OpenAIChat(llm_url, "llama3"))
        with live_server(app) as url:
            yield Served(url, state)


def client(served: Served, project: str = "home") -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{served.url}/v1",
        api_key="unused",
        default_headers={"X-Nexus-Project": project},
        max_retries=0,
    )


def system_prompt(state: StubState) -> str:
    return str(state.requests[-1]["body"]["messages"][0]["content"])


def test_a_fact_told_in_one_conversation_reaches_another_of_the_project(served: Served) -> None:
    ai = client(served)
    told = ai.chat.completions.create(
        model="nexusai",
        user="monday",
        messages=[{"role": "user", "content": "I adopted a puppy called Biscuit"}],
    )
    assert told.choices[0].message.content == "Your dog is called Biscuit."
    assert served.llm.requests[-1]["body"]["model"] == "llama3"  # ours, mapped
    served.llm.reply = "Biscuit, the puppy."
    asked = ai.chat.completions.create(
        model="llama3.1:8b",  # any other name is passed through
        user="tuesday",
        messages=[
            {"role": "system", "content": "You are a terse helper."},
            {"role": "user", "content": "What is my dog called?"},
        ],
    )
    assert asked.choices[0].message.content == "Biscuit, the puppy."
    assert served.llm.requests[-1]["body"]["model"] == "llama3.1:8b"
    prompt = system_prompt(served.llm)
    assert prompt.startswith("You are a terse helper.")  # the application's own, extended
    assert "I adopted a puppy called Biscuit" in prompt
    other_project = client(served, "work")
    other_project.chat.completions.create(
        model="nexusai", user="x", messages=[{"role": "user", "content": "my dog?"}]
    )
    assert "Biscuit" not in system_prompt(served.llm)  # no memory crosses projects


def test_streaming_in_openais_format_and_both_turns_stored(served: Served) -> None:
    ai = client(served)
    pieces = [
        chunk.choices[0].delta.content or ""
        for chunk in ai.chat.completions.create(
            model="nexusai",
            user="stream",
            stream=True,
            messages=[{"role": "user", "content": "Name my dog, please"}],
        )
    ]
    assert "".join(pieces).strip() == "Your dog is called Biscuit."
    import httpx

    sessions = httpx.get(f"{served.url}/sessions").json()
    [session] = [s for s in sessions if s["title"] == "stream"]
    stored = httpx.get(f"{served.url}/sessions/{session['id']}/episodes").json()
    assert [(e["speaker"], e["content"].strip()) for e in stored] == [
        ("user", "Name my dog, please"),
        ("assistant", "Your dog is called Biscuit."),
    ]


def test_the_session_header_wins_and_errors_come_in_openais_shape(served: Served) -> None:
    import httpx

    sid = httpx.post(f"{served.url}/sessions", json={"title": "by id"}).json()["id"]
    ai = openai.OpenAI(
        base_url=f"{served.url}/v1",
        api_key="unused",
        default_headers={"X-Nexus-Session": str(sid)},
        max_retries=0,
    )
    ai.chat.completions.create(
        model="nexusai", user="ignored", messages=[{"role": "user", "content": "hello"}]
    )
    stored = httpx.get(f"{served.url}/sessions/{sid}/episodes").json()
    assert stored[0]["content"] == "hello"
    anonymous = openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.UnprocessableEntityError, match="X-Nexus-Session"):
        anonymous.chat.completions.create(
            model="nexusai", messages=[{"role": "user", "content": "hi"}]
        )
    assert [m.id for m in ai.models.list()] == ["nexusai", "llama3"]


def test_without_an_llm_it_is_503_in_openais_shape(
    config: Config, embedder: SwitchableEmbedder
) -> None:
    with live_server(create_app(config, embedder)) as url:
        ai = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.InternalServerError) as refused:
            ai.chat.completions.create(
                model="nexusai", user="u", messages=[{"role": "user", "content": "hi"}]
            )
    assert refused.value.status_code == 503
    assert "no LLM is configured" in str(refused.value)
