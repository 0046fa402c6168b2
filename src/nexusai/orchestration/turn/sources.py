"""Where a turn's candidates come from, as data (`SOURCES`): the spec's two legs and the
standing memories. A source says what it needs (the message's vector, to search or
to rank by) and whether it counts in fusion (its weight; a learned mode's features read it
by name); the plan asks the sources it wants, `gather` runs them at once and times each.

A new source is one `Source` in `SOURCES` (its `find` here or in a module beside it): it is
fetched, timed in `Server-Timing` and handed to fusion by its name. It counts in fusion
only with a weight (RRF) or a ranker feature that reads it (the learned mode)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nexusai.models import Episode
from nexusai.observability import RETRIEVAL_SECONDS, timed
from nexusai.orchestration.settings import RuntimeSettings
from nexusai.orchestration.standing import STANDING_DEPTH
from nexusai.orchestration.turn.legs import LegQuery
from nexusai.orchestration.turn.request import keyword_rows


@dataclass(frozen=True, kw_only=True)
class Source:
    """One place a turn's candidates come from, as data: what it is called, when it runs,
    what it needs and what it counts for."""

    name: str
    step: str  # its step in the turn's Server-Timing header
    # Whether it searches without the message's vector: it then runs while the message is
    # embedded, and the recent turns are dropped from what it found after.
    early: bool
    # Whether a turn under these settings asks it (`both`: both legs in full, whatever
    # their weights).
    wanted: Callable[[RuntimeSettings, bool], bool]
    # Its weight in RRF under these settings; None: it is not fused.
    weight: Callable[[RuntimeSettings], float | None]
    # Whether it reads the message's vector (to search, or to rank what it found): a plan
    # that asks it embeds the message.
    reads_vector: Callable[[RuntimeSettings], bool]
    # Its candidates for the turn, best first, within the turn's scope and filter.
    find: Callable[[LegQuery], list[Episode]]
    # How many rows it asks for a turn of this depth (and keyword headroom): what a deeper
    # turn cuts its rows to, to fuse a shallower stage as that turn would.
    rows: Callable[[int, int | None], int] = lambda depth, headroom: depth


def standing_episodes(leg: LegQuery) -> list[Episode]:
    """The scope's pinned episodes and recognised rules and preferences, whatever the
    search finds (`orchestration/standing.py` ranks them by the message)."""
    found = leg.memory.standing_episodes(leg.filter_ids(), STANDING_DEPTH, leg.rule)
    return leg.within(found)


def semantic_leg(leg: LegQuery) -> list[Episode]:
    """One vector query in the scope, recent ids excluded inside it; rows in rank order (an
    id whose row is gone is skipped)."""
    if leg.query_vector is None or leg.limit <= 0:
        return []
    with timed(RETRIEVAL_SECONDS, leg="semantic"):
        rows = leg.memory.vector_episodes(
            leg.query_vector, leg.filter_ids(), leg.recent_ids, leg.limit, leg.rule
        )
    return leg.within(rows)


def keyword_leg(leg: LegQuery) -> list[Episode]:
    """Asks for more than `limit` (`keyword_rows`) so that dropping recent turns still
    leaves enough: `gather` drops them, since it starts this leg before it knows them."""
    with timed(RETRIEVAL_SECONDS, leg="keyword"):
        rows = leg.memory.search_keyword(
            leg.query,
            leg.keyword_rows(),
            leg.filter_ids(),
            leg.keyword_budget,
            leg.rule,
        )
    return leg.within(rows)


def fused_leg(
    name: str,
    *,
    early: bool,
    weight: Callable[[RuntimeSettings], float],
    reads_vector: bool,
    find: Callable[[LegQuery], list[Episode]],
    rows: Callable[[int, int | None], int] = lambda depth, headroom: depth,
) -> Source:
    """A leg RRF sums by its weight: asked when that weight is above 0 (at 0, the spec's
    skipped call) or when both legs are wanted whatever their weights; timed under its
    name."""
    return Source(
        name=name,
        step=name,
        early=early,
        wanted=lambda settings, both: both or weight(settings) > 0,
        weight=weight,
        reads_vector=lambda settings: reads_vector,
        find=find,
        rows=rows,
    )


# In the order fusion sums them (the spec's semantic leg first).
SOURCES: tuple[Source, ...] = (
    # Nearest by meaning: the spec's semantic leg (the recent turns are left out inside
    # its query, so that it still gives `depth` rows).
    fused_leg(
        "semantic",
        early=False,
        weight=lambda settings: settings.semantic_weight,
        reads_vector=True,
        find=semantic_leg,
    ),
    # BM25: the spec's keyword leg.
    fused_leg(
        "keyword",
        early=True,
        weight=lambda settings: settings.keyword_weight,
        reads_vector=False,
        find=keyword_leg,
        rows=keyword_rows,
    ),
    # Pinned, rules and preferences: not fused (a section of their own), but the
    # recognised ones are ranked by their cosine to the message, so they read the vector.
    Source(
        name="standing",
        step="standing-read",
        early=True,
        wanted=lambda settings, both: True,
        weight=lambda settings: None,
        reads_vector=lambda settings: settings.standing_limit > 0,
        find=standing_episodes,
    ),
)
"""Every source a turn may ask, in the order fusion sums them. A new entry needs: its
`find` (here or in a module beside it, taking a `legs.LegQuery`); a `weight` under the
settings, or a feature that reads it by name (`learned.READS`, `ranking.features`, and a
ranker trained on it), or it is fetched for nothing; `rows` if it asks past `depth`. Its
`step` joins `api.TIMED_STEPS` and `Server-Timing` by itself (then `make docs`, since
docs/api.md lists them). By its name it reaches fusion, `FusedEpisode.ranks`, explain's
`ranks`, `legs`' `lists` and the eval's split of the evidence (`budgets.found_by`);
nothing else names it. `tests/test_third_source.py` is the pattern of its test."""
BY_NAME: dict[str, Source] = {source.name: source for source in SOURCES}
