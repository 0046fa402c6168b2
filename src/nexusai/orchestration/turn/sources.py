"""Where a turn's candidates come from, each behind one small protocol: the two legs of the
spec and the standing memories. A new source is a class here (or a module of its own) and
one line in `SOURCES`; `execute` runs each that a plan wants, at the same time."""

from __future__ import annotations

from typing import Protocol

from nexusai.models import Episode
from nexusai.orchestration.retrieval import LegQuery, keyword_leg, semantic_leg
from nexusai.orchestration.standing import STANDING_DEPTH
from nexusai.orchestration.turn.plan import TurnPlan


class Source(Protocol):
    name: str
    step: str  # its step in the turn's Server-Timing header
    # Whether it searches without the message's vector and the recent turns: it then runs
    # while the message is embedded, and the recent turns are dropped from what it found.
    early: bool

    def wanted(self, plan: TurnPlan) -> bool:
        """Whether this turn asks it."""
        ...

    def find(self, asked: LegQuery) -> list[Episode]:
        """Its candidates for the turn, best first, within the turn's scope and filter."""
        ...


class Keyword:
    """BM25 over the keyword index: the spec's keyword leg."""

    name, step, early = "keyword", "keyword", True

    def wanted(self, plan: TurnPlan) -> bool:
        return plan.keyword

    def find(self, asked: LegQuery) -> list[Episode]:
        return keyword_leg(asked)


class Semantic:
    """Nearest by meaning in the vector index: the spec's semantic leg (the recent turns
    are left out inside its query, so that it still gives `depth` rows)."""

    name, step, early = "semantic", "semantic", False

    def wanted(self, plan: TurnPlan) -> bool:
        return plan.semantic

    def find(self, asked: LegQuery) -> list[Episode]:
        return semantic_leg(asked)


class Standing:
    """The scope's pinned episodes and recognised rules and preferences, whatever the
    search finds (`orchestration/standing.py` ranks them by the message)."""

    name, step, early = "standing", "standing-read", True

    def wanted(self, plan: TurnPlan) -> bool:
        return True

    def find(self, asked: LegQuery) -> list[Episode]:
        found = asked.memory.standing_episodes(asked.filter_ids(), STANDING_DEPTH, asked.rule)
        return asked.within(found)


SOURCES: tuple[Source, ...] = (Keyword(), Semantic(), Standing())
