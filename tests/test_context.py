from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from nexusai.config import Config
from nexusai.embedders import Embedder, Vector
from nexusai.memory.service import Memory
from nexusai.memory.sqlite.store import SqliteStore
from nexusai.models import NewEpisode, Scope
from nexusai.orchestration.settings import DEFAULTS, RuntimeSettings
from nexusai.orchestration.turn import TurnRequest, run_turn
from nexusai.ranking.model import shipped
from tests.conftest import SwitchableEmbedder

BOTH = replace(DEFAULTS, keyword_weight=1.0, recent_limit=2)
NO_RECENT = replace(BOTH, recent_limit=0)


def write(memory: Memory, session_id: int, *texts: str) -> list[int]:
    return [e.id for e in memory.add_episodes(session_id, [NewEpisode("user", t) for t in texts])]


@pytest.fixture
def fts_queries(config: Config, embedder: SwitchableEmbedder) -> Iterator[tuple[Memory, list[str]]]:
    """A memory whose real SQLite connections report every FTS5 MATCH they run."""
    seen: list[str] = []
    memory = Memory.open(config, embedder)
    assert isinstance(memory.store, SqliteStore)
    memory.store.close()  # reopen connections with the trace on, in every thread
    memory.store.trace = lambda sql: seen.append(sql) if "MATCH" in sql else None
    yield memory, seen
    memory.close()


def test_keyword_weight_zero_makes_no_fts_call(
    fts_queries: tuple[Memory, list[str]], embedder: SwitchableEmbedder
) -> None:
    memory, seen = fts_queries
    sid = memory.store.sessions.create().id
    write(memory, sid, "the zebra crossing", "a zebra")
    settings = replace(DEFAULTS, keyword_weight=0.0, recent_limit=0)
    context = run_turn(memory, embedder, settings, TurnRequest(sid, "zebra"))
    assert context.memories  # semantic still finds them
    assert seen == []
    run_turn(memory, embedder, NO_RECENT, TurnRequest(sid, "zebra"))
    assert len(seen) == 1


class KeywordFirst(SwitchableEmbedder):
    """The real model, which first waits (five seconds at most) for a keyword query."""

    def __init__(self, inner: Embedder, seen: list[str]) -> None:
        super().__init__(inner)
        self.seen = seen
        self.saw: list[str] = []

    def embed_batch(self, texts: Sequence[str]) -> list[Vector]:
        deadline = time.monotonic() + 5
        while not self.seen and time.monotonic() < deadline:
            time.sleep(0.005)
        self.saw = list(self.seen)
        return super().embed_batch(texts)


def test_the_keyword_leg_is_searched_while_the_message_is_embedded(
    fts_queries: tuple[Memory, list[str]], embedder: SwitchableEmbedder
) -> None:
    memory, seen = fts_queries
    sid = memory.store.sessions.create().id
    write(memory, sid, "the zebra crossing", "a heron on the canal", "lunch at noon")
    waiting = KeywordFirst(embedder.inner, seen)
    turn = run_turn(memory, waiting, BOTH, TurnRequest(sid, "zebra"))
    assert len(waiting.saw) == 1  # the keyword query ran before the message was embedded
    # and the recent turns (the last two) are still left out of what it found.
    assert [m.episode.content for m in turn.memories] == ["the zebra crossing"]


def test_a_turn_that_reads_no_vector_embeds_nothing(
    memory: Memory, embedder: SwitchableEmbedder
) -> None:
    """semanticWeight 0, no entities and no recognised standing ones: no source reads the
    message's vector, so it is not made."""
    sid = memory.store.sessions.create().id
    write(memory, sid, "unrelated words", "the zebra crossing")
    calls = embedder.calls
    settings = replace(
        DEFAULTS,
        semantic_weight=0.0,
        keyword_weight=1.0,
        recent_limit=0,
        entity_limit=0,
        standing_limit=0,
    )
    context = run_turn(memory, embedder, settings, TurnRequest(sid, "zebra"))
    assert embedder.calls == calls
    assert [m.episode.content for m in context.memories] == ["the zebra crossing"]
    assert all(m.ranks.get("semantic") is None for m in context.memories)


def test_query_is_embedded_once_per_turn(memory: Memory, embedder: SwitchableEmbedder) -> None:
    sid = memory.store.sessions.create().id
    write(memory, sid, "one", "two")
    calls = embedder.calls
    run_turn(memory, embedder, BOTH, TurnRequest(sid, "a question"))
    assert embedder.calls == calls + 1


def test_recent_ids_never_appear_in_memories(memory: Memory, embedder: SwitchableEmbedder) -> None:
    sid = memory.store.sessions.create().id
    ids = write(memory, sid, *[f"my dog Biscuit likes walk number {i}" for i in range(6)])
    context = run_turn(memory, embedder, BOTH, TurnRequest(sid, "Biscuit walk dog"))
    recent = {e.id for e in context.recent}
    assert recent == set(ids[-2:])
    found = {m.episode.id for m in context.memories}
    assert found == set(ids[:-2])
    assert not recent & found


def test_scope_never_leaks_across_projects(memory: Memory, embedder: SwitchableEmbedder) -> None:
    p1 = memory.store.projects.create("one").id
    p2 = memory.store.projects.create("two").id
    a1 = memory.store.sessions.create(p1).id
    a2 = memory.store.sessions.create(p1).id
    b1 = memory.store.sessions.create(p2).id
    lone = memory.store.sessions.create().id
    [shared] = write(memory, a2, "the secret password is swordfish")
    write(memory, b1, "the secret password is swordfish")
    write(memory, lone, "the secret password is swordfish")
    settings = replace(BOTH, recent_limit=0)
    context = run_turn(memory, embedder, settings, TurnRequest(a1, "secret password swordfish"))
    assert [m.episode.id for m in context.memories] == [shared]
    alone = memory.store.sessions.create().id
    assert (
        run_turn(memory, embedder, settings, TurnRequest(alone, "secret password")).memories == []
    )


def test_failing_embedder_still_gives_keyword_memories(
    memory: Memory, embedder: SwitchableEmbedder
) -> None:
    sid = memory.store.sessions.create().id
    write(memory, sid, "unrelated words", "x", "y", "the zebra crossing")
    embedder.failing = True
    context = run_turn(memory, embedder, NO_RECENT, TurnRequest(sid, "zebra"))
    assert [m.episode.content for m in context.memories] == ["the zebra crossing"]
    assert context.warnings
    assert "embedder" in context.warnings[0]


def test_fused_result_has_at_most_semantic_limit(
    memory: Memory, embedder: SwitchableEmbedder
) -> None:
    sid = memory.store.sessions.create().id
    write(memory, sid, *[f"note {i} about the garden" for i in range(30)])
    settings: RuntimeSettings = replace(BOTH, semantic_limit=4)
    vector = embedder.embed_one("garden")
    asked = TurnRequest(sid, "garden", scope=Scope([sid]), vector=vector)
    fused = run_turn(memory, embedder, settings, asked).memories
    assert len(fused) == 4
    assert all(f.ranks.get("semantic") or f.ranks.get("keyword") for f in fused)


def test_server_timing_says_where_the_turn_went(client: TestClient) -> None:
    session = client.post("/sessions", json={}).json()["id"]
    client.post(f"/sessions/{session}/episodes", json={"speaker": "user", "content": "tea"})
    body = {"sessionId": session, "message": "tea", "settings": {"keywordWeight": 1}}
    header = client.post("/context", json=body).headers["Server-Timing"]
    steps = dict(part.split(";dur=") for part in header.split(", "))
    assert list(steps) == [
        "embed",
        "semantic",
        "keyword",
        "standing-read",  # each source's step comes from the source: a new one is timed too
        "entities",
        "standing",
        "fuse",
        "pack",
        "shape",
        "total",
    ]
    spent = {name: float(ms) for name, ms in steps.items()}
    assert spent["total"] >= spent["embed"] + spent["fuse"]
    assert spent["total"] == max(spent.values())  # the whole turn holds each of its steps
    no_keyword = client.post("/context", json={**body, "settings": {"keywordWeight": 0}})
    assert "keyword;" not in no_keyword.headers["Server-Timing"]


def test_a_keyword_budget_leaves_the_commonest_words_out_of_the_turn(
    memory: Memory, embedder: SwitchableEmbedder
) -> None:
    sid = memory.store.sessions.create().id
    walks = write(memory, sid, *(f"a walk with the dog, day {i}" for i in range(6)))
    heron = write(memory, sid, "a heron on the canal")
    keyword_only = replace(NO_RECENT, semantic_weight=0.0, keyword_weight=1.0)
    every = run_turn(memory, embedder, keyword_only, TurnRequest(sid, "walk heron"))
    assert {m.episode.id for m in every.memories} == {*walks, *heron}
    budgeted = replace(keyword_only, keyword_budget=3)  # "walk" has 6 entries, "heron" 1
    kept = run_turn(memory, embedder, budgeted, TurnRequest(sid, "walk heron"))
    assert [m.episode.id for m in kept.memories] == heron


def test_a_learned_turn_asks_the_keyword_leg_for_its_depth_and_the_recent_turns(
    fts_queries: tuple[Memory, list[str]], embedder: SwitchableEmbedder
) -> None:
    memory, seen = fts_queries
    sid = memory.store.sessions.create().id
    write(memory, sid, *(f"kayak trip number {n} on the lake" for n in range(12)))
    ranker = replace(shipped(), depth=4)
    settings = replace(BOTH, fusion="learned", recent_limit=2, semantic_limit=3)
    turn = run_turn(memory, embedder, settings, TurnRequest(sid, "kayak lake"), ranker=ranker)
    assert "LIMIT 6)" in seen[-1]  # 4 deep, and the 2 recent turns it drops
    # The legs a client re-fuses are asked with the spec's headroom; the memories agree.
    with_legs = run_turn(
        memory, embedder, settings, TurnRequest(sid, "kayak lake", legs=True), ranker=ranker
    )
    assert "LIMIT 8)" in seen[-1]
    assert [m.episode.id for m in turn.memories] == [m.episode.id for m in with_legs.memories]
    assert len(turn.memories) == 3


@pytest.mark.parametrize("budget", [0, 300])
def test_the_prompts_days_are_the_turns_own(client: TestClient, budget: int) -> None:
    """A memory of 23:00 in New York is under that day, not UTC's next one, when the turn
    says its time; its cost is what the prompt counts either way."""
    from nexusai.tokens import count_tokens

    project = client.post("/projects", json={"name": "ny"}).json()["id"]
    said = client.post("/sessions", json={"projectId": project}).json()["id"]
    late = {
        "speaker": "user",
        "content": "We adopted Biscuit tonight",
        "occurredAt": "2026-05-01T23:00:00-05:00",
    }
    client.post(f"/sessions/{said}/episodes", json=late)
    asking = client.post("/sessions", json={"projectId": project}).json()["id"]
    body = {
        "sessionId": asking,
        "message": "When did we adopt Biscuit?",
        "settings": {"contextBudget": budget},
    }
    local = client.post("/context", json={**body, "now": "2026-05-01T23:30:00-05:00"}).json()
    assert "1 May 2026\nuser: We adopted Biscuit tonight" in local["prompt"]
    utc = client.post("/context", json=body).json()
    assert "2 May 2026\nuser: We adopted Biscuit tonight" in utc["prompt"]
    if budget:
        assert local["tokens"] == count_tokens(local["prompt"])
