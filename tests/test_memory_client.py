"""One contract for `MemoryClient`, run against both implementations: the memory service
in-process (`Memory`) and over HTTP (`HttpMemoryClient` against a live memory service on
loopback). Entity extraction is on (spaCy's real pipeline) in both."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest

from nexusai.app import create_app
from nexusai.config import Config
from nexusai.errors import NotFound
from nexusai.memory.extractors import SpacyExtractor
from nexusai.memory.service import Memory
from nexusai.models import Entity, Episode, EpisodeFilter, NewEpisode, Scope
from nexusai.orchestration.http_memory import HttpMemoryClient
from nexusai.orchestration.memory_client import MemoryClient
from nexusai.orchestration.turn.legs import LegQuery
from nexusai.orchestration.turn.sources import keyword_leg, semantic_leg
from tests.conftest import SwitchableEmbedder, entities_settled
from tests.live_server import live_server


@dataclass
class Contract:
    client: MemoryClient
    new_session: Callable[[int | None], int]
    new_project: Callable[[str], int]
    embed: Callable[[str], list[float]]
    # Waits for what a serving memory does behind its writes (entity extraction).
    settle: Callable[[], None] = lambda: None


@pytest.fixture(params=["in-process", "http"])
def contract(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    embedder: SwitchableEmbedder,
    spacy_extractor: SpacyExtractor,
) -> Iterator[Contract]:
    config = Config.from_env({}, data_dir=tmp_path / "data", extractor="none")
    if request.param == "in-process":
        memory = Memory.open(config, embedder, extractor=spacy_extractor)
        store = memory.store
        yield Contract(
            memory,
            lambda project: store.sessions.create(project).id,
            lambda name: store.projects.create(name).id,
            embedder.embed_one,
        )
        memory.close()
        return
    app = create_app(config, embedder, role="memory")
    with live_server(app) as url, httpx.Client(base_url=url) as raw:
        app.state.memory.entities.extractor = spacy_extractor
        client = HttpMemoryClient(url)
        yield Contract(
            client,
            lambda project: int(raw.post("/sessions", json={"projectId": project}).json()["id"]),
            lambda name: int(raw.post("/projects", json={"name": name}).json()["id"]),
            embedder.embed_one,
            lambda: entities_settled(raw),
        )
        client.close()


def add(c: Contract, session_id: int, *texts: str) -> list[Episode]:
    return c.client.add_episodes(session_id, [NewEpisode("user", t) for t in texts])


def test_add_then_recent_oldest_first(contract: Contract) -> None:
    sid = contract.new_session(None)
    stored = add(contract, sid, "one", "two", "three")
    assert [e.content for e in stored] == ["one", "two", "three"]
    assert all(e.session_id == sid for e in stored)
    recent = contract.client.recent_episodes(sid, 2)
    assert [e.id for e in recent] == [stored[1].id, stored[2].id]


def test_scope_is_the_project_or_the_lone_session(contract: Contract) -> None:
    project = contract.new_project("home")
    a, b = contract.new_session(project), contract.new_session(project)
    assert contract.client.scope(a) == Scope([a, b], every_session=True, project_id=project)
    lone = contract.new_session(None)
    assert contract.client.scope(a) == Scope([a, b], every_session=False, project_id=project)
    assert contract.client.scope(lone) == Scope([lone], every_session=False)
    with pytest.raises(NotFound, match="session 999"):
        contract.client.scope(999)


def test_a_scope_of_every_session_finds_what_a_filtered_one_finds(contract: Contract) -> None:
    """The legs search a scope of every session without a filter: the same rows, and a
    session another project made after the scope was read stays out."""
    project = contract.new_project("all")
    a, b = contract.new_session(project), contract.new_session(project)
    add(contract, a, "the kayak trip on the river", "a recipe for lentil soup")
    add(contract, b, "we went kayaking again in May")
    scope = contract.client.scope(a)
    assert scope.every_session
    later = contract.new_session(contract.new_project("elsewhere"))
    add(contract, later, "a kayak of somebody else's")
    vector = contract.embed("a kayak")
    unfiltered = LegQuery(
        memory=contract.client,
        query="kayak",
        query_vector=vector,
        session_ids=scope.session_ids,
        recent_ids=[],
        limit=10,
        every_session=True,
    )
    filtered = replace(unfiltered, every_session=False)
    for leg in (semantic_leg, keyword_leg):
        found = leg(unfiltered)
        assert [e.id for e in found] == [e.id for e in leg(filtered)]
        assert {e.session_id for e in found} == {a, b}


def test_vector_leg_finds_by_meaning_in_scope_and_excludes(contract: Contract) -> None:
    a, b = contract.new_session(None), contract.new_session(None)
    dog, _ = add(contract, a, "I adopted a puppy called Biscuit", "The invoice is overdue")
    [other] = add(contract, b, "My puppy Rex chews shoes")
    vector = contract.embed("what is my dog called?")
    found = contract.client.vector_episodes(vector, [a], [], 5)
    assert found[0].id == dog.id
    assert other.id not in {e.id for e in found}
    assert dog.id not in {e.id for e in contract.client.vector_episodes(vector, [a], [dog.id], 5)}
    assert contract.client.vector_episodes(vector, [], [], 5) == []


def test_vector_leg_lists_equal_cosines_by_id(contract: Contract) -> None:
    """The same words said again after the same turn have the same vector: their order must
    not depend on how the index happened to be built (a ranker trained on the lists would
    change with it)."""
    session = contract.new_session(None)
    texts = ["Got it, thanks!", "The invoice is overdue", "My puppy Rex chews shoes"] * 6
    added = add(contract, session, *texts)
    vector = contract.embed("got it, thank you")
    found = contract.client.vector_episodes(vector, [session], [], len(added))
    listed = [(-(e.score or 0.0), e.id) for e in found]
    assert len({score for score, _ in listed}) < len(listed) - 6  # the repeats tie
    assert listed == sorted(listed)


def test_keyword_leg_searches_words_never_syntax(contract: Contract) -> None:
    a, b = contract.new_session(None), contract.new_session(None)
    [hit] = add(contract, a, 'the "quarterly" report OR NEAR(budget) -draft*')
    add(contract, b, "the quarterly report for b")
    assert [e.id for e in contract.client.search_keyword("quarterly report", 10, [a])] == [hit.id]
    assert [e.id for e in contract.client.search_keyword('NEAR( "budget', 10, [a])] == [hit.id]
    assert contract.client.search_keyword("quarterly", 10, []) == []


def test_both_legs_carry_their_scores_and_the_keyword_budget(contract: Contract) -> None:
    sid = contract.new_session(None)
    walks = add(contract, sid, *(f"a long walk, day {i}" for i in range(5)))
    [heron] = add(contract, sid, "a heron by the canal")
    found = contract.client.search_keyword("walk heron", 10, [sid])
    assert {e.id for e in found} == {heron.id, *(w.id for w in walks)}
    assert all(e.score is not None and e.score > 0 for e in found)
    assert found == sorted(found, key=lambda e: -(e.score or 0))
    budgeted = contract.client.search_keyword("walk heron", 10, [sid], budget=2)
    assert [e.id for e in budgeted] == [heron.id]
    nearest = contract.client.vector_episodes(contract.embed("a bird"), [sid], [], 3)
    assert all(e.score is not None and -1 <= e.score <= 1 for e in nearest)


def test_entity_search_is_typed_and_scoped(contract: Contract) -> None:
    project = contract.new_project("work")
    a, b = contract.new_session(project), contract.new_session(project)
    outside = contract.new_session(None)
    add(contract, a, "Maria Lopez moved to Lisbon in March.")
    contract.settle()
    vector = contract.embed("a city in Portugal")
    found = contract.client.search_entities(vector, [a, b], 5)
    assert all(isinstance(e, Entity) for e in found)
    assert "Lisbon" in {e.name for e in found}
    lisbon = next(e for e in found if e.name == "Lisbon")
    assert (lisbon.type, lisbon.mention_count) == ("place", 1)
    assert contract.client.search_entities(vector, [outside], 5) == []
    assert contract.client.search_entities(None, [a], 5) == []


def test_writing_to_an_unknown_session_is_not_found(contract: Contract) -> None:
    with pytest.raises(NotFound, match="session 999"):
        add(contract, 999, "hello")


def test_a_session_is_resolved_by_title_and_project_name(contract: Contract) -> None:
    first = contract.client.resolve_session("team", "alice")
    assert contract.client.resolve_session("team", "alice") == first
    other = contract.client.resolve_session("team", "bob")
    assert other != first
    assert contract.client.scope(first).session_ids == [first, other]  # one project
    loose = contract.client.resolve_session(None, "alice")
    assert loose not in (first, other)
    assert contract.client.scope(loose).session_ids == [loose]


def test_the_scope_says_the_sessions_project(contract: Contract) -> None:
    project = contract.new_project("work")
    inside, alone = contract.new_session(project), contract.new_session(None)
    assert contract.client.scope(inside).project_id == project
    assert contract.client.scope(alone).project_id is None


def test_each_leg_searches_only_what_a_filter_keeps(contract: Contract) -> None:
    """Eight better matches said by someone else are filtered out inside each search: the
    filtered ones still come back, `limit` of them."""
    sid = contract.new_session(None)
    said = [
        NewEpisode("ana", f"My kayak number {i} is red", metadata={"boat": True}) for i in range(8)
    ]
    said += [NewEpisode("user", f"a kayak trip, day {i}", metadata={"boat": 1}) for i in range(3)]
    said.append(NewEpisode("user", "I always keep my kayak dry, I prefer that"))
    added = contract.client.add_episodes(sid, said)
    mine = {e.id for e in added[8:11]}
    rule = EpisodeFilter(speakers=("user",), metadata=(("boat", ("1", "2")),))
    vector = contract.embed("my red kayak")
    assert {e.id for e in contract.client.vector_episodes(vector, [sid], [], 3, rule)} == mine
    assert {e.id for e in contract.client.search_keyword("kayak", 3, [sid], 0, rule)} == mine
    assert (
        contract.client.vector_episodes(vector, [sid], [], 3, EpisodeFilter(speakers=("x",))) == []
    )
    standing = contract.client.standing_episodes([sid], 10, EpisodeFilter(speakers=("user",)))
    assert [e.content for e in standing] == ["I always keep my kayak dry, I prefer that"]
    assert contract.client.standing_episodes([sid], 10, EpisodeFilter(speakers=("ana",))) == []
