from __future__ import annotations

import codecs
import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from nexusai.cli import cli
from nexusai.config import Config
from nexusai.errors import InvalidInput, TooLarge
from nexusai.memory.importing import ImportFormatError, import_stream, read_jsonl
from nexusai.memory.service import Memory

ON_BOTH_STORES = True  # its tests that open a store run on SQLite and on PostgreSQL


def jsonl(*rows: object) -> io.BytesIO:
    return io.BytesIO("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows).encode())


def test_jsonl_import_groups_sessions_and_reimport_skips(memory: Memory) -> None:
    def data() -> io.BytesIO:
        return jsonl(
            {"session": "trip", "speaker": "user", "content": "Book a flight to Oslo"},
            {
                "session": "trip",
                "speaker": "assistant",
                "content": "Done",
                "occurredAt": "2024-02-01T10:00:00Z",
            },
            {
                "session": "work",
                "speaker": "user",
                "content": "ok",
                "metadata": {"source": "slack"},
            },
            {"session": "work", "speaker": "user", "content": "ok"},
        )

    summary = import_stream(memory, data(), "jsonl", project="mine")
    assert (summary.conversations, summary.sessions, summary.episodes) == (2, 2, 4)
    again = import_stream(memory, data(), "jsonl", project="mine")
    assert (again.sessions, again.episodes, again.skipped) == (0, 0, 4)
    assert memory.store.episodes.count() == 4
    project = memory.store.projects.find("mine")
    assert project
    assert len(memory.store.sessions.page(project.id)) == 2
    assert memory.store.keywords.search("Oslo")[0].content == "Book a flight to Oslo"
    assert memory.count_pending_vectors() == 0


def test_a_malformed_line_anywhere_stops_the_import_before_any_write(memory: Memory) -> None:
    data = jsonl(
        {"session": "a", "speaker": "user", "content": "first"},
        {"session": "b", "speaker": "user", "content": "second"},
        '{"session": "b", "speaker": "user"',
    )
    with pytest.raises(ImportFormatError, match="line 3"):
        import_stream(memory, data, "jsonl", project="never-made")
    assert memory.store.episodes.count() == 0
    assert memory.store.sessions.page() == []
    assert memory.store.projects.find("never-made") is None


def test_jsonl_takes_its_keys_only_and_checks_types(memory: Memory) -> None:
    data = jsonl({"session": 7, "speaker": "user", "content": "hi", "metadata": {"a": 1}})
    import_stream(memory, data, "jsonl")
    [session] = memory.store.sessions.page()
    assert session.title == "7"  # a session named by a number, as documented
    [episode] = memory.store.episodes.page(session.id)
    assert episode.metadata == {"a": 1}
    ok = {"session": "s", "speaker": "user", "content": "fine"}
    for wrong, said in (
        ({"content": 3}, r"line 2: .*content must be a string, not a number"),
        ({"extra": 1}, r"line 2: .*unknown key 'extra'.*put your own fields in metadata"),
        ({"speaker": " "}, r"line 2: .*speaker must not be empty"),
        ({"content": ""}, r"line 2: .*content must not be empty"),
    ):
        with pytest.raises(ImportFormatError, match=said):
            import_stream(memory, jsonl(ok, {**ok, **wrong}), "jsonl")
    assert len(memory.store.sessions.page()) == 1  # nothing of a refused file is written


def test_jsonl_in_utf16_is_named_and_a_utf8_bom_is_read(memory: Memory) -> None:
    line = json.dumps({"session": "s", "speaker": "user", "content": "olá"})
    with pytest.raises(ImportFormatError, match="line 1: the file is UTF-16"):
        import_stream(memory, io.BytesIO(line.encode("utf-16")), "jsonl")
    marked = io.BytesIO(codecs.BOM_UTF8 + line.encode())
    assert import_stream(memory, marked, "jsonl").episodes == 1


def test_the_same_file_into_another_project_is_another_copy(memory: Memory) -> None:
    def data() -> io.BytesIO:
        return jsonl({"session": "s", "speaker": "user", "content": "hello there"})

    assert import_stream(memory, data(), "jsonl", project="one").episodes == 1
    assert import_stream(memory, data(), "jsonl", project="two").episodes == 1
    assert import_stream(memory, data(), "jsonl", project="two").episodes == 0
    assert memory.store.episodes.count() == 2


def chatgpt_export() -> list[dict[str, object]]:
    def node(
        nid: str, parent: str | None, role: str | None, text: str, children: list[str]
    ) -> dict[str, object]:
        message = None
        if role:
            message = {
                "id": nid,
                "author": {"role": role},
                "create_time": 1700000000 + len(nid),
                "content": {"content_type": "text", "parts": [text]},
            }
        return {"id": nid, "parent": parent, "children": children, "message": message}

    mapping = {
        "root": node("root", None, None, "", ["sys"]),
        "sys": node("sys", "root", "system", "You are ChatGPT", ["u1"]),
        "u1": node("u1", "sys", "user", "How do I reverse a list in Python?", ["a1", "a1b"]),
        "a1": node("a1", "u1", "assistant", "Old answer on a dropped branch", []),
        "a1b": node("a1b", "u1", "assistant", "Use reversed() or slicing [::-1].", ["u2"]),
        "u2": node("u2", "a1b", "user", "", []),
    }
    return [
        {"title": "Python lists", "conversation_id": "c1", "current_node": "u2", "mapping": mapping}
    ]


def test_chatgpt_import_follows_the_current_branch(memory: Memory) -> None:
    summary = import_stream(memory, io.BytesIO(json.dumps(chatgpt_export()).encode()), "chatgpt")
    assert (summary.sessions, summary.episodes, summary.skipped) == (1, 2, 2)
    [session] = memory.store.sessions.page()
    assert session.title == "Python lists"
    assert [(e.speaker, e.content) for e in memory.store.episodes.page(session.id)] == [
        ("user", "How do I reverse a list in Python?"),
        ("assistant", "Use reversed() or slicing [::-1]."),
    ]


def test_locomo_import_maps_sessions_dates_speakers_and_captions(memory: Memory) -> None:
    sample = {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I got a kayak!"},
                {
                    "speaker": "Bo",
                    "dia_id": "D1:2",
                    "text": "Show me",
                    "blip_caption": "a photo of a red kayak on a lake",
                    "img_url": ["x"],
                },
            ],
            "session_2_date_time": "9:00 am on 9 May, 2023",
            "session_3_date_time": "9:00 am on 10 May, 2023",
            "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Paddled today"}],
        },
        "qa": [],
    }
    summary = import_stream(memory, io.BytesIO(json.dumps([sample]).encode()), "locomo")
    assert (summary.conversations, summary.sessions, summary.episodes) == (1, 2, 3)
    project = memory.store.projects.find("locomo conv-1")
    assert project is not None
    first = memory.store.episodes.page(memory.store.sessions.page(project.id)[0].id)
    assert first[0].occurred_at == "2023-05-08T13:56:00.000000Z"
    assert first[1].metadata == {"diaId": "D1:2"}
    assert first[1].image_caption == "a photo of a red kayak on a lake"
    assert first[1].speaker == "Bo"
    assert [e.id for e in memory.store.keywords.search("lake")] == [first[1].id]


@pytest.mark.parametrize(
    ("fmt", "payload", "fragment"),
    [
        ("chatgpt", b'[{"mapping": 3}]', "record 1: not a ChatGPT conversation"),
        (
            "locomo",
            b'[{"sample_id": "x"}]',
            "record 1: not a LoCoMo sample: the key 'conversation' is missing$",
        ),
        ("locomo", b'[{"sample_id": ', "^not valid JSON: premature EOF"),
        (
            "jsonl",
            b"not json",
            "line 1: not a JSONL episode: not valid JSON \\(Expecting value at column 1\\)$",
        ),
        (
            "jsonl",
            b'{"session": "s", "speaker": "u", "content": "\xff"}',
            "line 1: .*not UTF-8 text \\(byte 0xff",
        ),
        ("jsonl", b"[1, 2]", "line 1: .*must be a JSON object, not an array"),
        ("csv", b"", "format must be one of"),
    ],
)
def test_bad_files_name_what_is_wrong_in_words(
    memory: Memory, fmt: str, payload: bytes, fragment: str
) -> None:
    with pytest.raises(InvalidInput, match=fragment) as raised:
        import_stream(memory, io.BytesIO(payload), fmt)
    for python in ("Error(", "right here", "^"):
        assert python not in str(raised.value)
    assert memory.store.episodes.count() == 0


def test_import_over_http_streams_the_body(client: TestClient) -> None:
    body = b"\n".join(
        json.dumps({"session": "s", "speaker": "user", "content": f"line {i}"}).encode()
        for i in range(50)
    )
    response = client.post("/import?format=jsonl&project=p", content=body)
    assert response.status_code == 200, response.text
    assert response.json()["episodes"] == 50
    bad = client.post("/import?format=jsonl", content=b"{oops")
    assert bad.status_code == 422
    assert "line 1" in bad.json()["detail"]


def test_a_422_import_over_http_stores_nothing(client: TestClient) -> None:
    good = [{"session": "bad-1", "speaker": "user", "content": f"turn {i}"} for i in range(3)]
    body = "\n".join([*map(json.dumps, good), '{"session": "bad-1", "speaker": 5}']).encode()
    answer = client.post("/import?format=jsonl&project=fresh", content=body)
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith("line 4: not a JSONL episode:")
    assert client.get("/sessions").json() == []
    assert [p["name"] for p in client.get("/projects").json()] == []


def test_eval_can_store_several_turns_as_one_episode() -> None:
    from nexusai.evaluation.replay import merge_turns
    from nexusai.memory.importing import locomo_conversation

    turns = [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "I got a puppy"},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "Cute!", "blip_caption": "a dog"},
        {"speaker": "Ann", "dia_id": "D1:3", "text": "His name is Rex"},
    ]
    sample = {
        "sample_id": "conv-x",
        "conversation": {"session_1": turns, "session_1_date_time": "1:56 pm on 8 May, 2023"},
    }
    merged, keys = merge_turns(locomo_conversation(sample), 2)
    [session] = merged.sessions
    assert [e.key for e in session.episodes] == ["locomo:conv-x:D1:1", "locomo:conv-x:D1:3"]
    first = session.episodes[0].episode
    assert (first.speaker, first.content) == ("Ann", "I got a puppy\nBo: Cute! [image: a dog]")
    assert keys == {
        "locomo:conv-x:D1:1": "locomo:conv-x:D1:1",
        "locomo:conv-x:D1:2": "locomo:conv-x:D1:1",
        "locomo:conv-x:D1:3": "locomo:conv-x:D1:3",
    }
    same, _ = merge_turns(locomo_conversation(sample), 1)
    assert same == locomo_conversation(sample)


def _too_large_at_the_end(tmp_path: Any) -> Any:
    """Three conversations (a session each), the last holding one message over the limit."""
    rows = [
        {"session": name, "speaker": "user", "content": f"hello from {name}"}
        for name in ("first", "second")
    ]
    rows.append({"session": "third", "speaker": "user", "content": "x" * (1024 * 1024 + 1)})
    path = tmp_path / "chats.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


def test_a_too_large_message_in_the_last_conversation_writes_nothing(
    client: TestClient, config: Config, tmp_path: Path
) -> None:
    """The whole file is checked by the write's own rules before any of it is written: by
    the library, over POST /import and from the command line, on both stores."""
    path = _too_large_at_the_end(tmp_path)
    memory: Memory = client.app.state.memory  # type: ignore[attr-defined]
    with pytest.raises(TooLarge, match="session 'third': content is 1048577 bytes"):
        import_stream(memory, io.BytesIO(path.read_bytes()), "jsonl")
    assert memory.store.sessions.page() == []
    refused = client.post("/import?format=jsonl", content=path.read_bytes())
    assert refused.status_code == 413
    assert "session 'third'" in refused.json()["detail"]
    assert client.get("/sessions").json() == []
    env = {"NEXUS_DATA_DIR": str(config.data_dir.parent / "cli"), "NEXUS_EXTRACTOR": "none"}
    if config.database_url:
        env["NEXUS_DATABASE_URL"] = config.database_url
    typed = CliRunner(env=env).invoke(cli, ["import", str(path), "--format", "jsonl"])
    assert typed.exit_code == 1, typed.output
    assert "session 'third'" in typed.output
    assert client.get("/sessions").json() == []  # the same database, on PostgreSQL


def test_an_export_imports_back_as_it_was(memory: Memory, config: Config, tmp_path: Path) -> None:
    """`nexus export` writes what `nexus import` reads: the same sessions, speakers, times,
    metadata, captions and pins come back (only the ids are the new store's)."""
    from nexusai.models import NewEpisode

    project = memory.store.projects.create("home").id
    monday = memory.store.sessions.create(project, "monday").id
    again = memory.store.sessions.create(project, "monday").id  # a title two sessions share
    untitled = memory.store.sessions.create(project).id
    empty = memory.store.sessions.create(project, "not started").id  # no episodes
    memory.store.sessions.create(None, "elsewhere")
    [first, _] = memory.add_episodes(
        monday,
        [
            NewEpisode("user", "I adopted Biscuit", metadata={"mood": "glad"}, pinned=True),
            NewEpisode("assistant", "Lovely!", image_caption="a beagle"),
        ],
    )
    memory.add_episodes(again, [NewEpisode("user", "Always reply in French when I ask you.")])
    memory.add_episodes(untitled, [NewEpisode("Caroline", "Straße, 東京")])
    env = {"NEXUS_DATA_DIR": str(config.data_dir), "NEXUS_EXTRACTOR": "none"}
    if config.database_url:
        env["NEXUS_DATABASE_URL"] = config.database_url
    runner = CliRunner(env=env)
    out = tmp_path / "home.jsonl"
    written = runner.invoke(cli, ["export", "--project", "home", "--out", str(out)])
    assert written.exit_code == 0, written.output
    [head, *lines] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert head == {"project": "home", "retentionDays": None}
    # Titles as they are, each session's id in its own field, every session kept.
    assert [(line["session"], line["sessionId"], line.get("content")) for line in lines] == [
        ("monday", monday, "I adopted Biscuit"),
        ("monday", monday, "Lovely!"),
        ("monday", again, "Always reply in French when I ask you."),
        (None, untitled, "Straße, 東京"),
        ("not started", empty, None),
    ]
    assert lines[0] == {
        "id": first.id,
        "session": "monday",
        "sessionId": monday,
        "speaker": "user",
        "content": "I adopted Biscuit",
        "occurredAt": first.occurred_at,
        "metadata": {"mood": "glad"},
        "pinned": True,
    }
    assert lines[1]["imageCaption"] == "a beagle"
    memory.close()  # an import writes the vectors too: the service must be stopped
    imported = runner.invoke(cli, ["import", str(out), "--project", "copy"])
    assert imported.exit_code == 0, imported.output
    assert "4 new sessions" in imported.output
    by_id = runner.invoke(cli, ["export", "--project", str(project)])  # an id names it too
    assert by_id.exit_code == 0, by_id.output
    printed = runner.invoke(cli, ["export", "--project", "copy"])
    [copy_head, *copied] = [json.loads(line) for line in printed.stdout.splitlines()]
    assert copy_head == {"project": "copy", "retentionDays": None}  # --project named it

    def without_ids(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in row.items() if k not in ("id", "sessionId")} for row in rows]

    assert without_ids(copied) == without_ids(lines)
    assert len({row["sessionId"] for row in copied}) == 4
    assert "4 episodes of project 'copy' exported" in printed.stderr
    again_imported = runner.invoke(cli, ["import", str(out), "--project", "copy"])
    assert "0 new sessions, 0 episodes, 4 skipped" in again_imported.output


def test_an_export_that_cannot_run_writes_nothing(
    memory: Memory, config: Config, tmp_path: Path
) -> None:
    memory.store.projects.create("home")
    env = {"NEXUS_DATA_DIR": str(config.data_dir), "NEXUS_EXTRACTOR": "none"}
    if config.database_url:
        env["NEXUS_DATABASE_URL"] = config.database_url
    out = tmp_path / "out" / "x.jsonl"
    out.parent.mkdir()
    refused = CliRunner(env=env).invoke(cli, ["export", "--project", "hoem", "--out", str(out)])
    assert refused.exit_code == 1
    assert "no project named 'hoem'; projects: 'home'" in refused.output
    assert list(out.parent.iterdir()) == []  # no file, not even a part of one
    if not config.database_url:  # a data directory with no store is not made one
        empty = tmp_path / "empty"
        typo = CliRunner().invoke(cli, ["export", "--project", "home", "--data-dir", str(empty)])
        assert "there is no nexusai store" in typo.output
        assert not empty.exists()


ROUND_TRIP = [
    ("monday", "user", "I adopted a beagle called Biscuit", {"pet": "dog"}),
    ("monday", "assistant", "Beagles love long walks in the park.", {}),
    ("monday", "user", "Always answer me in short sentences.", {}),
    ("tuesday", "user", "My sister Ana moved to Lisbon in March.", {"family": True}),
    ("tuesday", "assistant", "Lisbon has lovely trams and the Oceanarium.", {}),
    ("tuesday", "user", "I prefer trains to flights.", {"travel": "train"}),
    ("friday", "user", "The quarterly report is due on Friday.", {"work": 1}),
    ("friday", "user", "Biscuit chewed the report draft, sadly.", {}),
]
QUESTIONS = ["What is my dog called?", "Where does Ana live?", "When is the report due?"]


@pytest.fixture
def empty_config(config: Config, tmp_path: Path, request: pytest.FixtureRequest) -> Config:
    """A second, empty store of the same kind as `config`'s."""
    url = None
    if config.database_url:
        import uuid
        from urllib.parse import urlsplit

        import psycopg

        admin = request.getfixturevalue("postgres")
        name = f"copy_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        url = urlsplit(admin)._replace(path=f"/{name}").geturl()
    return Config.from_env({}, data_dir=tmp_path / "copy", extractor="none", database_url=url)


def test_an_export_imported_into_an_empty_store_answers_the_same(
    config: Config, empty_config: Config, embedder: Any
) -> None:
    """GET /projects/{id}/export, then POST /import into an empty store: the same project
    and retention, the same episodes (pins and expiry too), the same turns."""
    from nexusai.app import create_app

    with TestClient(create_app(config, embedder)) as source:
        project = source.post("/projects", json={"name": "home", "retentionDays": 3650}).json()
        sessions: dict[str, int] = {}
        for day, (title, speaker, content, metadata) in enumerate(ROUND_TRIP):
            if title not in sessions:
                made = source.post("/sessions", json={"projectId": project["id"], "title": title})
                sessions[title] = made.json()["id"]
            said = {"speaker": speaker, "content": content, "metadata": metadata}
            said["occurredAt"] = f"2026-03-{day + 2:02d}T10:00:00Z"
            if day == 2:
                said["expiresAt"] = "2030-01-01T00:00:00Z"
            source.post(f"/sessions/{sessions[title]}/episodes", json={"episodes": [said]})
        first = source.get(f"/sessions/{sessions['monday']}/episodes").json()[0]["id"]
        assert source.patch(f"/episodes/{first}", json={"pinned": True}).is_success
        exported = source.get(f"/projects/{project['id']}/export")
        assert exported.headers["content-type"].startswith("application/x-ndjson")
        before = _snapshot(source)
    with TestClient(create_app(empty_config, embedder)) as copy:
        imported = copy.post(
            "/import",
            params={"format": "jsonl"},
            content=exported.content,
            headers={"Content-Type": "application/octet-stream"},
        )
        assert imported.json()["episodes"] == len(ROUND_TRIP), imported.text
        assert _snapshot(copy) == before
    monday = before["episodes"]["monday"]
    assert monday[0]["pinned"]
    assert monday[2]["expiresAt"] == "2030-01-01T00:00:00.000000Z"  # its own, the sooner
    assert monday[1]["expiresAt"] == "2036-02-29T10:00:00.000000Z"  # 3,650 days on


def _snapshot(client: TestClient) -> dict[str, Any]:
    """What a user sees of the store: projects, episodes by session, and turns asked from
    a new session of the project at both fusion modes (ids left out: a store makes its own)."""
    [project] = client.get("/projects").json()
    episodes = {}
    for session in client.get("/sessions", params={"projectId": project["id"]}).json():
        listed = client.get(f"/sessions/{session['id']}/episodes").json()
        marked = [client.get(f"/episodes/{e['id']}").json() for e in listed]  # pins, expiry
        episodes[session["title"]] = [
            {k: v for k, v in e.items() if k not in ("id", "sessionId", "createdAt")}
            for e in marked
        ]
    asker = client.post("/sessions", json={"projectId": project["id"]}).json()["id"]
    turns = {}
    for fusion in ("rrf", "learned"):
        for question in QUESTIONS:
            body = {"sessionId": asker, "message": question, "settings": {"fusion": fusion}}
            turn = client.post("/context", json=body).json()
            turns[fusion, question] = [
                [m["content"] for m in turn.get(key, [])] for key in ("memories", "standing")
            ]
    return {
        "project": {k: v for k, v in project.items() if k not in ("id", "createdAt")},
        "episodes": episodes,
        "turns": turns,
    }


def test_an_interleaved_log_is_written_in_windows_and_stores_every_line_once(
    memory: Memory,
) -> None:
    """Lines in time order, sessions interleaved (a message log): a window of lines is one
    write of several sessions, every line is stored once, each session's in order; a file
    whose sessions come one after another is written a whole session at a time."""
    lines = [
        json.dumps({"session": f"s{i % 3}", "speaker": "user", "content": f"line {i}"})
        for i in range(30)
    ]
    raw = ("\n".join(lines) + "\n").encode()
    windows = list(read_jsonl(io.BytesIO(raw), window=3))  # closed at 8 x 3 episodes
    assert [sum(len(s.episodes) for s in w.sessions) for w in windows] == [24, 6]
    assert [w.conversations for w in windows] == [3, 3]
    first = windows[0].sessions[0]
    assert [e.episode.content for e in first.episodes] == [f"line {i}" for i in range(0, 24, 3)]
    grouped = sorted(lines, key=lambda line: json.loads(line)["session"])
    raw_grouped = ("\n".join(grouped) + "\n").encode()
    whole = list(read_jsonl(io.BytesIO(raw_grouped), window=4))  # closed at a new session
    assert [[len(s.episodes) for s in w.sessions] for w in whole] == [[10], [10], [10]]
    summary = import_stream(memory, io.BytesIO(raw), "jsonl", project="log")
    assert (summary.sessions, summary.episodes, summary.skipped) == (3, 30, 0)
    again = import_stream(memory, io.BytesIO(raw), "jsonl", project="log")
    assert (again.sessions, again.episodes, again.skipped) == (0, 0, 30)
    project = memory.store.projects.find("log")
    assert project is not None
    for session in memory.store.sessions.page(project.id):
        said = [e.content for e in memory.store.episodes.page(session.id)]
        start = int(str(session.title)[1:])
        assert said == [f"line {i}" for i in range(start, 30, 3)]
