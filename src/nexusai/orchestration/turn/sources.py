"""Where a turn's candidates come from, each behind one small protocol: the spec's two legs
and the standing memories. A source says what it needs (the message's vector, to search or
to rank by) and whether it counts in fusion (its weight; a learned mode's features read it
by name); the plan asks the sources it wants, `gather` runs them at once and times each.

A new source is a class here (or a module beside it) and one line in `SOURCES`: it is
fetched, timed in `Server-Timing` and handed to fusion by its name. It counts in fusion
only with a weight (RRF) or a ranker feature that reads it (the learned mode)."""

from __future__ import annotations

from typing import Protocol

from nexusai.models import Episode
from nexusai.observability import RETRIEVAL_SECONDS, timed
from nexusai.orchestration.settings import RuntimeSettings
from nexusai.orchestration.standing import STANDING_DEPTH
from nexusai.orchestration.turn.request import LegQuery


class Source(Protocol):
    name: str
    step: str  # its step in the turn's Server-Timing header
    # Whether it searches without the message's vector: it then runs while the message is
    # embedded, and the recent turns are dropped from what it found after.
    early: bool

    def wanted(self, settings: RuntimeSettings, both: bool) -> bool:
        """Whether a turn under these settings asks it (`both`: both legs in full)."""
        ...

    def weight(self, settings: RuntimeSettings) -> float | None:
        """Its weight in RRF under these settings; None: it is not fused."""
        ...

    def reads_vector(self, settings: RuntimeSettings) -> bool:
        """Whether it reads the message's vector (to search, or to rank what it found): a
        plan that asks it embeds the message."""
        ...

    def find(self, asked: LegQuery) -> list[Episode]:
        """Its candidates for the turn, best first, within the turn's scope and filter."""
        ...


class Semantic:
    """Nearest by meaning in the vector index: the spec's semantic leg (the recent turns
    are left out inside its query, so that it still gives `depth` rows)."""

    name, step, early = "semantic", "semantic", False

    def wanted(self, settings: RuntimeSettings, both: bool) -> bool:
        return both or settings.semantic_weight > 0

    def weight(self, settings: RuntimeSettings) -> float | None:
        return settings.semantic_weight

    def reads_vector(self, settings: RuntimeSettings) -> bool:
        return True

    def find(self, asked: LegQuery) -> list[Episode]:
        return semantic_leg(asked)


class Keyword:
    """BM25 over the keyword index: the spec's keyword leg (not asked at weight 0, the
    spec's skipped call, unless both legs are wanted)."""

    name, step, early = "keyword", "keyword", True

    def wanted(self, settings: RuntimeSettings, both: bool) -> bool:
        return both or settings.keyword_weight > 0

    def weight(self, settings: RuntimeSettings) -> float | None:
        return settings.keyword_weight

    def reads_vector(self, settings: RuntimeSettings) -> bool:
        return False

    def find(self, asked: LegQuery) -> list[Episode]:
        return keyword_leg(asked)


class Standing:
    """The scope's pinned episodes and recognised rules and preferences, whatever the
    search finds; the recognised ones ranked by their cosine to the message
    (`orchestration/standing.py`), so it reads the vector. Not fused: they are a section of
    their own."""

    name, step, early = "standing", "standing-read", True

    def wanted(self, settings: RuntimeSettings, both: bool) -> bool:
        return True

    def weight(self, settings: RuntimeSettings) -> float | None:
        return None

    def reads_vector(self, settings: RuntimeSettings) -> bool:
        # The recognised ones are chosen by their cosine to the message; pinned ones are not.
        return settings.standing_limit > 0

    def find(self, asked: LegQuery) -> list[Episode]:
        found = asked.memory.standing_episodes(asked.filter_ids(), STANDING_DEPTH, asked.rule)
        return asked.within(found)


# In the order fusion sums them (the spec's semantic leg first).
SOURCES: tuple[Source, ...] = (Semantic(), Keyword(), Standing())
BY_NAME: dict[str, Source] = {source.name: source for source in SOURCES}


def semantic_leg(asked: LegQuery) -> list[Episode]:
    """One vector query in the scope, recent ids excluded inside it; rows in rank order (an
    id whose row is gone is skipped)."""
    if asked.query_vector is None or asked.limit <= 0:
        return []
    with timed(RETRIEVAL_SECONDS, leg="semantic"):
        rows = asked.memory.vector_episodes(
            asked.query_vector, asked.filter_ids(), asked.recent_ids, asked.limit, asked.rule
        )
    return asked.within(rows)


def keyword_leg(asked: LegQuery) -> list[Episode]:
    """Asks for more than `limit` (`keyword_rows`) so that dropping recent turns still
    leaves enough: `gather` drops them, since it starts this leg before it knows them."""
    with timed(RETRIEVAL_SECONDS, leg="keyword"):
        rows = asked.memory.search_keyword(
            asked.query,
            asked.keyword_rows(),
            asked.filter_ids(),
            asked.keyword_budget,
            asked.rule,
        )
    return asked.within(rows)
