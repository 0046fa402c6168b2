"""The OpenAI-compatible endpoint, driven by the official `openai` client against a live
nexusai, with a loopback OpenAI-protocol server as the LLM."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import httpx
import openai
import pytest

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.llm import OpenAIChat
from tests.conftest import HTTP_TIMEOUT, SwitchableEmbedder
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
    # A filter, sent as the openai SDK sends what it does not know (extra_body).
    ai.chat.completions.create(
        model="nexusai",
        user="wednesday",
        messages=[{"role": "user", "content": "What is my dog called?"}],
        extra_body={"filter": {"speaker": ["assistant"]}},
    )
    assert "I adopted a puppy called Biscuit" not in system_prompt(served.llm)


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

    sessions = httpx.get(f"{served.url}/sessions", timeout=HTTP_TIMEOUT).json()
    [session] = [s for s in sessions if s["title"] == "stream"]
    stored = httpx.get(
        f"{served.url}/sessions/{session['id']}/episodes", timeout=HTTP_TIMEOUT
    ).json()
    assert [(e["speaker"], e["content"].strip()) for e in stored] == [
        ("user", "Name my dog, please"),
        ("assistant", "Your dog is called Biscuit."),
    ]


def test_the_session_header_wins_and_errors_come_in_openais_shape(served: Served) -> None:
    import httpx

    sid = httpx.post(
        f"{served.url}/sessions", json={"title": "by id"}, timeout=HTTP_TIMEOUT
    ).json()["id"]
    ai = openai.OpenAI(
        base_url=f"{served.url}/v1",
        api_key="unused",
        default_headers={"X-Nexus-Session": str(sid)},
        max_retries=0,
    )
    ai.chat.completions.create(
        model="nexusai", user="ignored", messages=[{"role": "user", "content": "hello"}]
    )
    stored = httpx.get(f"{served.url}/sessions/{sid}/episodes", timeout=HTTP_TIMEOUT).json()
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


def user_episodes(served: Served, session: str) -> list[str]:
    import httpx

    [found] = [
        s
        for s in httpx.get(f"{served.url}/sessions", timeout=HTTP_TIMEOUT).json()
        if s["title"] == session
    ]
    stored = httpx.get(f"{served.url}/sessions/{found['id']}/episodes", timeout=HTTP_TIMEOUT).json()
    return [e["content"] for e in stored if e["speaker"] == "user"]


def test_the_clients_own_retries_store_the_message_once(served: Served) -> None:
    served.llm.mode = "error"
    ai = openai.OpenAI(
        base_url=f"{served.url}/v1", api_key="unused", default_headers={"X-Nexus-Project": "p"}
    )  # the client's defaults: two retries
    with pytest.raises(openai.APIStatusError) as failed:
        ai.chat.completions.create(
            model="nexusai", user="retry", messages=[{"role": "user", "content": "remember me"}]
        )
    assert failed.value.status_code == 502
    chats = [r for r in served.llm.requests if r["path"].endswith("/chat/completions")]
    assert len(chats) == 3  # the first try and the client's two retries reached the LLM
    assert user_episodes(served, "retry") == ["remember me"]
    served.llm.mode = "ok"
    ai.chat.completions.create(
        model="nexusai", user="retry", messages=[{"role": "user", "content": "remember me"}]
    )
    assert user_episodes(served, "retry") == ["remember me"]  # the same turn, answered now
    said_again: Any = [
        {"role": "user", "content": "remember me"},
        {"role": "assistant", "content": served.llm.reply},
        {"role": "user", "content": "remember me"},
    ]
    ai.chat.completions.create(model="nexusai", user="retry", messages=said_again)
    assert user_episodes(served, "retry") == ["remember me", "remember me"]  # a new turn
    # The same conversation sent again after its answer: the client never saw the answer
    # (it would have sent it back), so this is a retry, replayed.
    ai.chat.completions.create(model="nexusai", user="retry", messages=said_again)
    assert user_episodes(served, "retry") == ["remember me", "remember me"]
    # A lone message carries no conversation: said again, it is a turn of its own.
    ai.chat.completions.create(
        model="nexusai", user="retry", messages=[{"role": "user", "content": "remember me"}]
    )
    assert user_episodes(served, "retry") == ["remember me"] * 3


def test_sampling_fields_go_to_the_llm_and_usage_comes_back(served: Served) -> None:
    ai = client(served)
    answer = ai.chat.completions.create(
        model="nexusai",
        user="s",
        messages=[{"role": "user", "content": "hi"}],
        temperature=0.2,
        top_p=0.9,
        max_tokens=40,
        stop=["\n\n"],
        seed=7,
    )
    sent = served.llm.requests[-1]["body"]
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"], sent["stop"], sent["seed"]) == (
        0.2,
        0.9,
        40,
        ["\n\n"],
        7,
    )
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (11, 5)
    chunks = list(
        ai.chat.completions.create(
            model="nexusai",
            user="s",
            messages=[{"role": "user", "content": "again"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 16


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"extra_body": None, "frequency_penaltyy": 1}, "frequency_penaltyy"),
        ({"temperature": "hot"}, "temperature"),  # checked here, never the LLM's error
        ({"temperature": 3}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"stop": 5}, "stop"),
        ({"response_format": "json"}, "response_format"),
    ],
)
def test_what_cannot_work_is_a_400_naming_the_field(
    served: Served, extra: dict[str, object], param: str
) -> None:
    import httpx

    body = {"model": "nexusai", "user": "s", "messages": [{"role": "user", "content": "hi"}]}
    extra = {k: v for k, v in extra.items() if k != "extra_body"}
    answer = httpx.post(
        f"{served.url}/v1/chat/completions",
        json={**body, **extra},
        headers={"X-Nexus-Project": "p"},
        timeout=HTTP_TIMEOUT,
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["param"], error["code"], error["type"]) == (
        param,
        "unsupported_parameter",
        "invalid_request_error",
    )
    assert (
        httpx.get(f"{served.url}/sessions", timeout=HTTP_TIMEOUT).json() == []
    )  # refused before anything was made


def test_a_bad_field_names_itself_with_a_string_code(served: Served) -> None:
    import httpx

    body = {"model": "nexusai", "user": "s", "messages": [{"role": 3, "content": "hi"}]}
    answer = httpx.post(f"{served.url}/v1/chat/completions", json=body, timeout=HTTP_TIMEOUT)
    error = answer.json()["error"]
    assert answer.status_code == 422
    assert (error["param"], error["code"]) == ("messages[0].role", "invalid_value")


def test_without_an_llm_no_session_is_made(config: Config, embedder: SwitchableEmbedder) -> None:
    import httpx

    with live_server(create_app(config, embedder)) as url:
        body = {
            "model": "nexusai",
            "user": "new-name",
            "messages": [{"role": "user", "content": "hi"}],
        }
        assert (
            httpx.post(f"{url}/v1/chat/completions", json=body, timeout=HTTP_TIMEOUT).status_code
            == 503
        )
        assert httpx.get(f"{url}/sessions", timeout=HTTP_TIMEOUT).json() == []


def test_a_non_ascii_project_name_passes_through_the_header(served: Served) -> None:
    ai = client(served, project="caf%C3%A9")  # percent-encoded: the openai SDK sends no other
    ai.chat.completions.create(
        model="nexusai", user="s", messages=[{"role": "user", "content": "hello"}]
    )
    body = {"model": "nexusai", "user": "t", "messages": [{"role": "user", "content": "hi"}]}
    raw = {b"X-Nexus-Project": "café".encode()}  # raw UTF-8, as curl sends it
    answered = httpx.post(
        f"{served.url}/v1/chat/completions", json=body, headers=raw, timeout=HTTP_TIMEOUT
    )
    assert answered.status_code == 200, answered.text
    names = [p["name"] for p in httpx.get(f"{served.url}/projects", timeout=HTTP_TIMEOUT).json()]
    assert names == ["café"]


def test_every_refusal_under_v1_comes_in_openais_shape(
    config: Config, embedder: SwitchableEmbedder
) -> None:
    keyed = Config.from_env({"NEXUS_API_KEY": "admin"}, data_dir=config.data_dir, extractor="none")
    with live_server(create_app(keyed, embedder)) as url:
        post = f"{url}/v1/chat/completions"
        admin = {"Authorization": "Bearer admin", "Content-Type": "application/json"}
        malformed = httpx.post(post, content=b'{"messages": [', headers=admin, timeout=HTTP_TIMEOUT)
        twice = httpx.post(
            post, content=b'{"user": "a", "user": "b"}', headers=admin, timeout=HTTP_TIMEOUT
        )
        latin = httpx.post(
            post, content=b'{"user": "caf\xe9"}', headers=admin, timeout=HTTP_TIMEOUT
        )
        escaped = {**admin, "X-Nexus-Project": "%ZZ"}
        said = {"user": "s", "messages": [{"role": "user", "content": "hi"}]}
        percent = httpx.post(post, json=said, headers=escaped, timeout=HTTP_TIMEOUT)
        unkeyed = httpx.post(post, json={"messages": []}, timeout=HTTP_TIMEOUT)
        text = httpx.post(
            post,
            content=b"{}",
            headers={**admin, "Content-Type": "text/plain"},
            timeout=HTTP_TIMEOUT,
        )
        listed = httpx.get(f"{url}/v1/models", timeout=HTTP_TIMEOUT)
    assert "given twice" in twice.json()["error"]["message"]
    assert "not UTF-8" in latin.json()["error"]["message"]
    assert "%25" in percent.json()["error"]["message"]
    refusals = [(malformed, 422), (twice, 422), (latin, 400), (percent, 422)]
    for answer, status in [*refusals, (unkeyed, 401), (text, 415), (listed, 401)]:
        assert answer.status_code == status
        error = answer.json()["error"]
        assert error["message"]
        assert error["code"]
        assert error["type"] == "invalid_request_error"


def test_every_chat_face_takes_settings_now_and_the_query_limit(
    config: Config, embedder: SwitchableEmbedder
) -> None:
    """`/chat` and `/v1` (extra_body) take a turn's settings and its time as `/context`
    does, and hold its message to NEXUS_MAX_QUERY_CHARS."""
    short = replace(config, max_query_chars=40)
    with (
        openai_stub() as (llm_url, state),
        live_server(create_app(short, embedder, OpenAIChat(llm_url, "llama3"))) as url,
    ):
        sid = httpx.post(f"{url}/sessions", json={"title": "t"}, timeout=HTTP_TIMEOUT).json()["id"]
        said = {"speaker": "user", "content": "The garden got tulips", "occurredAt": "2026-01-05"}
        httpx.post(f"{url}/sessions/{sid}/episodes", json=said, timeout=HTTP_TIMEOUT)
        ai = openai.OpenAI(
            base_url=f"{url}/v1",
            api_key="unused",
            default_headers={"X-Nexus-Session": str(sid)},
            max_retries=0,
        )
        turn = {"settings": {"recentLimit": 0, "timeAware": "filter"}, "now": "2026-03-01"}
        ai.chat.completions.create(
            model="nexusai",
            messages=[{"role": "user", "content": "the garden in January?"}],
            extra_body=turn,
        )
        assert "The garden got tulips" in system_prompt(state)
        ai.chat.completions.create(
            model="nexusai",
            messages=[{"role": "user", "content": "the garden in February?"}],
            extra_body=turn,
        )
        assert "The garden got tulips" not in system_prompt(state)  # February holds nothing
        chat = {"sessionId": sid, "message": "the garden in February?", **turn}
        assert httpx.post(f"{url}/chat", json=chat, timeout=HTTP_TIMEOUT).status_code == 200
        assert "The garden got tulips" not in system_prompt(state)
        with pytest.raises(
            openai.UnprocessableEntityError, match=r"limit is 40 \(NEXUS_MAX_QUERY_CHARS\)"
        ):
            ai.chat.completions.create(
                model="nexusai", messages=[{"role": "user", "content": "x" * 41}]
            )
        bad = {**chat, "settings": {"contextBudget": -1}}
        assert httpx.post(f"{url}/chat", json=bad, timeout=HTTP_TIMEOUT).status_code == 422
        with pytest.raises(openai.UnprocessableEntityError, match="now"):
            ai.chat.completions.create(
                model="nexusai",
                messages=[{"role": "user", "content": "hi"}],
                extra_body={"now": 2026},
            )
        calls = len(state.requests)
    assert calls == 3


def test_the_llms_finish_reason_comes_through_and_a_cut_stream_is_no_answer(
    served: Served,
) -> None:
    ai = client(served)
    served.llm.finish = "length"  # the LLM stopped at max_tokens
    said: list[Any] = [{"role": "user", "content": "Tell me everything about Lisbon"}]
    whole = ai.chat.completions.create(model="nexusai", user="cut", messages=said)
    assert whole.choices[0].finish_reason == "length"
    chunks = ai.chat.completions.create(model="nexusai", user="cut", messages=said, stream=True)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    served.llm.finish, served.llm.cut = "stop", True  # the upstream stream just stops
    stored = user_episodes(served, "cut")
    with httpx.Client(base_url=f"{served.url}/v1", timeout=30) as http:
        body = {"model": "nexusai", "user": "cut", "stream": True, "messages": said}
        events = http.post("/chat/completions", json=body, headers={"X-Nexus-Project": "home"})
    assert '"error"' in events.text
    assert "[DONE]" not in events.text
    assert "ended before" in events.text
    with httpx.Client(base_url=served.url, timeout=30) as http:
        sid = http.post("/sessions/resolve", json={"title": "cut", "project": "home"}).json()["id"]
        replies = [
            e for e in http.get(f"/sessions/{sid}/episodes").json() if e["speaker"] == "assistant"
        ]
    assert len(replies) == 2  # the two whole answers; the cut one is not stored as one
    assert len(user_episodes(served, "cut")) == len(stored) + 1


def test_a_history_with_tool_calls_is_refused_by_name_not_stripped(served: Served) -> None:
    ai = client(served)
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    histories: list[tuple[list[Any], str]] = [
        (
            [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                {"role": "user", "content": "And tomorrow?"},
            ],
            "messages[1].tool_calls",
        ),
        ([{"role": "tool", "content": "sunny"}, {"role": "user", "content": "ok?"}], "messages[0]"),
    ]
    for messages, named in histories:
        with pytest.raises(openai.BadRequestError) as refused:
            ai.chat.completions.create(model="nexusai", user="tools", messages=messages)
        assert named in str(refused.value)
    assert served.llm.requests == []


def test_a_stateless_client_sees_its_earlier_turns_and_a_carried_history_is_said_once(
    served: Served,
) -> None:
    """An Agents SDK model sends the new message alone: turn 2 must know turn 1. A client
    that sends the history has those turns in its own messages, not again as memories."""
    ai = client(served)
    first = [{"role": "user", "content": "My cat is called Miso"}]
    ai.chat.completions.create(model="nexusai", user="alone", messages=first)  # type: ignore[arg-type]
    second = [{"role": "user", "content": "What is my cat called?"}]
    ai.chat.completions.create(model="nexusai", user="alone", messages=second)  # type: ignore[arg-type]
    assert "My cat is called Miso" in system_prompt(served.llm)
    replied = {"role": "assistant", "content": served.llm.reply}
    again = [{"role": "user", "content": "And what is my cat called now?"}]
    carried = [*first, replied, *second, replied, *again]
    ai.chat.completions.create(model="nexusai", user="alone", messages=carried)  # type: ignore[arg-type]
    sent = served.llm.requests[-1]["body"]["messages"]
    systems = [str(m["content"]) for m in sent if m["role"] == "system"]
    assert not any("My cat is called Miso" in said for said in systems)  # not as a memory
    assert next(m["content"] for m in sent if m["role"] == "user") == "My cat is called Miso"


def test_a_filter_or_setting_refusal_names_its_field_as_param(served: Served) -> None:
    import httpx

    body = {"model": "nexusai", "user": "s", "messages": [{"role": "user", "content": "hi"}]}
    for extra, param in (
        ({"filter": {"speaker": []}}, "filter.speaker"),
        ({"settings": {"contextBudget": -1}}, "settings.contextBudget"),
    ):
        answer = httpx.post(
            f"{served.url}/v1/chat/completions",
            json={**body, **extra},
            headers={"X-Nexus-Project": "p"},
            timeout=HTTP_TIMEOUT,
        )
        assert answer.status_code == 422
        error = answer.json()["error"]
        assert error["param"] == param
        assert "Value error" not in error["message"]
