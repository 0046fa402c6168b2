"""Project API keys: made and revoked by the CLI, stored as a keyed hash, and a project key
never reaches another project's data, on any route the OpenAPI schema lists."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from nexusai.app import create_app
from nexusai.cli import cli
from nexusai.client import Client, ForbiddenError
from nexusai.config import Config
from nexusai.memory.extractors import SpacyExtractor
from nexusai.memory.keys import KeyStore
from nexusai.memory.service import Memory
from tests.conftest import HTTP_TIMEOUT, SwitchableEmbedder, entities_settled
from tests.live_server import live_server

ON_BOTH_STORES = True  # its tests that open a store run on SQLite and on PostgreSQL

ADMIN = "admin-key-for-tests"
MARKER = "zebracorn"  # in every text of the other project, and nowhere else


@pytest.fixture
def served(
    config: Config, embedder: SwitchableEmbedder, spacy_extractor: SpacyExtractor
) -> Iterator[dict[str, Any]]:
    """The service with an admin key, on each store (`config` is SQLite's or PostgreSQL's)."""
    config = dataclasses.replace(config, api_key=ADMIN)
    memory = Memory.open(config, embedder, extractor=spacy_extractor)
    with TestClient(create_app(config, embedder, memory=memory)) as client:
        admin = {"Authorization": f"Bearer {ADMIN}"}
        ids: dict[str, Any] = {}
        for name in ("alpha", "bravo"):
            project = client.post("/projects", json={"name": name}, headers=admin).json()["id"]
            session = client.post(
                "/sessions", json={"projectId": project, "title": f"{name} chat"}, headers=admin
            ).json()["id"]
            text = (
                "Lena Okafor moved to Lisbon"
                if name == "alpha"
                else (f"Quentin {MARKER.title()} moved to Reykjavik with the {MARKER} plans")
            )
            episode = client.post(
                f"/sessions/{session}/episodes",
                json={"speaker": "user", "content": text},
                headers=admin,
            ).json()["id"]
            ids[name] = {"project": project, "session": session, "episode": episode}
        entities_settled(client, admin)
        entity = client.get(
            f"/entities?sessionId={ids['bravo']['session']}&prefix=reykjavik", headers=admin
        ).json()
        ids["bravo"]["entity"] = entity[0]["id"]
        keys = KeyStore(memory.store)
        ids["key"] = keys.create("alpha", name="alpha app")
        ids["reader"] = keys.create("alpha", read_only=True)
        yield {"client": client, "ids": ids, "keys": keys, "admin": admin}


def _as(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_a_project_key_works_in_its_own_project(served: dict[str, Any]) -> None:
    client, ids = served["client"], served["ids"]
    own = _as(ids["key"])
    alpha = ids["alpha"]
    assert [p["name"] for p in client.get("/projects", headers=own).json()] == ["alpha"]
    assert [s["id"] for s in client.get("/sessions", headers=own).json()] == [alpha["session"]]
    found = client.get("/episodes/search?q=lisbon", headers=own).json()
    assert [e["id"] for e in found] == [alpha["episode"]]
    made = client.post("/sessions", json={"title": "new"}, headers=own)
    assert made.status_code == 201
    assert made.json()["projectId"] == alpha["project"], "a new session goes in its project"
    turn = client.post(
        "/context", json={"sessionId": made.json()["id"], "message": "Lisbon"}, headers=own
    )
    assert turn.status_code == 200
    assert [m["id"] for m in turn.json()["memories"]] == [alpha["episode"]]


def test_a_read_only_key_reads_and_cannot_write(served: dict[str, Any]) -> None:
    client, ids = served["client"], served["ids"]
    reader, session = _as(ids["reader"]), ids["alpha"]["session"]
    assert client.get(f"/sessions/{session}/episodes", headers=reader).status_code == 200
    body = {"sessionId": session, "message": "Lisbon"}
    assert client.post("/context", json=body, headers=reader).status_code == 200
    refused = client.post(
        f"/sessions/{session}/episodes", json={"speaker": "user", "content": "x"}, headers=reader
    )
    assert refused.status_code == 403
    assert refused.json()["detail"] == (
        f"this key is read-only: POST /sessions/{session}/episodes writes"
    )
    assert client.delete(f"/sessions/{session}", headers=reader).status_code == 403
    assert client.get(f"/sessions/{session}", headers=_as(ids["key"])).status_code == 200


def test_a_project_key_forgets_only_in_its_own_project(served: dict[str, Any]) -> None:
    client, ids = served["client"], served["ids"]
    own, reader = _as(ids["key"]), _as(ids["reader"])
    theirs = ids["bravo"]["session"]
    refused = client.delete("/episodes", params={"sessionIds": str(theirs)}, headers=own)
    assert refused.status_code == 404  # as if it were not there
    assert client.delete("/episodes", params={"speaker": "user"}, headers=reader).status_code == 403
    # A dry run only counts: a read-only key may ask it, of its own project only.
    counted = client.delete(
        "/episodes", params={"speaker": "user", "dryRun": "true"}, headers=reader
    )
    assert counted.status_code == 200
    assert counted.json()["dryRun"] is True
    sneaky = {"speaker": "user", "dryRun": ["true", "false"]}
    assert client.delete("/episodes", params=sneaky, headers=reader).status_code == 403
    done = client.delete("/episodes", params={"speaker": "user"}, headers=own).json()
    assert done["episodeIds"] == [ids["alpha"]["episode"]]
    admin = served["admin"]
    assert client.get(f"/episodes/{ids['bravo']['episode']}", headers=admin).status_code == 200
    # Its own project's retention, and its export, but nothing of another project's.
    alpha, bravo = ids["alpha"]["project"], ids["bravo"]["project"]
    kept = {"retentionDays": 90}
    assert client.patch(f"/projects/{alpha}", json=kept, headers=own).json()["retentionDays"] == 90
    assert client.patch(f"/projects/{alpha}", json=kept, headers=reader).status_code == 403
    assert client.patch(f"/projects/{bravo}", json=kept, headers=own).status_code == 404
    assert client.get(f"/projects/{alpha}/export", headers=reader).status_code == 200
    assert client.get(f"/projects/{bravo}/export", headers=own).status_code == 404


def test_settings_and_metrics_need_the_admin_key(served: dict[str, Any]) -> None:
    client, own = served["client"], _as(served["ids"]["key"])
    for method, path in [
        ("GET", "/settings"),
        ("PATCH", "/settings"),
        ("GET", "/metrics"),
        ("POST", "/projects"),
    ]:
        answer = client.request(method, path, json={} if method != "GET" else None, headers=own)
        assert answer.status_code == 403, path
        assert "needs the admin key" in answer.json()["detail"]
    assert client.get("/settings", headers=served["admin"]).status_code == 200


def test_revoked_and_wrong_keys_are_refused_counted_and_never_logged(
    served: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    client, ids, keys = served["client"], served["ids"], served["keys"]
    key_id = int(ids["key"].split("_")[1])
    keys.revoke(key_id)
    counted = _refusals(client, served["admin"])
    with caplog.at_level(logging.WARNING):
        assert client.get("/sessions", headers=_as(ids["key"])).status_code == 401
        assert client.get("/sessions", headers=_as(ids["key"] + "x")).status_code == 401
        assert client.get("/sessions", headers=_as("nxk_99_nothing")).status_code == 401
        assert client.get("/sessions").status_code == 401
    assert ids["key"] not in caplog.text
    assert "refused a request to /sessions: unauthorized" in caplog.text
    assert _refusals(client, served["admin"]) == counted + 4


def _refusals(client: TestClient, admin: dict[str, str]) -> float:
    """The process-wide count of requests refused for want of a valid key."""
    metrics = client.get("/metrics", headers=admin).text
    line = 'nexus_auth_refused_total{reason="unauthorized"} '
    found = [row for row in metrics.splitlines() if row.startswith(line)]
    return float(found[0][len(line) :]) if found else 0.0


def test_only_a_keyed_hash_is_stored(served: dict[str, Any], config: Config) -> None:
    key = served["ids"]["key"]
    secret = key.split("_", 2)[2]
    if config.database_url:  # the whole database, as text
        import psycopg

        with psycopg.connect(config.database_url) as conn:
            rows = conn.execute("SELECT * FROM api_keys").fetchall()
        assert rows
        assert secret not in repr(rows)
        return
    stored = b"".join(p.read_bytes() for p in config.data_dir.glob("nexus.db*"))
    assert secret.encode() not in stored
    assert (config.data_dir / "api-keys.secret").stat().st_mode & 0o077 == 0


def test_keys_from_the_command_line(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path)]
    alone = CliRunner(env={"NEXUS_API_KEY": None})
    refused = alone.invoke(cli, ["keys", "create", "--project", "nope", *data])
    assert refused.exit_code == 2
    assert "NEXUS_API_KEY is not set" in refused.output
    assert not (tmp_path / "nexus.db").exists()  # a command that refuses touches nothing
    forced = alone.invoke(cli, ["keys", "create", "--project", "nope", "--force", *data])
    assert "project 'nope' does not exist" in forced.output  # --force goes on
    runner = CliRunner(env={"NEXUS_API_KEY": "admin-secret"})
    missing = runner.invoke(cli, ["keys", "create", "--project", "nope", *data])
    assert missing.exit_code == 1
    assert "project 'nope' does not exist" in missing.output
    from nexusai.memory.sqlite.store import SqliteStore

    with SqliteStore(tmp_path / "nexus.db") as store:
        store.projects.create("team")
    made = runner.invoke(cli, ["keys", "create", "--project", "team", "--read-only", *data])
    assert made.exit_code == 0, made.output
    key = made.stdout.strip()
    assert key.startswith("nxk_1_")
    listed = runner.invoke(cli, ["keys", "list", *data]).output
    assert listed.startswith("1\tteam\tread-only\t-\t")
    assert key not in listed
    assert runner.invoke(cli, ["keys", "revoke", "1", *data]).output == "revoked key 1\n"
    again = runner.invoke(cli, ["keys", "revoke", "1", *data])
    assert again.exit_code == 1
    assert "revoked already" in again.output


def test_with_a_project_key_and_no_admin_key_every_request_needs_a_key(
    tmp_path: Path, embedder: SwitchableEmbedder
) -> None:
    config = Config.from_env({}, data_dir=tmp_path / "data", extractor="none")
    with TestClient(create_app(config, embedder)) as client:
        assert client.post("/projects", json={"name": "solo"}).status_code == 201
        key = KeyStore(client.app.state.memory.store).create("solo")  # type: ignore[attr-defined]
        assert client.get("/projects").status_code == 401
        assert client.get("/projects", headers=_as(key)).status_code == 200


# -- every route, generated from the OpenAPI schema ------------------------------------------

OPEN = {"/health", "/ready", "/docs", "/openapi.json"}
AIMED = {"projectId", "sessionId", "sessionIds", "ids", "project", "q"}  # sent when optional


def test_no_route_gives_a_project_key_another_projects_data(served: dict[str, Any]) -> None:
    """Each operation of the schema, called with the alpha key and everything pointing at
    bravo: ids in the path, the query, the headers and the body. None may answer with
    bravo's data, and none may change it."""
    client, ids = served["client"], served["ids"]
    schema = client.get("/openapi.json").json()
    before = _bravo_state(client, served)
    tried = 0
    for path, operations in schema["paths"].items():
        if path in OPEN:
            continue
        for method, operation in operations.items():
            request = _aimed_at_bravo(schema, path, operation, ids["bravo"])
            request["headers"].update(_as(ids["key"]))
            answer = client.request(method.upper(), **request)
            where = f"{method.upper()} {path}"
            assert answer.status_code < 500, where
            assert MARKER not in answer.text.lower(), f"{where} leaked bravo's text"
            if 200 <= answer.status_code < 300:
                assert _no_bravo_ids(answer, ids["bravo"]), f"{where} answered with bravo's ids"
            tried += 1
    assert tried >= 30
    assert _bravo_state(client, served) == before, "bravo's data changed"
    # The test can fail: the admin key, aimed the same way, does see bravo.
    found = client.get(f"/episodes/search?q={MARKER}", headers=served["admin"])
    assert MARKER in found.text.lower()


def _aimed_at_bravo(
    schema: dict[str, Any], path: str, operation: dict[str, Any], bravo: dict[str, int]
) -> dict[str, Any]:
    values = {
        "project_id": bravo["project"],
        "session_id": bravo["session"],
        "episode_id": bravo["episode"],
        "entity_id": bravo["entity"],
        "projectId": bravo["project"],
        "sessionId": bravo["session"],
        "sessionIds": str(bravo["session"]),
        "ids": str(bravo["episode"]),
        "q": MARKER,
        "project": "bravo",
        "format": "jsonl",
        "prefix": "",
        "limit": 5,
        "budget": 0,
        "offset": 0,
        "detail": "true",
        "explain": "true",
        "order": "started",
        "dryRun": "true",
        "after": "2000-01-01T00:00:00Z",
        "before": "2999-01-01T00:00:00Z",
        "speaker": "user",
        "metadata.*": None,
        "X-Nexus-Session": str(bravo["session"]),
        "X-Nexus-Project": "bravo",
    }
    url, query, headers = path, {}, {}
    for parameter in operation.get("parameters", []):
        name = parameter["name"]
        assert name in values, f"teach this test what {name} ({path}) should be"
        if parameter["in"] == "path":
            url = url.replace("{" + name + "}", str(values[name]))
        elif parameter["in"] == "query" and (parameter.get("required") or name in AIMED):
            query[name] = values[name]
        elif parameter["in"] == "header":
            headers[name] = values[name]
    request: dict[str, Any] = {"url": url, "params": query, "headers": headers}
    content = operation.get("requestBody", {}).get("content", {})
    if "application/json" in content:
        request["json"] = _body(schema, content["application/json"]["schema"], bravo)
    elif "application/octet-stream" in content:
        line = {"conversation": "c", "session": "s", "id": "m", "speaker": "u", "content": "x"}
        request["content"] = json.dumps(line).encode()
    return request


def _body(schema: dict[str, Any], shape: dict[str, Any], bravo: dict[str, int]) -> Any:
    shape = _resolved(schema, shape)
    if "anyOf" in shape or "oneOf" in shape:
        options = [_resolved(schema, o) for o in shape.get("anyOf", shape.get("oneOf", []))]
        shape = next(o for o in options if o.get("type") == "object")
    fields = {
        "sessionId": bravo["session"],
        "sessionIds": [bravo["session"]],
        "projectId": bravo["project"],
        "project": "bravo",
        "message": MARKER,
        "content": MARKER,
        "speaker": "user",
        "title": MARKER,
        "name": MARKER,
        "vector": [0.1] * 384,
        "limit": 5,
        "keywordWeight": 1.0,
        "retentionDays": 1,
        "model": "nexusai",
        "messages": [{"role": "user", "content": MARKER}],
    }
    if shape.get("type") == "object" and not shape.get("properties"):
        return {"model": "nexusai", "messages": fields["messages"], "user": "bravo chat"}
    wanted = set(shape.get("required", [])) | (set(shape.get("properties", {})) & set(fields))
    return {name: fields[name] for name in wanted if name in fields}


def _resolved(schema: dict[str, Any], shape: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in shape:
        name = shape["$ref"].rsplit("/", 1)[1]
        shape = schema["components"]["schemas"][name]
    return shape


def _no_bravo_ids(answer: Any, bravo: dict[str, int]) -> bool:
    text = answer.text
    if not text or not text.lstrip().startswith(("{", "[")):
        return True
    found = json.loads(text)
    rows = found if isinstance(found, list) else [found]
    sessions = {r.get("sessionId") for r in rows if isinstance(r, dict)}
    return bravo["session"] not in sessions


def _bravo_state(client: TestClient, served: dict[str, Any]) -> Any:
    admin, bravo = served["admin"], served["ids"]["bravo"]
    return (
        client.get(f"/projects/{bravo['project']}", headers=admin).json(),
        client.get(f"/sessions?projectId={bravo['project']}", headers=admin).json(),
        client.get(f"/sessions/{bravo['session']}/episodes", headers=admin).json(),
        client.get(f"/entities/{bravo['entity']}", headers=admin).json(),
    )


def test_mcp_tools_speak_with_the_callers_key(tmp_path: Path, embedder: SwitchableEmbedder) -> None:
    """Over /mcp, a project key's tools see its project only, and a read-only one's
    cannot write: each tool call goes through the door with the caller's own key."""
    config = Config.from_env({}, data_dir=tmp_path / "data", api_key=ADMIN, extractor="none")
    app = create_app(config, embedder)
    with live_server(app) as url:
        admin = _as(ADMIN)
        ids = {}
        for name in ("alpha", "bravo"):
            project = httpx.post(
                f"{url}/projects", json={"name": name}, headers=admin, timeout=HTTP_TIMEOUT
            ).json()
            made = httpx.post(
                f"{url}/sessions",
                json={"projectId": project["id"], "title": "chat"},
                headers=admin,
                timeout=HTTP_TIMEOUT,
            ).json()
            httpx.post(
                f"{url}/sessions/{made['id']}/episodes",
                json={"speaker": "user", "content": f"the {name} {MARKER} plan"},
                headers=admin,
                timeout=HTTP_TIMEOUT,
            )
            ids[name] = made["id"]
        keys = KeyStore(app.state.memory.store)
        own, reader = keys.create("alpha"), keys.create("alpha", read_only=True)

        async def tools(key: str) -> dict[str, Any]:
            async with (
                httpx2.AsyncClient(headers=_as(key)) as http,
                streamable_http_client(f"{url}/mcp/", http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                mine = await session.call_tool(
                    "recall", {"query": MARKER, "session_id": ids["alpha"]}
                )
                theirs = await session.call_tool(
                    "recall", {"query": MARKER, "session_id": ids["bravo"]}
                )
                listed = await session.call_tool("sessions", {})
                wrote = await session.call_tool(
                    "remember", {"messages": [{"content": "hi"}], "session_id": ids["alpha"]}
                )
                return {"mine": mine, "theirs": theirs, "listed": listed, "wrote": wrote}

        seen = asyncio.run(tools(own))
        assert not seen["mine"].is_error
        assert seen["theirs"].is_error
        assert f"session {ids['bravo']} does not exist" in seen["theirs"].content[0].text
        assert "bravo" not in str(seen["listed"].structured_content)
        assert not seen["wrote"].is_error
        read_only = asyncio.run(tools(reader))
        assert not read_only["mine"].is_error
        assert read_only["wrote"].is_error
        assert "read-only" in read_only["wrote"].content[0].text
        with Client(url, reader) as client, pytest.raises(ForbiddenError, match="read-only"):
            client.add_episodes(ids["alpha"], [{"speaker": "user", "content": "x"}])
