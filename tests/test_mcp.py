"""The MCP server, driven by the official `mcp` SDK's own client: over the service's
streamable HTTP transport at /mcp, and over stdio (`nexus mcp` with the embedded store)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from nexusai.app import create_app
from nexusai.config import Config
from tests.conftest import HTTP_TIMEOUT, SwitchableEmbedder
from tests.live_server import live_server

TOOLS = {"remember", "recall", "context", "entities", "forget", "pin", "sessions"}


def payload(result: Any) -> Any:
    """A tool's answer, from its structured content (the SDK wraps a list as `result`)."""
    assert not result.is_error, result.content
    data = result.structured_content
    return data["result"] if set(data) == {"result"} else data


async def exercise(session: ClientSession) -> None:
    """What an assistant does: remember, recall by meaning and by words, forget."""
    started = await session.initialize()
    assert started.server_info.version
    assert {t.name for t in (await session.list_tools()).tools} == TOOLS
    where = {"session": "monday", "project": "home"}
    said = [
        {"content": "I adopted a puppy called Biscuit"},
        {"content": "The quarterly report is due Friday"},
    ]
    stored = payload(await session.call_tool("remember", {"messages": said, **where}))
    dog = stored["episodeIds"][0]
    later = {"session": "tuesday", "project": "home"}
    await session.call_tool("sessions", {"action": "create", "title": "tuesday", "project": "home"})
    by_meaning = payload(
        await session.call_tool("recall", {"query": "what pet do I have?", **later})
    )
    assert by_meaning[0]["id"] == dog
    assert by_meaning[0]["semanticRank"] == 1
    by_word = payload(await session.call_tool("recall", {"query": "Biscuit", **later}))
    assert by_word[0]["id"] == dog
    counted = payload(await session.call_tool("forget", {"query": "Biscuit puppy", **where}))
    assert counted == {"wouldForget": 1, "episodeIds": [dog]}
    forgot = payload(
        await session.call_tool("forget", {"query": "Biscuit puppy", "dry_run": False, **where})
    )
    assert forgot["forgot"] == 1
    after = payload(await session.call_tool("recall", {"query": "Biscuit puppy", **later}))
    assert dog not in [m["id"] for m in after]
    missing = await session.call_tool("recall", {"query": "x", "session_id": 999})
    assert missing.is_error
    assert "session 999 does not exist" in getattr(missing.content[0], "text", "")
    wrong = await session.call_tool("remember", {"messages": "not a list", **where})
    assert wrong.is_error
    await a_filter_keeps_recall_and_context_to_what_it_names(session)
    await a_refused_remember_makes_nothing(session)
    await a_pinned_episode_comes_with_every_turn(session)
    await reading_writes_nothing(session)
    await arguments_are_strict(session)
    await answers_are_compact(session)
    await forget_takes_every_match(session)


async def forget_takes_every_match(session: ClientSession) -> None:
    """Not the first page of them: 250 by query, 1,050 in a whole session (the ids listed
    to 1,000, `moreIds` saying how many the list leaves out)."""
    where = {"session": "many", "project": "bulk"}
    said = [{"content": f"Biscuit chewed sock number {n}"} for n in range(250)]
    said += [{"content": f"The weather on day {n} was mild"} for n in range(800)]
    for start in (0, 525):
        batch = said[start : start + 525]
        payload(await session.call_tool("remember", {"messages": batch, **where}))
    counted = payload(await session.call_tool("forget", {"query": "Biscuit", **where}))
    assert counted["wouldForget"] == 250
    forgot = payload(
        await session.call_tool("forget", {"query": "Biscuit", "dry_run": False, **where})
    )
    assert forgot["forgot"] == 250
    left = payload(await session.call_tool("recall", {"query": "Biscuit sock", **where}))
    assert not [m for m in left if "Biscuit" in m["content"]]
    again = [{"content": f"Biscuit chewed shoe number {n}"} for n in range(250)]
    payload(await session.call_tool("remember", {"messages": again, **where}))
    whole = payload(await session.call_tool("forget", {"dry_run": False, **where}))
    assert (whole["forgot"], len(whole["episodeIds"]), whole["moreIds"]) == (1050, 1000, 50)
    nothing = await session.call_tool("forget", {"filter": {"metadata": {}}, **where})
    assert nothing.is_error  # as empty as {}: never the whole session


async def a_filter_keeps_recall_and_context_to_what_it_names(session: ClientSession) -> None:
    where = {"session": "wed", "project": "dated"}
    said = [
        {"content": "The garden needs water", "occurredAt": "2026-01-05T10:00:00Z"},
        {"content": "The garden got new tulips", "occurredAt": "2026-03-05T10:00:00Z"},
    ]
    _old, new = payload(await session.call_tool("remember", {"messages": said, **where}))[
        "episodeIds"
    ]
    march = {"filter": {"after": "2026-03-01T00:00:00Z"}, **where}
    found = payload(await session.call_tool("recall", {"query": "the garden", **march}))
    assert [m["id"] for m in found] == [new]
    await session.call_tool("sessions", {"action": "create", "title": "thu", "project": "dated"})
    later = {**march, "session": "thu"}  # a later session: both are memories there, not recent
    turn = payload(await session.call_tool("context", {"message": "the garden?", **later}))
    assert [m["id"] for m in turn["memories"]] == [new]  # not _old, said in January
    budgeted = {"message": "the garden?", "budget": 200, "now": "2026-04-01T00:00:00Z", **later}
    turn = payload(await session.call_tool("context", budgeted))
    assert turn["budget"] == 200
    assert 0 < turn["tokens"] <= 200
    bad_time = await session.call_tool("context", {**budgeted, "now": "2026-05-01+02:00"})
    assert "now" in bad_time.content[0].text  # type: ignore[union-attr]
    bad = await session.call_tool("recall", {"query": "x", **where, "filter": {"when": "May"}})
    assert bad.is_error
    # What remember labels, forget and recall filter on; an expiry is said back.
    labelled = [
        {"content": "The garden shed is blue", "metadata": {"topic": "shed"}},
        {"content": "The garden gate squeaks", "expiresAt": "2999-01-01T00:00:00Z"},
    ]
    stored = payload(await session.call_tool("remember", {"messages": labelled, **where}))
    shed, _gate = stored["episodeIds"]
    assert stored["expiresAt"] == [None, "2999-01-01T00:00:00.000000Z"]
    only = {"filter": {"metadata": {"topic": "shed"}}, **where}
    assert [
        m["id"] for m in payload(await session.call_tool("recall", {"query": "garden", **only}))
    ] == [shed]
    assert payload(await session.call_tool("forget", only))["episodeIds"] == [shed]
    empty = {"filter": {"metadata": {"topic": []}}, **where}
    assert (await session.call_tool("forget", empty)).is_error  # never wider than a read
    nothing = await session.call_tool("forget", {"filter": {}, **where})
    assert nothing.is_error  # a filter that names nothing is not the whole session
    assert "name at least one of" in nothing.content[0].text  # type: ignore[union-attr]
    unnamed = await session.call_tool("recall", {"query": "", **where})
    assert "query:" in unnamed.content[0].text  # type: ignore[union-attr]
    assert "body" not in unnamed.content[0].text  # type: ignore[union-attr]
    long = "x" * 300  # a speaker is at most 200 characters: the API refuses the batch
    named = [{"content": "fine"}, {"content": "fine", "speaker": long}]
    refused = await session.call_tool("remember", {"messages": named, **where})
    assert "messages[1].speaker" in refused.content[0].text  # type: ignore[union-attr]


async def a_refused_remember_makes_nothing(session: ClientSession) -> None:
    huge = [{"content": "x" * (1 << 20) + "0123456789"}]  # over NEXUS_MAX_CONTENT_BYTES
    where = {"session": "s-fail", "project": "p-fail"}
    refused = await session.call_tool("remember", {"messages": huge, **where})
    assert refused.is_error
    assert "limit" in refused.content[0].text  # type: ignore[union-attr]
    projects = await session.call_tool("sessions", {"project": "p-fail"})
    assert projects.is_error  # no such project was made
    said = {"messages": [{"content": "I keep a diary"}], "session": "sat", "project": "p-once"}
    first = payload(await session.call_tool("remember", said))
    again = payload(await session.call_tool("remember", said))  # a retried call
    assert again == first
    made = payload(await session.call_tool("sessions", {"project": "p-once"}))
    assert [s["title"] for s in made] == ["sat"]
    # Said again after something else: a new memory, the same day or not (as on /chat).
    other = {**said, "messages": [{"content": "It has a blue cover"}]}
    await session.call_tool("remember", other)
    third = payload(await session.call_tool("remember", said))
    assert third["episodeIds"] != first["episodeIds"]
    assert payload(await session.call_tool("remember", said)) == third  # its retry


async def a_pinned_episode_comes_with_every_turn(session: ClientSession) -> None:
    where = {"session": "monday", "project": "home"}
    said = {"messages": [{"content": "My sister Ana lives in Lisbon"}], **where}
    [sister] = payload(await session.call_tool("remember", said))["episodeIds"]
    pinned = payload(await session.call_tool("pin", {"episode_id": sister}))
    assert pinned == {"episodeId": sister, "pinned": True}
    later = {"session": "tuesday", "project": "home"}
    turn = payload(await session.call_tool("context", {"message": "what's for dinner?", **later}))
    given = [m["id"] for m in [*turn.get("standing", []), *turn["memories"]]]
    assert given.count(sister) == 1  # standing, unless the search found it too
    assert (
        payload(await session.call_tool("pin", {"episode_id": sister, "pinned": False}))["pinned"]
        is False
    )
    missing = await session.call_tool("pin", {"episode_id": 999_999})
    assert missing.is_error
    rule = {"filter": {"speaker": ["user"], "after": "2000-01-01T00:00:00Z"}, **where}
    counted = payload(await session.call_tool("forget", rule))
    assert sister in counted["episodeIds"]
    assert counted["wouldForget"] == len(counted["episodeIds"])
    window = {"filter": {"after": "2026-02-01", "before": "2026-01-01"}, **where}
    backwards = await session.call_tool("forget", window)
    assert backwards.is_error
    assert "earlier" in backwards.content[0].text  # type: ignore[union-attr]


async def reading_writes_nothing(session: ClientSession) -> None:
    before = payload(await session.call_tool("sessions", {}))
    for tool, args in (("recall", {"query": "x"}), ("context", {"message": "x"}), ("entities", {})):
        typo = await session.call_tool(tool, {**args, "project": "hoem", "session": "wednesday"})
        assert typo.is_error
        assert "no project named 'hoem'; projects: 'home'" in typo.content[0].text  # type: ignore[union-attr]
        unknown = await session.call_tool(tool, {**args, "project": "home", "session": "sunday"})
        assert "sessions: 'monday', 'tuesday'" in unknown.content[0].text  # type: ignore[union-attr]
    assert payload(await session.call_tool("sessions", {})) == before
    # A name alone finds the session of that name, wherever it is.
    stored = payload(
        await session.call_tool(
            "remember",
            {"messages": [{"content": "I keep bees"}], "session": "monday", "project": "home"},
        )
    )
    found = payload(await session.call_tool("recall", {"query": "bees", "session": "monday"}))
    assert found[0]["id"] == stored["episodeIds"][0]  # just said, and recalled at once
    asked = {"message": "do I keep bees?", "session": "tuesday", "budget": 30}
    packed = payload(await session.call_tool("context", asked))
    assert 0 < sum(m["tokens"] for m in packed["memories"]) <= 30  # the budget passed through


async def arguments_are_strict(session: ClientSession) -> None:
    for args in (
        {"query": "x", "session_id": True},
        {"query": "x", "session_id": "1"},
        {"query": "x", "session": "monday", "project": "home", "sesion": "typo"},
    ):
        refused = await session.call_tool("recall", args)
        assert refused.is_error, args
        said = refused.content[0].text  # type: ignore[union-attr]
        assert "\n" not in said  # one line, as the API says it, no pydantic dump or links
        assert "pydantic.dev" not in said
        assert said.startswith(
            ("Error executing tool recall: session_id", "Error executing tool recall: sesion")
        )
    unknown = await session.call_tool("entities", {"query": "dog", "session": "monday"})
    assert unknown.is_error
    schema = {t.name: t.input_schema for t in (await session.list_tools()).tools}
    assert schema["recall"]["additionalProperties"] is False
    assert all(p.get("description") for t in schema.values() for p in t["properties"].values())
    assert "project" in schema["sessions"]["properties"]


async def answers_are_compact(session: ClientSession) -> None:
    result = await session.call_tool("recall", {"query": "bees", "session": "monday"})
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":")) == text
    assert "null" not in text
    assert '"metadata":{}' not in text
    score = payload(result)[0]["score"]
    assert len(repr(score).replace("0.", "", 1)) <= 6


def test_over_streamable_http(config: Config, embedder: SwitchableEmbedder) -> None:
    async def run(url: str) -> None:
        async with (
            streamable_http_client(f"{url}/mcp/") as (read, write),
            ClientSession(read, write) as session,
        ):
            await exercise(session)

    with live_server(create_app(config, embedder)) as url:
        asyncio.run(run(url))


def over_stdio(environment: dict[str, str], errors: Path) -> None:
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "nexusai.cli", "mcp"], env=environment
    )

    async def run() -> None:
        with errors.open("w") as said:
            async with (
                stdio_client(server, errlog=said) as (read, write),
                ClientSession(read, write) as session,
            ):
                await exercise(session)

    asyncio.run(run())
    # stderr is for what goes wrong: not a line per internal request.
    assert "HTTP Request" not in errors.read_text()


def test_over_stdio_with_the_embedded_store(tmp_path: Path) -> None:
    environment = {**os.environ, "NEXUS_DATA_DIR": str(tmp_path / "d"), "NEXUS_EXTRACTOR": "none"}
    environment.pop("NEXUS_URL", None)
    over_stdio(environment, tmp_path / "stderr.txt")


def test_over_stdio_against_a_running_service_with_its_key(
    tmp_path: Path, embedder: SwitchableEmbedder
) -> None:
    keyed = Config.from_env({}, data_dir=tmp_path / "served", extractor="none", api_key="k-7")
    with live_server(create_app(keyed, embedder)) as url:
        assert (
            httpx.post(f"{url}/mcp/", json={}, timeout=HTTP_TIMEOUT).status_code == 401
        )  # the same key rule
        environment = {**os.environ, "NEXUS_URL": url, "NEXUS_API_KEY": "k-7"}
        environment["NEXUS_DATA_DIR"] = str(tmp_path / "unused")  # no store is opened
        over_stdio(environment, tmp_path / "stderr.txt")
    assert not (tmp_path / "unused").exists()
