from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from nexusai.app import create_app
from nexusai.cli import cli
from nexusai.config import Config
from nexusai.errors import Conflict
from nexusai.memory import upkeep
from nexusai.memory.postgres import fts as pg_fts
from nexusai.memory.postgres.store import PgStore
from nexusai.memory.service import Memory
from nexusai.memory.store import EpisodeStore
from nexusai.models import NewEpisode
from nexusai.orchestration.turn.legs import LegQuery
from nexusai.orchestration.turn.sources import semantic_leg
from tests.conftest import BOTH_STORES, HTTP_TIMEOUT, SwitchableEmbedder
from tests.live_server import free_port, start_server

FACTS = [
    "I adopted a puppy called Biscuit",
    "My sister moved to Lisbon",
    "The report is due Friday",
]


@pytest.mark.parametrize("config", BOTH_STORES, indirect=True)
def test_doctor_finds_and_repairs_drift(memory: Memory) -> None:
    sid = memory.store.sessions.create().id
    ids = [e.id for e in memory.add_episodes(sid, [NewEpisode("u", t) for t in FACTS])]
    assert upkeep.check(memory).healthy
    # the last turn: deleting an earlier one would re-queue the vector of the turn after it
    memory.store.episodes.delete(ids[2])  # row gone, vector left behind
    memory.vectors.delete([ids[1]])  # vector lost, row still says indexed
    _damage_keyword_index(memory.store, ids[0])
    found = upkeep.check(memory)
    assert (found.vectors_without_rows, found.rows_without_vectors, found.fts_ok) == (
        [ids[2]],
        [ids[1]],
        False,
    )
    upkeep.repair(memory, found)
    assert upkeep.check(memory).healthy
    # the turn itself, then the one after it (indexed with it)
    assert [e.id for e in memory.store.keywords.search("puppy Biscuit")] == ids[:2]


def _damage_keyword_index(store: EpisodeStore, episode_id: int) -> None:
    """An episode's keyword row lost behind the triggers' back."""
    with store.atomic() as conn:
        if isinstance(store, PgStore):
            conn.execute(f"DELETE FROM {pg_fts.TABLE} WHERE id = %s", (episode_id,))
            return
        episode = store.episodes.get(episode_id)
        conn.execute(
            "INSERT INTO episodes_fts(episodes_fts, rowid, search_text, context_text)"
            " VALUES ('delete', ?, ?, ?)",
            (episode_id, episode.search_text, episode.context_text),
        )


def test_backup_while_serving_then_restore_finds_everything(
    config: Config, embedder: SwitchableEmbedder, tmp_path: Path
) -> None:
    with TestClient(create_app(config, embedder)) as client:
        sid = client.post("/sessions").json()["id"]
        episodes = [{"speaker": "user", "content": t} for t in FACTS]
        client.post(f"/sessions/{sid}/episodes", json={"episodes": episodes})
        upkeep.backup(config, tmp_path / "backup.db")  # the service is running
    restored = Config.from_env({}, data_dir=tmp_path / "restored", extractor="none")
    assert upkeep.restore(restored, tmp_path / "backup.db") == 3
    memory = Memory.open(restored, embedder)
    try:
        for text in FACTS:  # top two: a turn is also indexed with the turn before it
            assert text in [h.content for h in memory.store.keywords.search(text, 2)]
            found = semantic_leg(
                LegQuery(
                    memory=memory,
                    query=text,
                    query_vector=embedder.embed_one(text),
                    session_ids=[sid],
                    recent_ids=[],
                    limit=2,
                )
            )
            assert text in [h.content for h in found]
    finally:
        memory.close()
    with pytest.raises(Conflict, match="exists"):
        upkeep.restore(restored, tmp_path / "backup.db")


def test_restore_refuses_a_file_that_is_not_a_backup(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    result = CliRunner().invoke(cli, ["restore", str(junk), "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 1
    assert "not a readable nexusai backup" in result.output


def test_sigkill_mid_stream_loses_no_acknowledged_episode(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = start_server(tmp_path, port)
    acknowledged: list[int] = []
    try:
        sid = httpx.post(f"{url}/sessions", timeout=HTTP_TIMEOUT).json()["id"]
        with httpx.Client(base_url=url, timeout=10) as client:
            for i in range(400):
                if i == 150:
                    process.send_signal(signal.SIGKILL)  # mid-stream, no warning
                try:
                    batch = [
                        {"speaker": "user", "content": f"note {i}-{j} about walrus {i}"}
                        for j in range(5)
                    ]
                    response = client.post(f"/sessions/{sid}/episodes", json={"episodes": batch})
                except httpx.TransportError:
                    break
                acknowledged += [e["id"] for e in response.json()["episodes"]]
    finally:
        process.kill()
        process.wait()
    assert len(acknowledged) >= 150 * 5
    restarted = start_server(tmp_path, port)
    try:
        with httpx.Client(base_url=url, timeout=10) as client:
            for episode_id in acknowledged[-20:] + acknowledged[:20]:
                assert client.get(f"/episodes/{episode_id}").status_code == 200
            stored = client.get(f"/sessions/{sid}/episodes", params={"limit": 1000}).json()
            assert {e["id"] for e in stored} >= set(acknowledged)
            deadline = time.monotonic() + 60  # start-up gives vectors to what lost them
            while "nexus_vectors_pending 0.0" not in client.get("/metrics").text:
                assert time.monotonic() < deadline, "pending vectors were not repaired"
                time.sleep(0.2)
    finally:
        restarted.terminate()
        restarted.wait(timeout=60)
    result = CliRunner().invoke(cli, ["doctor", "--repair", "--data-dir", str(tmp_path)])
    assert "keyword index agrees with the episodes table: yes" in result.output, result.output
    memory = Memory.open(Config.from_env({}, data_dir=tmp_path, extractor="none"))
    try:
        assert memory.count_pending_vectors() == 0
        assert memory.vectors.count() == memory.store.episodes.count()
    finally:
        memory.close()


def test_sigkill_mid_import_and_mid_chat_leaves_whole_conversations(tmp_path: Path) -> None:
    from tests.openai_stub import openai_stub

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    lines = b"\n".join(
        f'{{"session": "s{i // 200}", "speaker": "user", "content": "imported line {i}"}}'.encode()
        for i in range(3000)
    )
    with openai_stub() as (llm_url, _):
        llm = {"NEXUS_LLM_BASE_URL": llm_url, "NEXUS_LLM_MODEL": "stub"}
        process = start_server(tmp_path, port, **llm)
        answered: list[dict[str, int]] = []
        with httpx.Client(base_url=url, timeout=30) as client:
            sid = client.post("/sessions").json()["id"]
            for i in range(60):
                if i == 20:
                    killer = threading.Timer(0.5, process.send_signal, [signal.SIGKILL])
                    killer.start()  # lands during the import below
                    try:
                        client.post("/import?format=jsonl", content=lines)
                    except httpx.TransportError:
                        break
                body = client.post("/chat", json={"sessionId": sid, "message": f"turn {i}"}).json()
                answered.append(body)
        process.kill()
        process.wait()
        restarted = start_server(tmp_path, port, **llm)
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            for body in answered:
                assert client.get(f"/episodes/{body['userEpisodeId']}").status_code == 200
                assert client.get(f"/episodes/{body['assistantEpisodeId']}").status_code == 200
            for session in client.get("/sessions", params={"limit": 1000}).json():
                count = len(
                    client.get(f"/sessions/{session['id']}/episodes", params={"limit": 1000}).json()
                )
                if session["title"] and session["title"].startswith("s"):
                    assert count in (0, 200), session  # each imported conversation whole or absent
    finally:
        restarted.terminate()
        restarted.wait(timeout=60)
    assert len(answered) == 20


@pytest.mark.model
def test_doctor_reports_lost_vectors_before_it_changes_anything(
    tmp_path: Path, embedder: SwitchableEmbedder
) -> None:
    config = Config.from_env({}, data_dir=tmp_path, extractor="none")
    memory = Memory.open(config, embedder)
    sid = memory.store.sessions.create().id
    memory.add_episodes(sid, [NewEpisode("u", t) for t in FACTS])
    memory.close()
    import shutil

    shutil.rmtree(config.vectors_path / "episodes")  # the vectors deleted by hand
    result = CliRunner().invoke(cli, ["doctor", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "episodes marked indexed but missing from the vector index: 3" in result.output
    assert "episodes waiting for a vector: 0" in result.output
    assert "in the background" not in result.output  # no service runs to rebuild them
    repaired = CliRunner().invoke(cli, ["doctor", "--repair", "--data-dir", str(tmp_path)])
    assert "repaired: healthy" in repaired.output, repaired.output
