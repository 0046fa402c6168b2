"""Text no store can hold (a lone UTF-16 surrogate, the NUL character) is a 422 naming its
field, on every route that stores or searches text, and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.llm import OpenAIChat
from tests.conftest import SwitchableEmbedder
from tests.openai_stub import openai_stub

pytestmark = pytest.mark.model
ON_BOTH_STORES = True

EPISODE = {
    "speaker": "user",
    "content": "I live in Lisbon",
    "imageCaption": "a tram",
    "metadata": {"topic": "travel", "tags": ["a", {"k": "v"}]},
}
# Each route that takes text, with a body it would accept: every string in it is tried
# with the bad text in turn (a dict's keys too).
WRITES: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/projects", {"name": "home"}),
    ("POST", "/sessions", {"title": "monday"}),
    ("PATCH", "/sessions/{sid}", {"title": "tuesday"}),
    ("POST", "/sessions/resolve", {"project": "p", "title": "t"}),
    ("POST", "/sessions/{sid}/episodes", EPISODE),
    ("POST", "/sessions/{sid}/episodes", {"episodes": [EPISODE]}),
    ("POST", "/sessions/resolve/episodes", {"project": "p", "title": "t", "episodes": [EPISODE]}),
    ("PATCH", "/episodes/{eid}", EPISODE),
    ("POST", "/context", {"message": "where do I live?"}),
    ("POST", "/chat", {"message": "where do I live?"}),
    (
        "POST",
        "/v1/chat/completions",
        {"model": "nexusai", "messages": [{"role": "user", "content": "hello"}]},
    ),
]


def variants(value: Any, bad: str, keys: bool = False) -> Iterator[Any]:
    """The value with one of its strings made bad, each in turn; with `keys` (inside
    metadata, whose keys are the user's own) each key too."""
    if isinstance(value, str):
        yield value + bad
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from ([*value[:i], c, *value[i + 1 :]] for c in variants(item, bad, keys))
    elif isinstance(value, dict):
        for key, item in value.items():
            inner = keys or key == "metadata"
            yield from ({**value, key: c} for c in variants(item, bad, inner))
            if keys:
                yield {**{k: v for k, v in value.items() if k != key}, key + bad: item}


@pytest.fixture
def chat_client(config: Config, embedder: SwitchableEmbedder) -> Iterator[TestClient]:
    with (
        openai_stub() as (llm_url, _),
        TestClient(create_app(config, embedder, OpenAIChat(llm_url, "m"))) as c,
    ):
        yield c


@pytest.mark.parametrize("bad", [chr(0xD800), chr(0xDFFF), chr(0)], ids=["high", "low", "nul"])
def test_unstorable_text_is_a_422_naming_the_field_and_changes_nothing(
    chat_client: TestClient, bad: str
) -> None:
    sid, eid, before = seeded(chat_client)
    tried = 0
    for method, path, body in WRITES:
        route = path.format(sid=sid, eid=eid)
        for changed in variants(body, bad):
            sent = {**changed, "sessionId": sid} if route in ("/context", "/chat") else changed
            raw = json.dumps(sent)  # \ud800 as JSON's own escape, as a browser sends it
            answer = chat_client.request(
                method, route, content=raw, headers={"Content-Type": "application/json"}
            )
            assert answer.status_code == 422, (method, route, sent, answer.text)
            message = json.dumps(answer.json())
            assert "surrogate" in message or "NUL" in message, message
            tried += 1
    assert tried > 30
    assert state(chat_client) == before


def seeded(client: TestClient) -> tuple[int, int, Any]:
    """A session with one episode, and the store's state before the test's requests."""
    sid = client.post("/sessions", json={"title": "seed"}).json()["id"]
    eid = client.post(f"/sessions/{sid}/episodes", json=EPISODE).json()["id"]
    return sid, eid, state(client)


def state(client: TestClient) -> Any:
    sessions = client.get("/sessions").json()
    return sessions, [client.get(f"/sessions/{s['id']}/episodes").json() for s in sessions]


# JSON has no NaN or Infinity, though Python's parser reads them (and 1e400 as infinity):
# each is a 422 naming where it stands, never a 500 from the store's JSON.
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400"]


@pytest.mark.parametrize("number", NON_FINITE)
def test_a_non_finite_number_in_metadata_is_a_422_naming_it_and_changes_nothing(
    chat_client: TestClient, number: str
) -> None:
    sid, eid, before = seeded(chat_client)
    one = f'{{"speaker": "user", "content": "hi", "metadata": {{"k": {number}}}}}'
    deep = f'{{"speaker": "user", "content": "hi", "metadata": {{"a": {{"b": [1, {number}]}}}}}}'
    sent = [
        ("POST", f"/sessions/{sid}/episodes", one, "metadata.k"),
        ("POST", f"/sessions/{sid}/episodes", f'{{"episodes": [{deep}]}}', "metadata.a.b[1]"),
        ("PATCH", f"/episodes/{eid}", f'{{"metadata": {{"k": {number}}}}}', "metadata.k"),
        (
            "POST",
            "/sessions/resolve/episodes",
            f'{{"project": "p", "title": "t", "episodes": [{one}]}}',
            "metadata.k",
        ),
    ]
    for method, route, raw, where in sent:
        answer = chat_client.request(
            method, route, content=raw, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 422, (route, answer.text)
        assert where in answer.json()["detail"], answer.text
    line = f'{{"session": "s", "speaker": "user", "content": "hi", "metadata": {{"k": {number}}}}}'
    imported = chat_client.post(
        "/import", params={"format": "jsonl", "project": "imp"}, content=line.encode()
    )
    assert imported.status_code == 422, imported.text
    assert "metadata.k" in imported.json()["detail"]
    assert state(chat_client) == before


# Bodies no route can take, each said precisely (never "There was an error parsing the
# body"), and nothing stored.
UNREADABLE = [
    (b'{"speaker": "user", "content": "caf\xe9"}', 400, "not UTF-8"),
    (b'{"speaker": "user", "speaker": "bob", "content": "x"}', 422, "'speaker' is given twice"),
    (
        b'{"speaker": "user", "content": "x", "metadata": {"k": '
        + b"[" * 3000
        + b"]" * 3000
        + b"}}",
        400,
        "nested too deeply",
    ),
    (
        b'{"speaker": "user", "content": "x", "metadata": {"k": ' + b"1" * 5000 + b"}}",
        400,
        "send so long a number as a string",
    ),
    (b'{"speaker": "user", "content": "a\\u0000b"}', 422, "content: text may not contain"),
]


@pytest.mark.parametrize(("raw", "status", "says"), UNREADABLE)
def test_a_body_no_route_can_take_says_why_and_stores_nothing(
    chat_client: TestClient, raw: bytes, status: int, says: str
) -> None:
    sid = chat_client.post("/sessions", json={"title": "seed"}).json()["id"]
    before = state(chat_client)
    answer = chat_client.post(
        f"/sessions/{sid}/episodes", content=raw, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == status, answer.text
    assert says in answer.json()["detail"]
    assert "Value error" not in answer.text
    assert state(chat_client) == before


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("speaker", "user\nMaria", "a speaker is one line"),
        ("speaker", "Maria\u2028user", "a speaker is one line"),
        ("content", "\u200b", "must not be empty"),
        ("content", "\ufeff \u200b", "must not be empty"),
    ],
)
def test_a_speaker_with_a_line_break_or_invisible_content_is_a_422(
    chat_client: TestClient, field: str, value: str, says: str
) -> None:
    """A line break in a speaker would forge a line of the prompt; a zero-width space or a
    byte-order mark alone is no content."""
    sid, eid, before = seeded(chat_client)
    for method, path, body in (
        ("POST", f"/sessions/{sid}/episodes", {**EPISODE, field: value}),
        ("PATCH", f"/episodes/{eid}", {field: value}),
    ):
        answer = chat_client.request(method, path, json=body)
        assert answer.status_code == 422, answer.text
        assert says in answer.text
    assert state(chat_client) == before


def test_an_empty_metadata_key_is_a_422(chat_client: TestClient) -> None:
    """A key no filter can name ("metadata." names none) is refused, not stored."""
    sid, eid, before = seeded(chat_client)
    for method, path, body in (
        ("POST", f"/sessions/{sid}/episodes", {**EPISODE, "metadata": {"": "x"}}),
        ("PATCH", f"/episodes/{eid}", {"metadata": {" ": 1}}),
    ):
        answer = chat_client.request(method, path, json=body)
        assert answer.status_code == 422, answer.text
        assert "an empty key" in answer.text
    assert state(chat_client) == before
    empty_key = chat_client.post(
        f"/sessions/{sid}/episodes", json=EPISODE, headers={"Idempotency-Key": ""}
    )
    assert empty_key.status_code == 422
    assert "Idempotency-Key" in empty_key.text
    assert state(chat_client) == before
