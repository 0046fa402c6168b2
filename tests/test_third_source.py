"""A source beside the spec's two legs, followed from the table of sources to the answer:
a fake third `Source` with a weight is asked, fused by name, shown with its rank in
`explain`, and counted by its name in the eval's split of the evidence. The store, the
model and both legs are real; only the third source is made up here."""

from __future__ import annotations

from dataclasses import replace

from nexusai.evaluation.budgets import BUDGETS, Packed, depths, found_by, within_budget
from nexusai.memory.service import Memory
from nexusai.models import Episode, NewEpisode
from nexusai.orchestration.api import context_out
from nexusai.orchestration.modes import RRF
from nexusai.orchestration.settings import DEFAULTS
from nexusai.orchestration.turn import TurnRequest, assemble, gather, plan
from nexusai.orchestration.turn.legs import LegQuery
from nexusai.orchestration.turn.sources import SOURCES, Source
from tests.conftest import SwitchableEmbedder

SAID = [
    "We kayaked on the lake last summer",
    "The kayak rental place was by the north shore",
    "My sister is visiting in June",
    "The spare key is under the blue flower pot",
    "I started a pottery class on Tuesdays",
]


def pinboard(on_it: list[int]) -> Source:
    """A made-up source: the episodes pinned to a board, found whatever the message says."""

    def find(leg: LegQuery) -> list[Episode]:
        scope = set(leg.session_ids)
        pinned = leg.memory.recent_episodes(leg.session_ids[0], 100)
        return [e for i in on_it for e in pinned if e.id == i and e.session_id in scope]

    return Source(
        name="pinboard",
        step="pinboard",
        early=True,
        wanted=lambda settings, both: True,
        weight=lambda settings: 1.0,
        reads_vector=lambda settings: False,
        find=find,
    )


def test_a_third_weighted_source_is_fused_explained_and_counted_by_its_name(
    memory: Memory, embedder: SwitchableEmbedder
) -> None:
    session = memory.store.sessions.create()
    stored = memory.add_episodes(session.id, [NewEpisode("user", text) for text in SAID])
    key, kayak = stored[3].id, stored[1].id  # no word of the question; the keyword leg's
    settings = replace(DEFAULTS, semantic_weight=0.0, keyword_weight=1.0, recent_limit=0)
    request = TurnRequest(session.id, "where did we rent the kayak?", explain=True)
    turn = plan(settings, request, RRF(), sources=(*SOURCES, pinboard([key, kayak])))
    assert turn.names == ("keyword", "standing", "pinboard")
    assert turn.weights["pinboard"] == 1.0

    context = assemble(turn, gather(turn, memory, embedder))
    ranks = {m.episode.id: dict(m.ranks) for m in context.memories}
    assert ranks[key] == {"pinboard": 1}
    assert ranks[kayak]["pinboard"] == 2
    assert set(ranks[kayak]) == {"keyword", "pinboard"}
    assert context.memories[0].episode.id == kayak  # found by both: first
    assert "pinboard" in context.timings

    shown = {m.id: m.ranks for m in context_out(context, explain=True).memories}
    assert shown[key] == {"pinboard": 1}
    assert shown[kayak] == ranks[kayak]

    by_memory = {m.episode.id: found_by(m) for m in context.memories}
    assert (by_memory[key], by_memory[kayak]) == ("pinboard", "both")
    packed = Packed("placed")
    lists = {depth: context.memories for depth in depths(BUDGETS)}
    packed.add(("chats", "c1"), request.message, lists, (), [key, kayak])
    row = within_budget("placed", packed.given(budgets=(500,)), [[key, kayak]], ["x"])["placed"]
    parts = row["foundBy"]["overall"]["500"]
    assert (parts["pinboard"], parts["both"], parts["keyword"]) == (0.5, 0.5, 0.0)
