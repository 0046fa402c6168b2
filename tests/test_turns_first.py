"""Turns first: entity extraction behind the writes waits, between its small steps, while a
turn is in flight, and the turn's reads mark it so on every face."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient

from nexusai.memory.background import TurnsFirst
from nexusai.memory.extractors import PAUSE_CHARS, SpacyExtractor
from nexusai.memory.service import Memory


def test_the_wait_lets_every_turn_in_flight_pass() -> None:
    turns = TurnsFirst(patience=60.0)
    turns.wait()  # none in flight: no wait
    waited = threading.Event()
    with turns.turn(), turns.turn():
        worker = threading.Thread(target=lambda: (turns.wait(), waited.set()))
        worker.start()
        assert not waited.wait(0.2), "it went on while two turns were in flight"
    worker.join(5)
    assert waited.is_set()


def test_a_stream_of_turns_still_leaves_background_work_a_step() -> None:
    turns = TurnsFirst(patience=0.05)
    with turns.turn():
        turns.wait()  # returns: patience is its bound, so the work is never starved


def test_spacy_pauses_between_short_runs_of_a_long_text(spacy_extractor: SpacyExtractor) -> None:
    paragraph = "Maria flew from Lisbon to Berlin to meet the Siemens team. " * 12
    texts = [paragraph] * 6  # about 700 characters each
    paused: list[int] = []
    found = spacy_extractor.extract(texts, lambda: paused.append(1))
    assert len(paused) >= sum(map(len, texts)) // PAUSE_CHARS
    assert found == spacy_extractor.extract(texts)  # pausing changes nothing found
    assert {m.name for m in found[0]} >= {"Maria", "Lisbon", "Berlin"}


def test_a_turns_reads_are_turns_in_flight_on_every_face(client: TestClient) -> None:
    """In one process orchestration holds the gate for the whole turn; the memory service's
    retrieval routes hold it for each read, for an orchestration of its own."""
    memory: Memory = client.app.state.memory  # type: ignore[attr-defined]
    session = client.post("/sessions", json={}).json()["id"]
    before = memory.turns.entered
    client.post("/context", json={"sessionId": session, "message": "tea"}).raise_for_status()
    assert memory.turns.entered == before + 1  # one turn, however many reads it made
    client.get(f"/sessions/{session}/scope").raise_for_status()
    assert memory.turns.entered == before + 2


def test_fenced_code_is_not_read_for_names(spacy_extractor: SpacyExtractor) -> None:
    code = (
        "```python\n# Connect to Redis on Amazon Web Services\nfrom flask import Flask\n"
        "app = Flask(__name__)\n```"
    )
    said = f"Ask Maria in Lisbon.\n{code}\nThen Berlin."
    names = {m.name for m in spacy_extractor.extract([said])[0]}
    assert names == {"Maria", "Lisbon", "Berlin"}  # read whole, Flask and AWS come too
