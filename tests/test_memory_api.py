from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

ON_BOTH_STORES = True  # its tests that open a store run on SQLite and on PostgreSQL


def new_session(client: TestClient, **body: Any) -> int:
    response = client.post("/sessions", json=body)
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def post_episode(client: TestClient, session_id: int, content: str, **extra: Any) -> Any:
    body = {"speaker": "user", "content": content, **extra}
    response = client.post(f"/sessions/{session_id}/episodes", json=body)
    assert response.status_code == 201, response.text
    stored = response.json()
    assert stored.pop("expiresAt") == extra.get("expiresAt")  # a write says when it expires
    return stored


def test_health_and_openapi(client: TestClient) -> None:
    assert client.get("/health").json() == {
        "status": "ok",
        "episodes": 0,
        "vectorsRebuilding": 0,
        "entitiesPending": 0,
        "vectorIndexOptimizing": False,
    }
    schema = client.get("/openapi.json").json()
    assert "/episodes/search" in schema["paths"]
    assert client.get("/docs").status_code == 200


def test_episode_json_is_camel_case(client: TestClient) -> None:
    sid = new_session(client, title="first")
    ep = post_episode(
        client, sid, "hello world", occurredAt="2023-05-08T13:56:00Z", metadata={"k": 1}
    )
    assert set(ep) == {
        "id",
        "sessionId",
        "speaker",
        "content",
        "occurredAt",
        "createdAt",
        "metadata",
        "imageCaption",
    }
    assert ep["occurredAt"] == "2023-05-08T13:56:00.000000Z"
    # One episode read alone also says its marks (pinned, standing).
    marks = {"pinned": False, "standing": None, "expiresAt": None}
    assert client.get(f"/episodes/{ep['id']}").json() == {**ep, **marks}


def test_batch_write_and_paged_listing(client: TestClient) -> None:
    sid = new_session(client)
    batch = [{"speaker": "user", "content": f"message {i}"} for i in range(5)]
    response = client.post(f"/sessions/{sid}/episodes", json={"episodes": batch})
    assert response.status_code == 201
    assert len(response.json()["episodes"]) == 5
    page = client.get(f"/sessions/{sid}/episodes", params={"limit": 2, "offset": 2}).json()
    assert [e["content"] for e in page] == ["message 2", "message 3"]


def test_projects_sessions_and_moves(client: TestClient) -> None:
    project = client.post("/projects", json={"name": "work"}).json()
    sid = new_session(client, projectId=project["id"])
    other = new_session(client)
    listed = client.get("/sessions", params={"projectId": project["id"]}).json()
    assert [s["id"] for s in listed] == [sid]
    moved = client.patch(f"/sessions/{other}", json={"projectId": project["id"]}).json()
    assert moved["projectId"] == project["id"]
    out = client.patch(f"/sessions/{other}", json={"projectId": None}).json()
    assert out["projectId"] is None
    renamed = client.patch(f"/sessions/{sid}", json={"title": "new"}).json()
    assert renamed == {**renamed, "title": "new", "projectId": project["id"]}
    assert client.get(f"/projects/{project['id']}").json()["name"] == "work"
    assert client.post("/projects", json={"name": "work"}).status_code == 409


def test_search_scoped_full_rows(client: TestClient) -> None:
    a, b = new_session(client), new_session(client)
    in_a = post_episode(client, a, "the zebra escaped the zoo")
    post_episode(client, b, "the zebra escaped the zoo")
    response = client.get("/episodes/search", params={"q": "zebra?", "sessionIds": str(a)})
    assert unscored(response.json()) == [in_a]
    assert response.json()[0]["score"] > 0  # BM25, higher is better
    both = client.get("/episodes/search", params={"q": "zebra", "sessionIds": f"{a},{b}"})
    assert len(both.json()) == 2


def unscored(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Search results as the episodes they are, without the search's score."""
    return [{k: v for k, v in episode.items() if k != "score"} for episode in found]


def test_delete_session_and_project_remove_episodes_from_search(client: TestClient) -> None:
    project = client.post("/projects", json={"name": "p"}).json()
    sid = new_session(client, projectId=project["id"])
    lone = new_session(client)
    post_episode(client, sid, "flamingo")
    ep = post_episode(client, lone, "flamingo")
    assert client.delete(f"/projects/{project['id']}").status_code == 204
    assert unscored(client.get("/episodes/search", params={"q": "flamingo"}).json()) == [ep]
    assert client.get(f"/sessions/{sid}").status_code == 404
    assert client.delete(f"/sessions/{lone}").status_code == 204
    assert client.get("/episodes/search", params={"q": "flamingo"}).json() == []
    assert client.get(f"/episodes/{ep['id']}").status_code == 404


def test_delete_episode(client: TestClient) -> None:
    sid = new_session(client)
    ep = post_episode(client, sid, "ocelot")
    assert client.delete(f"/episodes/{ep['id']}").status_code == 204
    assert client.delete(f"/episodes/{ep['id']}").status_code == 404
    assert client.get("/episodes/search", params={"q": "ocelot"}).json() == []


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "fragment"),
    [
        ("get", "/episodes/search", {"params": {"q": "x", "sessionIds": "1,x"}}, 422, "'x'"),
        ("get", "/episodes/search", {"params": {"q": "x", "limit": 0}}, 422, "limit"),
        ("get", "/episodes/search", {}, 422, "q"),
        ("get", "/episodes/99", {}, 404, "episode 99"),
        ("get", "/sessions/99", {}, 404, "session 99"),
        ("post", "/sessions/99/episodes", {"json": {"speaker": "u", "content": "x"}}, 404, "99"),
        ("post", "/sessions", {"json": {"projectId": 5}}, 404, "project 5"),
        ("post", "/projects", {"json": {}}, 422, "name"),
        ("get", "/episodes/abc", {}, 422, "episode_id"),
    ],
)
def test_bad_requests_get_clear_4xx(
    client: TestClient, method: str, path: str, kwargs: dict[str, Any], status: int, fragment: str
) -> None:
    response = getattr(client, method)(path, **kwargs)
    assert response.status_code == status, response.text
    assert fragment in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"speaker": "u", "content": ""}, 422, "content"),
        ({"speaker": "u", "content": "  \n "}, 422, "content"),
        ({"speaker": "u", "content": "x" * (1024 * 1024 + 1)}, 413, "1048576"),
        (
            {
                "episodes": [
                    {"speaker": "u", "content": "ok"},
                    {"speaker": "u", "content": "x" * (1024 * 1024 + 1)},
                ]
            },
            413,
            "episodes[1]: content is 1048577 bytes",
        ),
        (
            {"speaker": "u", "content": "ok", "metadata": {"blob": "x" * 65536}},
            413,
            "metadata is 65548 bytes as JSON; the limit is 65536 bytes (NEXUS_MAX_METADATA_BYTES)",
        ),
        ({"speaker": "u"}, 422, "content"),
        ({"speaker": "u", "content": "ok", "colour": "red"}, 422, "colour"),
        ({"speaker": "u", "content": "ok", "occurredAt": "yesterday"}, 422, "occurredAt"),
        ({"episodes": []}, 422, "episodes"),
        (
            {"episodes": [{"speaker": "u", "content": "ok"}, {"speaker": "u", "content": ""}]},
            422,
            "content",
        ),
    ],
)
def test_bad_episodes_are_rejected_and_nothing_changes(
    client: TestClient, body: dict[str, Any], status: int, fragment: str
) -> None:
    sid = new_session(client)
    kept = post_episode(client, sid, "already stored")
    response = client.post(f"/sessions/{sid}/episodes", json=body)
    assert response.status_code == status, response.text
    assert fragment in response.json()["detail"]
    assert client.get(f"/sessions/{sid}/episodes").json() == [kept]


def test_malformed_json_is_422(client: TestClient) -> None:
    sid = new_session(client)
    response = client.post(
        f"/sessions/{sid}/episodes",
        content=b'{"speaker": "u", "content": ',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422
    assert "JSON" in response.json()["detail"]


@pytest.mark.parametrize(
    "q",
    ["OR", "NOT", "*", '"', 'say "hi', "NEAR(a b)", "-x", "col:term", "🦙", "x" * 10_000, "", " "],
)
def test_any_query_text_returns_200(client: TestClient, q: str) -> None:
    sid = new_session(client)
    post_episode(client, sid, "col term llama")
    response = client.get("/episodes/search", params={"q": q, "sessionIds": str(sid)})
    assert response.status_code == 200, response.text
    assert isinstance(response.json(), list)


@pytest.mark.parametrize(
    ("url", "names"),
    [
        ("/sessions?projectid=1", "'projectid'"),
        ("/episodes/search?q=hi&sessionids=1", "'sessionids'"),
        ("/projects?page=2", "'page'"),
        ("/health?verbose=1", "'verbose'"),
    ],
)
def test_unknown_query_keys_are_a_422_that_names_them(
    client: TestClient, url: str, names: str
) -> None:
    answer = client.get(url)
    assert answer.status_code == 422, answer.text
    assert names in answer.json()["detail"]


def test_an_unknown_project_filter_is_a_404(client: TestClient) -> None:
    answer = client.get("/sessions?projectId=9999")
    assert answer.status_code == 404
    assert "9999" in answer.json()["detail"]


def test_batch_errors_name_the_item_in_one_shape(client: TestClient) -> None:
    sid = client.post("/sessions", json={}).json()["id"]
    good = {"speaker": "user", "content": "fine"}
    for bad in ({"speaker": "user", "content": ""}, {"speaker": "user", "content": 5}):
        answer = client.post(f"/sessions/{sid}/episodes", json={"episodes": [good, good, bad]})
        assert answer.status_code == 422
        assert answer.json()["detail"].startswith("episodes[2]"), answer.json()["detail"]
    assert client.get(f"/sessions/{sid}/episodes").json() == []


def test_sessions_by_when_their_conversation_began(client: TestClient) -> None:
    later = client.post("/sessions", json={"title": "later"}).json()["id"]
    earlier = client.post("/sessions", json={"title": "earlier"}).json()["id"]
    empty = client.post("/sessions", json={"title": "empty"}).json()["id"]
    for sid, when in ((later, "2024-06-01T10:00:00Z"), (earlier, "2023-01-01T10:00:00Z")):
        turn = {"speaker": "user", "content": "hi", "occurredAt": when}
        client.post(f"/sessions/{sid}/episodes", json=turn)
    by_date = client.get("/sessions?order=started").json()
    assert [s["id"] for s in by_date] == [earlier, later, empty]
    assert by_date[0]["startedAt"].startswith("2023-01-01T10:00:00")
    assert by_date[2]["startedAt"] is None
    assert [s["id"] for s in client.get("/sessions").json()] == [later, earlier, empty]
    assert client.get(f"/sessions/{earlier}").json()["startedAt"].startswith("2023-01-01")


def test_search_says_the_terms_it_searched_for(client: TestClient) -> None:
    from urllib.parse import unquote

    answer = client.get("/episodes/search?q=How do I configure the Qdrant collection?")
    assert unquote(answer.headers["X-Search-Terms"]) == "configure,qdrant,collection"


def test_dates_keep_four_digit_years_and_round_trip(client: TestClient) -> None:
    sid = new_session(client)
    early = {"speaker": "u", "content": "ok", "occurredAt": "0001-01-01T00:00:00Z"}
    stored = client.post(f"/sessions/{sid}/episodes", json=early).json()
    assert stored["occurredAt"] == "0001-01-01T00:00:00.000000Z"
    assert client.get(f"/sessions/{sid}").json()["startedAt"] == stored["occurredAt"]
    again = client.patch(f"/episodes/{stored['id']}", json={"occurredAt": stored["occurredAt"]})
    assert again.status_code == 200, again.text
    before_year_one = {**early, "occurredAt": "0001-01-01T00:00:00+01:00"}
    refused = client.post(f"/sessions/{sid}/episodes", json=before_year_one)
    assert refused.status_code == 422
    assert "outside 0001-01-01 to 9999-12-31" in refused.json()["detail"]


def test_a_query_key_given_twice_is_refused(client: TestClient) -> None:
    answer = client.get("/episodes/search", params=[("q", "lisbon"), ("q", "ana")])
    assert answer.status_code == 422
    assert "'q' is given more than once" in answer.json()["detail"]


def test_a_search_says_whether_a_match_is_in_the_message_or_the_turn_before(
    client: TestClient,
) -> None:
    sid = new_session(client)
    said = post_episode(client, sid, "We had creme brulee for dessert")
    after = post_episode(client, sid, "I was running along the river")
    asked: dict[str, Any] = {"q": "creme", "sessionIds": sid, "explain": True}
    found = client.get("/episodes/search", params=asked).json()
    where = {e["id"]: e["matchedIn"] for e in found}
    assert where == {said["id"]: "message", after["id"]: "turnBefore"}


def test_a_title_two_sessions_share_is_refused_by_name_not_picked_in_silence(
    client: TestClient,
) -> None:
    project = client.post("/projects", json={"name": "twice"}).json()["id"]
    first = client.post("/sessions", json={"projectId": project, "title": "notes"}).json()["id"]
    second = client.post("/sessions", json={"projectId": project, "title": "notes"}).json()["id"]
    for path, body in (
        ("/sessions/resolve", {"project": "twice", "title": "notes"}),
        (
            "/sessions/resolve/episodes",
            {"project": "twice", "title": "notes", "episodes": [{"speaker": "u", "content": "x"}]},
        ),
    ):
        answer = client.post(path, json=body)
        assert answer.status_code == 409, answer.text
        assert f"{first}, {second}" in answer.json()["detail"]
    assert client.get(f"/sessions/{first}/episodes").json() == []
    assert client.get(f"/sessions/{second}/episodes").json() == []
    alone = client.post("/sessions/resolve", json={"project": "twice", "title": "other"})
    assert alone.status_code == 200
