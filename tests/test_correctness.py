"""What a new user found wrong, each as a test that failed before its fix (issue #13)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.config import Config
from tests.conftest import SwitchableEmbedder

ON_BOTH_STORES = True  # its tests that open a store run on SQLite and on PostgreSQL


def session(client: TestClient, **body: Any) -> int:
    response = client.post("/sessions", json=body)
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def episode(client: TestClient, sid: int, content: str, **extra: Any) -> dict[str, Any]:
    response = client.post(
        f"/sessions/{sid}/episodes", json={"speaker": "user", "content": content, **extra}
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


def keyword(client: TestClient, q: str) -> list[int]:
    return [e["id"] for e in client.get("/episodes/search", params={"q": q}).json()]


# -- data safety ---------------------------------------------------------------------------


def test_ids_are_never_handed_out_again(client: TestClient) -> None:
    project = client.post("/projects", json={"name": "a"}).json()["id"]
    sid = session(client, projectId=project)
    first = episode(client, sid, "one")["id"]
    last = episode(client, sid, "two")["id"]
    assert client.delete(f"/projects/{project}").status_code == 204
    again = client.post("/projects", json={"name": "a"}).json()["id"]
    assert again > project
    new_sid = session(client, projectId=again)
    assert new_sid > sid
    assert episode(client, new_sid, "three")["id"] > last > first
    client.delete(f"/sessions/{new_sid}")
    assert session(client) > new_sid


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/sessions", {"projectId": True}, "projectId"),
        ("/sessions", {"projectId": "1"}, "projectId"),
        ("/sessions", {"title": 5}, "title"),
        ("/context", {"sessionId": 1, "message": "hi", "explain": "yes"}, "explain"),
        ("/context", {"sessionId": "1", "message": "hi"}, "sessionId"),
        ("/chat", {"sessionId": 1, "message": "hi", "stream": 1}, "stream"),
        ("/sessions/1/episodes", {"speaker": "u", "content": 7}, "content"),
        ("/vectors/search", {"vector": [0.1] * 384, "limit": "3"}, "limit"),
    ],
)
def test_request_bodies_are_strict_and_name_the_field(
    client: TestClient, path: str, body: dict[str, Any], field: str
) -> None:
    session(client)
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    assert field in response.json()["detail"].split(":")[0]
    assert client.get("/sessions").headers["X-Total-Count"] == "1"  # nothing else created


def test_metadata_patch_merges_and_never_drops_what_is_indexed(client: TestClient) -> None:
    sid = session(client)
    stored = episode(
        client,
        sid,
        "Look what I found",
        metadata={"diaId": "D1:2", "mood": "happy", "nested": {"a": 1, "b": 2}},
        imageCaption="a red kayak on a lake",
    )
    eid = stored["id"]
    assert keyword(client, "kayak") == [eid]
    patched = client.patch(
        f"/episodes/{eid}", json={"metadata": {"tag": "x", "mood": None, "nested": {"b": None}}}
    ).json()
    assert patched["metadata"] == {"diaId": "D1:2", "tag": "x", "nested": {"a": 1}}
    assert patched["imageCaption"] == "a red kayak on a lake"
    assert keyword(client, "kayak") == [eid]  # the caption still finds it
    cleared = client.patch(f"/episodes/{eid}", json={"metadata": None}).json()
    assert cleared["metadata"] == {}
    client.patch(f"/episodes/{eid}", json={"imageCaption": None})
    assert keyword(client, "kayak") == []


def test_back_dating_a_turn_moves_it_and_reindexes_its_neighbours(
    config: Config, embedder: SwitchableEmbedder
) -> None:
    app = create_app(config, embedder)
    with TestClient(app) as client:
        sid = session(client)
        times = ["2024-01-01T10:00:00Z", "2024-01-01T11:00:00Z", "2024-01-01T12:00:00Z"]
        a, b, c = (
            episode(client, sid, text, occurredAt=when)["id"]
            for text, when in zip(["alpha", "bravo", "charlie"], times, strict=True)
        )
        moved = client.patch(f"/episodes/{c}", json={"occurredAt": "2024-01-01T10:30:00Z"})
        assert moved.status_code == 200, moved.text
        assert moved.json()["occurredAt"] == "2024-01-01T10:30:00.000000Z"
        listed = client.get(f"/sessions/{sid}/episodes").json()
        assert [e["id"] for e in listed] == [a, c, b]
        store = app.state.memory.store
        assert store.episodes.get(c).context_text == "alpha"  # a role is not written
        assert store.episodes.get(b).context_text == "charlie"
        # Re-embedded by the write, or by the thread behind the writes where it claimed
        # them first (an earlier write woke it): either way, soon, not at the next start.
        deadline = time.monotonic() + 30
        while app.state.memory.count_pending_vectors():
            assert time.monotonic() < deadline, "the moved turn's neighbours were never re-embedded"
            time.sleep(0.01)
        bad = client.patch(f"/episodes/{c}", json={"occurredAt": "yesterday"})
        assert bad.status_code == 422


def test_a_long_message_is_stored_whole_and_found_by_its_last_words(
    config: Config, embedder: SwitchableEmbedder
) -> None:
    """348,853 bytes, the size of a real answer that was refused and lost before."""
    body = ("The gradient of the loss with respect to each weight is computed. " * 5400)[
        :348_800
    ] + " Finally the zanzibar step."
    long = body + "x" * (348_853 - len(body.encode()))
    app = create_app(config, embedder)
    with TestClient(app) as client:
        sid = session(client)
        stored = episode(client, sid, long)
        assert len(stored["content"].encode()) == 348_853
        assert keyword(client, "zanzibar") == [stored["id"]]  # all of it is keyword-indexed
        assert app.state.memory.vectors.count() == 1  # one vector: its opening
        too_big = {"speaker": "u", "content": "y" * (1024 * 1024 + 1)}
        batch = {"episodes": [{"speaker": "u", "content": "fine"}, too_big]}
        refused = client.post(f"/sessions/{sid}/episodes", json=batch)
        assert refused.status_code == 413
        assert refused.json()["detail"].startswith("episodes[1]: content is 1048577 bytes")
        assert client.get(f"/sessions/{sid}").status_code == 200
        assert client.get("/health").json()["episodes"] == 1  # all or nothing


# -- HTTP details --------------------------------------------------------------------------


def test_ready_says_what_is_loaded(client: TestClient) -> None:
    ready = client.get("/ready")
    for _ in range(600):  # 503 while the start reads ahead (NEXUS_WARM_SECONDS at most)
        if ready.status_code != 503:
            break
        time.sleep(0.1)
        ready = client.get("/ready")
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "embedder": "local:all-MiniLM-L6-v2",
        "memory": "in-process",
        "pendingVectors": 0,
    }


def test_a_body_that_is_not_json_is_415_with_a_hint(client: TestClient) -> None:
    response = client.post("/projects", content=b'{"name": "x"}')
    assert response.status_code == 415
    assert "Content-Type: application/json" in response.json()["detail"]
    form = client.post("/projects", data={"name": "x"})
    assert form.status_code == 415
    assert client.post("/sessions").status_code == 201  # no body needs no type


def test_lists_say_their_total_and_where_the_next_page_is(client: TestClient) -> None:
    ids = [session(client) for _ in range(5)]
    first = client.get("/sessions", params={"limit": 2})
    assert [s["id"] for s in first.json()] == ids[:2]
    assert first.headers["X-Total-Count"] == "5"
    assert first.headers["Link"] == '<http://testserver/sessions?limit=2&offset=2>; rel="next"'
    last = client.get("/sessions", params={"limit": 2, "offset": 4})
    assert [s["id"] for s in last.json()] == ids[4:]
    assert "Link" not in last.headers
    episodes = client.get(f"/sessions/{ids[0]}/episodes")
    assert episodes.headers["X-Total-Count"] == "0"


@pytest.mark.parametrize(
    "path",
    [
        "/episodes/99999999999999999999",
        "/entities/99999999999999999999",
        "/projects/9223372036854775808",
        "/sessions/0",
        "/episodes?ids=1,99999999999999999999",
        "/sessions?projectId=99999999999999999999",
        "/entities?sessionId=99999999999999999999",
        "/episodes/search?q=x&sessionIds=99999999999999999999",
    ],
)
def test_an_id_out_of_range_is_422_everywhere(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 422, response.text
    limit = "greater than or equal to 1" if path.endswith("/0") else "9223372036854775807"
    assert limit in response.text or "2**63 - 1" in response.text


def test_entities_take_q_or_prefix_not_both(client: TestClient) -> None:
    sid = session(client)
    response = client.get("/entities", params={"sessionId": sid, "q": "x", "prefix": "sw"})
    assert response.status_code == 422
    assert "not both" in response.json()["detail"]


def test_each_operation_documents_only_its_own_errors(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths["/health"]["get"]["responses"]) == {"200"}
    expected = {"201", "401", "403", "409", "415", "422"}
    assert set(paths["/projects"]["post"]["responses"]) == expected
    assert "502" in paths["/chat"]["post"]["responses"]
    assert "502" not in paths["/context"]["post"]["responses"]
    assert "X-Total-Count" in paths["/sessions"]["get"]["responses"]["200"]["headers"]
