"""The turn's pure parts on their own: `plan` decides from the settings, the mode and the
sources, and `assemble` makes a context from a `Gathered` built here by hand. No store, no
model: what they decide can be read without running a turn."""

from __future__ import annotations

from dataclasses import replace

from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.modes import RRF, Learned
from nexusai.orchestration.packing import PACK_DEPTH, PACKERS
from nexusai.orchestration.settings import DEFAULTS, RuntimeSettings
from nexusai.orchestration.turn import Gathered, TurnRequest, assemble, plan
from nexusai.ranking.model import shipped
from tests.fused import fuse_ranked

ASKED = TurnRequest(1, "where did we go kayaking?")


def ep(i: int, text: str = "", standing: str | None = None) -> Episode:
    content = text or f"note {i}"
    return Episode(i, 1, "user", content, "2026-03-01T10:00:00Z", "", {}, standing=standing)


def gathered(**found: list[Episode]) -> Gathered:
    return Gathered(
        vector=[0.0] * 4,
        embedder="minilm",
        recent=[],
        found=dict(found),
        standing_candidates=[],
        entities=[],
        warnings=[],
        timings={},
    )


def test_the_plan_asks_the_sources_the_settings_want() -> None:
    turn = plan(DEFAULTS, ASKED, RRF())
    assert turn.names == ("semantic", "standing")  # keywordWeight 0: the spec's skipped call
    assert turn.weights == {"semantic": 1.0, "keyword": 0.0}
    assert turn.fused() == ("semantic",)
    both = plan(replace(DEFAULTS, keyword_weight=1.0), ASKED, RRF())
    assert both.names == ("semantic", "keyword", "standing")
    assert (both.depth, both.headroom, both.pool) == (DEFAULTS.semantic_limit, None, 10)
    legs = plan(DEFAULTS, replace(ASKED, legs=True), RRF())
    assert legs.names == ("semantic", "keyword", "standing")  # in full, whatever the weights
    assert legs.fused() == ("semantic", "keyword")


def test_the_plan_embeds_when_a_source_it_asks_reads_the_vector() -> None:
    """semanticWeight 0 and no entities: the standing ones are still ranked by the message
    (so a far rule is not carried), unless no recognised one is carried at all."""
    keyword_only = replace(DEFAULTS, semantic_weight=0.0, keyword_weight=1.0, entity_limit=0)
    assert plan(keyword_only, ASKED, RRF()).embed
    assert "semantic" not in plan(keyword_only, ASKED, RRF()).names
    assert not plan(replace(keyword_only, standing_limit=0), ASKED, RRF()).embed
    given = replace(ASKED, vector=[0.1] * 4)
    assert not plan(DEFAULTS, given, RRF()).embed  # made already: the eval's question


def test_the_learned_mode_asks_deeper_and_packs_dense() -> None:
    ranker = shipped()
    budgeted: RuntimeSettings = replace(DEFAULTS, fusion="learned", context_budget=1000)
    turn = plan(budgeted, ASKED, Learned(ranker))
    assert turn.names == ("semantic", "keyword", "standing")  # both, whatever the weights
    assert (turn.depth, turn.headroom, turn.pool) == (ranker.depth, DEFAULTS.recent_limit, 50)
    assert turn.packer is PACKERS["dense"]
    assert plan(replace(DEFAULTS, context_budget=1000), ASKED, RRF()).pool == PACK_DEPTH


def test_assemble_fuses_the_sources_the_plan_weighs_by_name() -> None:
    semantic, keyword = [ep(1), ep(2), ep(3)], [ep(3), ep(4)]
    settings = replace(DEFAULTS, semantic_weight=1.0, keyword_weight=2.0, semantic_limit=3)
    turn = plan(settings, ASKED, RRF())
    context = assemble(turn, gathered(semantic=semantic, keyword=keyword))
    assert context.memories == fuse_ranked(semantic, keyword, 1.0, 2.0, 3)
    assert [m.episode.id for m in context.memories] == [3, 4, 1]
    # A plan that does not ask the keyword leg does not read its list, though it is there.
    alone = plan(replace(settings, keyword_weight=0.0), ASKED, RRF())
    fused = assemble(alone, gathered(semantic=semantic, keyword=keyword)).memories
    assert [(m.episode.id, m.ranks.get("keyword")) for m in fused] == [
        (1, None),
        (2, None),
        (3, None),
    ]


def test_a_source_without_a_weight_is_not_fused() -> None:
    """A list under a name no source weighs (as a new source's would be without one) adds
    nothing: it counts only once it has a weight or a ranker feature."""
    turn = plan(DEFAULTS, ASKED, RRF())
    context = assemble(turn, gathered(semantic=[ep(1)], neighbours=[ep(9), ep(8)]))
    assert [m.episode.id for m in context.memories] == [1]


def test_assemble_carries_standing_ones_by_the_floor_only_with_a_vector() -> None:
    near, far = ep(7, "I prefer cited versions", standing="preference"), ep(8, standing="x")
    ranked = [FusedEpisode(near, 0.6), FusedEpisode(far, 0.1)]
    settings = replace(DEFAULTS, standing_limit=1)
    turn = plan(settings, ASKED, RRF())
    with_vector = replace(gathered(semantic=[ep(1)]), standing_candidates=ranked)
    assert [f.episode.id for f in assemble(turn, with_vector).standing] == [7]
    unfloored = replace(settings, standing_floor=0.7)  # 0.6 is under it: none of the two
    assert assemble(replace(turn, settings=unfloored), with_vector).standing == []
    blind = replace(with_vector, vector=None)  # no vector: the first (newest) comes, no floor
    assert [f.episode.id for f in assemble(replace(turn, settings=unfloored), blind).standing] == [
        7
    ]


def test_assemble_says_what_the_plan_and_the_reads_said() -> None:
    silent = replace(DEFAULTS, semantic_weight=0.0, keyword_weight=0.0)
    read = replace(gathered(), warnings=["the embedder failed: only keyword memories this turn"])
    warnings = assemble(plan(silent, ASKED, RRF()), read).warnings
    assert warnings[0].startswith("semanticWeight and keywordWeight are both 0")
    assert warnings[1].startswith("the embedder failed")
    learned = plan(replace(DEFAULTS, fusion="learned"), ASKED, Learned(shipped()))
    other = replace(gathered(semantic=[ep(1)]), embedder="e5-small")
    assert "trained on" in assemble(learned, other).warnings[0]
