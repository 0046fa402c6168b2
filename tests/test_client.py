"""The Python client against a live service on loopback (and a loopback LLM)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from nexusai.app import create_app
from nexusai.client import (
    AsyncClient,
    Call,
    Client,
    ContextEvent,
    DeltaEvent,
    DoneEvent,
    InvalidInputError,
    NotFoundError,
    UnauthorizedError,
    UnavailableError,
)
from nexusai.config import Config
from nexusai.llm import OpenAIChat
from nexusai.schemas import SessionOut
from tests.conftest import SwitchableEmbedder
from tests.live_server import free_port, live_server
from tests.openai_stub import openai_stub


@pytest.fixture
def served(config: Config, embedder: SwitchableEmbedder) -> Iterator[str]:
    keyed = Config.from_env({}, data_dir=config.data_dir, extractor="none", api_key="k-9")
    with openai_stub() as (llm_url, _):
        app = create_app(keyed, embedder, OpenAIChat(llm_url, "m"))
        with live_server(app) as url:
            yield url


def test_every_kind_of_call_with_typed_answers_and_errors(served: str) -> None:
    with Client(served, api_key="k-9") as nexus:
        project = nexus.create_project("home")
        session = nexus.create_session(project_id=project.id, title="first")
        stored = nexus.add_episodes(
            session.id,
            [
                {"speaker": "user", "content": "I adopted a puppy called Biscuit"},
                {"speaker": "user", "content": "The report is due Friday"},
            ],
        )
        assert [e.content for e in nexus.list_episodes(session.id)] == [
            "I adopted a puppy called Biscuit",
            "The report is due Friday",
        ]
        # the second is found too: it is indexed with the end of the turn before it
        assert [e.id for e in nexus.search("Biscuit", [session.id])] == [e.id for e in stored]
        nexus.update_settings(keywordWeight=1.0, recentLimit=0)
        settings = nexus.get_settings()
        assert settings["keywordWeight"] == 1.0
        assert type(settings["semanticLimit"]) is int  # a limit is a count, not 10.0
        other = nexus.create_session(project_id=project.id)
        context = nexus.context(other.id, "what is my dog called?", explain=True)
        assert context.memories[0].id == stored[0].id
        assert context.memories[0].semantic_rank == 1
        reply = nexus.chat(other.id, "dog name?")
        assert reply.reply == "Your dog is called Biscuit."
        shaped = nexus.chat(
            other.id,
            "dog name, again?",
            budget=150,
            filter={"speaker": ["user"]},
            now=datetime(2026, 6, 1, tzinfo=UTC),
            settings={"recentLimit": 0},
        )
        assert shaped.context.budget == 150
        assert shaped.context.recent == []
        assert all(m.speaker == "user" for m in shaped.context.memories)
        first = next(iter(nexus.chat_stream(other.id, "and once more?", budget=150)))
        assert isinstance(first, ContextEvent)
        assert first.context.budget == 150
        events = list(nexus.chat_stream(other.id, "and again?"))
        assert isinstance(events[0], ContextEvent)
        assert events[0].context.session_id == other.id
        assert all(isinstance(e, DeltaEvent) for e in events[1:-1])
        assert "".join(e.text for e in events[1:-1] if isinstance(e, DeltaEvent)).startswith("Your")
        done = events[-1]
        assert isinstance(done, DoneEvent)
        assert done.reply.startswith("Your dog")
        assert done.user_episode_id > 0
        edited = nexus.update_episode(stored[1].id, {"metadata": {"tag": "work"}})
        assert edited.metadata == {"tag": "work"}
        assert nexus.pin(stored[1].id).pinned
        assert [e.id for e in nexus.standing([session.id])] == [stored[1].id]
        packed = nexus.context(other.id, "dog?", settings={"semanticLimit": 1})
        assert packed.standing is not None
        assert [m.id for m in packed.standing] == [stored[1].id]  # pinned: always carried
        assert not nexus.pin(stored[1].id, False).pinned
        tagged = nexus.search("Biscuit", [session.id], filter={"metadata": {"tag": "work"}})
        assert [e.id for e in tagged] == [stored[1].id]
        counted = nexus.forget([session.id], {"metadata": {"tag": "work"}}, dry_run=True)
        assert (counted.episodes, counted.dry_run) == (1, True)
        with pytest.raises(InvalidInputError, match=r"^422: filter: after .* must be earlier"):
            nexus.search("x", filter={"after": "2026-02-01", "before": "2026-01-01"})
        assert [p.name for p in nexus.list_projects()] == ["home"]
        with pytest.raises(NotFoundError, match="session 999 does not exist") as missing:
            nexus.context(999, "hi")
        assert missing.value.status == 404
        with pytest.raises(InvalidInputError, match="projectId"):
            nexus.send(nexus_bad_call())
        nexus.delete_episode(stored[1].id)
        with pytest.raises(NotFoundError):
            nexus.get_episode(stored[1].id)


def test_retention_export_and_a_turns_own_time(served: str) -> None:
    from datetime import UTC, datetime

    with Client(served, api_key="k-9") as nexus:
        project = nexus.create_project("kept", retention_days=3650)
        assert project.retention_days == 3650
        session = nexus.create_session(project_id=project.id, title="notes")
        said = [
            {"speaker": "user", "content": "We planted tulips", "occurredAt": "2026-03-05T10:00Z"},
            {"speaker": "user", "content": "We planted roses", "occurredAt": "2026-05-05T10:00Z"},
        ]
        nexus.add_episodes(session.id, said)
        asker = nexus.create_session(project_id=project.id)
        turn = nexus.context(
            asker.id,
            "What did we plant in March?",
            settings={"timeAware": "filter", "recentLimit": 0},
            now=datetime(2026, 6, 1, tzinfo=UTC),
        )
        assert [m.content for m in turn.memories] == ["We planted tulips"]
        assert turn.time_window is not None
        assert turn.time_window.said == "March"
        assert nexus.set_retention(project.id, None).retention_days is None
        [head, *lines] = nexus.export_project(project.id).splitlines()
        assert json.loads(head) == {"project": "kept", "retentionDays": None}
        exported = [json.loads(line) for line in lines]
        assert [line.get("content") for line in exported] == [*(e["content"] for e in said), None]
        assert exported[-1] == {"session": None, "sessionId": asker.id}  # kept, though empty


def nexus_bad_call() -> Call[SessionOut]:
    """A body the API refuses: a boolean is not an id."""
    return Call("POST", "/sessions", SessionOut.model_validate, {"projectId": True})


def test_import_reports_progress(served: str) -> None:
    lines = [
        json.dumps({"session": "s", "speaker": "user", "content": f"line {i}"}) for i in range(200)
    ]
    data = "\n".join(lines).encode()
    seen: list[int] = []
    with Client(served, api_key="k-9") as nexus:
        summary = nexus.import_file(io.BytesIO(data), "jsonl", project="p", progress=seen.append)
    assert summary.episodes == 200
    assert seen[-1] == len(data)


def test_key_url_and_errors_from_the_environment(
    served: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEXUS_URL", served)
    with Client() as anonymous, pytest.raises(UnauthorizedError):
        anonymous.list_projects()
    monkeypatch.setenv("NEXUS_API_KEY", "k-9")
    with Client() as nexus:
        assert nexus.list_projects() == []


def test_a_service_that_is_not_there(monkeypatch: pytest.MonkeyPatch) -> None:
    with Client(f"http://127.0.0.1:{free_port()}", retries=1) as nexus:
        with pytest.raises(UnavailableError, match="no nexusai service answers"):
            nexus.list_projects()  # safe: retried, then refused
        with pytest.raises(UnavailableError):
            nexus.create_project("x")  # a write: sent once


def test_the_async_client_speaks_the_same_calls(served: str) -> None:
    async def scenario() -> list[str]:
        async with AsyncClient(served, api_key="k-9") as nexus:
            session = await nexus.create_session()
            await nexus.add_episodes(session.id, [{"speaker": "user", "content": "I love tea"}])
            found = await nexus.search("tea")
            events = [e.event async for e in nexus.chat_stream(session.id, "drink?")]
            line = json.dumps({"session": "s", "speaker": "user", "content": "imported"})
            summary = await nexus.import_file(io.BytesIO(line.encode()), "jsonl")
            return [e.content for e in found] + events[-1:] + [str(summary.episodes)]

    assert asyncio.run(scenario()) == ["I love tea", "done", "1"]


def test_methods_show_their_real_signatures() -> None:
    import inspect

    from nexusai.client import AsyncClient, Client

    for client in (Client, AsyncClient):
        shown = inspect.signature(client.context)
        assert list(shown.parameters) == [
            "self",
            "session_id",
            "message",
            "explain",
            "legs",
            "settings",
            "budget",
            "filter",
            "now",
        ]
        assert shown.return_annotation == "ContextOut"
        assert client.context.__name__ == "context"
        assert "for this turn only" in (client.context.__doc__ or "")


def test_the_shared_parameters_match_the_typescript_clients() -> None:
    """`clients/signatures.json` holds the order both clients take; the TypeScript tests
    check theirs against the same file."""
    import inspect
    import json
    from pathlib import Path

    from pydantic.alias_generators import to_snake

    from nexusai.client import AsyncClient, Client

    shared = json.loads((Path(__file__).parents[1] / "clients" / "signatures.json").read_text())
    for name, params in shared["methods"].items():
        for kind in (Client, AsyncClient):
            signature = inspect.signature(getattr(kind, to_snake(name)))
            taken = [p for p in signature.parameters.values() if p.name != "self"]
            assert [p.name for p in taken][: len(params)] == [to_snake(p) for p in params]
    resolve = inspect.signature(Client.resolve_session).parameters
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for n, p in resolve.items() if n != "self")


def test_an_empty_filter_on_forget_is_refused_and_forgets_nothing(served: str) -> None:
    """A filter built up in an app can end up empty: it is not taken for the session."""
    with Client(served, api_key="k-9") as nexus:
        session = nexus.create_session(title="kept")
        nexus.add_episodes(session.id, [{"speaker": "user", "content": "Keep me"}])
        empties: list[dict[str, Any]] = [{}, {"metadata": {}}, {"speaker": None}]
        for empty in empties:
            with pytest.raises(InvalidInputError, match="leave filter out"):
                nexus.forget([session.id], filter=empty)
        with pytest.raises(InvalidInputError, match="speakers"):
            nexus.forget([session.id], filter={"speakers": ["bob"]})
        assert len(nexus.list_episodes(session.id)) == 1


def test_times_are_taken_as_python_writes_them(served: str) -> None:
    """`now` as text or a datetime, a filter's `date`, and a datetime in an episode."""
    from datetime import date

    with Client(served, api_key="k-9") as nexus:
        session = nexus.create_session(title="times")
        said = {"speaker": "user", "content": "Tulips planted", "occurredAt": datetime(2026, 3, 5)}
        [stored] = nexus.add_episodes(session.id, [said])
        assert stored.occurred_at.startswith("2026-03-05T00:00:00")
        turn = nexus.context(session.id, "tulips?", now="2026-04-01T10:00:00+02:00")
        assert turn.session_id == session.id
        nexus.context(session.id, "tulips?", now=datetime(2026, 4, 1, tzinfo=UTC))
        with pytest.raises(InvalidInputError, match="now:"):
            nexus.context(session.id, "tulips?", now="next tuesday")
        march = nexus.forget([session.id], filter={"after": date(2026, 3, 1)}, dry_run=True)
        assert march.episodes == 1
