from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from nexusai.config import Config
from nexusai.memory.service import EmbedderMismatch, Memory
from nexusai.memory.vectors.qdrant import QdrantVectorIndex
from nexusai.models import NewEpisode
from nexusai.orchestration.settings import DEFAULTS
from nexusai.orchestration.turn import TurnRequest, run_turn
from nexusai.orchestration.turn.gather import embed_query
from nexusai.orchestration.turn.legs import LegQuery
from nexusai.orchestration.turn.sources import semantic_leg
from tests.conftest import SwitchableEmbedder

FACTS = [
    "I adopted a puppy called Biscuit",
    "The quarterly report is due on Friday",
    "We should repaint the kitchen blue",
    "My sister moved to Lisbon last year",
]


def write(memory: Memory, session_id: int, *texts: str) -> list[int]:
    return [e.id for e in memory.add_episodes(session_id, [NewEpisode("user", t) for t in texts])]


def semantic(memory: Memory, query: str, scope: list[int], recent: list[int] = ()) -> list[int]:  # type: ignore[assignment]
    vector = memory.embedder.embed_one(query)
    return [e.id for e in semantic_leg(_asked(memory, vector, scope, list(recent)))]


def _asked(
    memory: Memory, vector: list[float] | None, scope: list[int], recent: list[int]
) -> LegQuery:
    return LegQuery(
        memory=memory,
        query="",
        query_vector=vector,
        session_ids=scope,
        recent_ids=recent,
        limit=10,
    )


@pytest.fixture(params=["edge", "qdrant-client"])
def any_memory(request: pytest.FixtureRequest, memory: Memory, embedder: SwitchableEmbedder):
    if request.param == "edge":
        return memory
    remote = QdrantVectorIndex(QdrantClient(location=":memory:"), "episodes", embedder.dimension)
    return Memory(memory.store, embedder, remote)


def test_a_paraphrase_finds_its_episode(any_memory: Memory) -> None:
    sid = any_memory.store.sessions.create().id
    ids = write(any_memory, sid, *FACTS)
    assert semantic(any_memory, "what is my dog's name?", [sid])[0] == ids[0]


def test_scope_and_recent_ids(any_memory: Memory) -> None:
    a = any_memory.store.sessions.create().id
    b = any_memory.store.sessions.create().id
    [dog_a] = write(any_memory, a, FACTS[0])
    [dog_b] = write(any_memory, b, FACTS[0])
    assert semantic(any_memory, "my dog", [a]) == [dog_a]
    assert set(semantic(any_memory, "my dog", [a, b])) == {dog_a, dog_b}
    assert semantic(any_memory, "my dog", [a, b], recent=[dog_a]) == [dog_b]


def test_deletes_remove_vectors(any_memory: Memory) -> None:
    project = any_memory.store.projects.create("p")
    s1 = any_memory.store.sessions.create(project.id).id
    s2 = any_memory.store.sessions.create(project.id).id
    [e1, e2] = write(any_memory, s1, FACTS[0], FACTS[1])
    write(any_memory, s2, FACTS[2])
    any_memory.delete_episode(e1)
    assert any_memory.vectors.count() == 2
    assert semantic(any_memory, "my dog", [s1]) == [e2]
    any_memory.delete_session(s1)
    assert any_memory.vectors.count() == 1
    any_memory.delete_project(project.id)
    assert any_memory.vectors.count() == 0


def test_none_vector_gives_nothing(memory: Memory) -> None:
    sid = memory.store.sessions.create().id
    write(memory, sid, FACTS[0])
    assert semantic_leg(_asked(memory, None, [sid], [])) == []


def test_vector_without_row_is_skipped(memory: Memory) -> None:
    sid = memory.store.sessions.create().id
    ids = write(memory, sid, *FACTS)
    memory.store.episodes.delete(ids[0])  # row gone, vector left behind
    assert memory.vectors.count() == 4
    found = semantic(memory, "what is my dog's name?", [sid])
    assert ids[0] not in found
    assert len(found) == 3


def test_failing_embedder_keeps_episodes_pending_then_indexes_them(
    memory: Memory, embedder: SwitchableEmbedder
) -> None:
    sid = memory.store.sessions.create().id
    embedder.failing = True
    stored = write(memory, sid, FACTS[0], FACTS[1])
    assert memory.count_pending_vectors() == 2
    assert memory.vectors.count() == 0
    assert embed_query(memory.embedder, "dog") is None
    embedder.failing = False
    write(memory, sid, FACTS[2])  # the next write retries what is pending
    assert memory.count_pending_vectors() == 0
    assert memory.vectors.count() == 3
    assert semantic(memory, "what is my dog's name?", [sid])[0] == stored[0]


def test_pending_episodes_are_indexed_at_start_up(
    config: Config, embedder: SwitchableEmbedder
) -> None:
    from fastapi.testclient import TestClient

    from nexusai.app import create_app

    first = Memory.open(config, embedder)
    sid = first.store.sessions.create().id
    embedder.failing = True
    write(first, sid, *FACTS)
    first.close()
    embedder.failing = False
    with TestClient(create_app(config, embedder)) as client:
        memory: Memory = client.app.state.memory  # type: ignore[attr-defined]
        for _ in range(200):
            if memory.count_pending_vectors() == 0:
                break
            import time

            time.sleep(0.05)
        assert memory.count_pending_vectors() == 0
        assert memory.vectors.count() == 4


def test_edited_content_gets_a_new_vector(memory: Memory) -> None:
    sid = memory.store.sessions.create().id
    [eid] = write(memory, sid, FACTS[1])
    memory.update_episode(eid, content=FACTS[0])
    assert semantic(memory, "what is my dog's name?", [sid]) == [eid]
    assert memory.count_pending_vectors() == 0


def test_vectors_survive_a_reopen(config: Config, embedder: SwitchableEmbedder) -> None:
    first = Memory.open(config, embedder)
    sid = first.store.sessions.create().id
    ids = write(first, sid, *FACTS)
    first.close()
    again = Memory.open(config, embedder)
    assert again.vectors.count() == 4
    assert semantic(again, "what is my dog's name?", [sid])[0] == ids[0]
    again.close()


class OtherEmbedder(SwitchableEmbedder):
    def __init__(self, inner: SwitchableEmbedder) -> None:
        super().__init__(inner.inner)
        self.name = "local:some-other-model"


def test_embedder_mismatch_is_a_clear_error_and_reindex_fixes_it(
    config: Config, embedder: SwitchableEmbedder, tmp_path: Path
) -> None:
    first = Memory.open(config, embedder)
    sid = first.store.sessions.create().id
    write(first, sid, *FACTS)
    first.close()
    other = OtherEmbedder(embedder)
    with pytest.raises(EmbedderMismatch, match="nexus reindex"):
        Memory.open(config, other)
    rebuilding = Memory.open(config, other, check=False)
    seen: list[int] = []
    assert rebuilding.reindex(progress=seen.append) == 4
    assert sum(seen) == 4
    rebuilding.close()
    reopened = Memory.open(config, other)
    assert reopened.vectors.count() == 4
    reopened.close()


def test_a_turn_after_a_long_answer_is_found_by_its_own_words(memory: Memory) -> None:
    """The model reads 256 tokens: a long turn before a reply must not crowd the reply out
    of its own vector."""
    sid = memory.store.sessions.create().id
    long_answer = " ".join(
        f"Step {i}: run the migration tool against the staging database and check the logs."
        for i in range(60)
    )
    ids = write(memory, sid, long_answer, "By the way, my sister moved to Lisbon last year")
    assert semantic(memory, "where does my sister live now?", [sid])[0] == ids[1]


LONG_ANSWER = " ".join(
    [
        f"Step {i}: run the migration tool against the staging database and check the logs."
        for i in range(12)
    ]
    + ["Finally, the metrics exporter listens on port 9464 and Grafana reads it from there."]
)


def test_a_long_episode_is_one_vector_and_found_far_into_it_by_its_words(
    any_memory: Memory,
) -> None:
    """A long turn is embedded by its opening (what the model reads); words far into it are
    keyword-indexed, so a fused turn still finds it."""
    sid = any_memory.store.sessions.create().id
    ids = write(any_memory, sid, LONG_ANSWER, *FACTS)
    assert any_memory.vectors.count() == len(ids)
    question = "which port does Grafana scrape the exporter on?"
    # The turn after it is found too: it is indexed with the end of this one.
    assert ids[0] in [e.id for e in any_memory.search_keyword(question, 2, [sid])]
    fused = replace(DEFAULTS, keyword_weight=1.0, recent_limit=0)
    context = run_turn(any_memory, any_memory.embedder, fused, TurnRequest(sid, question))
    assert ids[0] in [m.episode.id for m in context.memories[:2]]
    assert len({m.episode.id for m in context.memories}) == len(context.memories)


def test_every_window_goes_with_its_episode(any_memory: Memory) -> None:
    sid = any_memory.store.sessions.create().id
    [long_id, short_id] = write(any_memory, sid, LONG_ANSWER, FACTS[0])
    any_memory.update_episode(long_id, content="Grafana is on port 3000")
    assert any_memory.vectors.count() == 2  # the windows it no longer has are gone
    any_memory.update_episode(long_id, content=LONG_ANSWER)
    any_memory.delete_episode(long_id)
    assert any_memory.vectors.count() == 1
    assert any_memory.vectors.ids() == {short_id}
