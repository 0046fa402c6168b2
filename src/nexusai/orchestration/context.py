"""A turn's context: what the LLM sees for one turn (`turn.execute` assembles it). The
message is embedded once, and that one vector serves every source and the entity search."""

from __future__ import annotations

from dataclasses import dataclass, field

from nexusai.models import Entity, Episode
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.retrieval import Legs
from nexusai.timewords import TimeWindow


@dataclass(frozen=True)
class Context:
    session_id: int
    message: str
    recent: list[Episode]
    memories: list[FusedEpisode]
    entities: list[Entity] = field(default_factory=list)
    # Pinned episodes and the user's rules and preferences (`orchestration/standing.py`).
    standing: list[FusedEpisode] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    legs: Legs | None = None  # both legs' full lists, when asked for
    timings: dict[str, float] = field(default_factory=dict)  # ms per step, for Server-Timing
    budget: int = 0  # the contextBudget the memories were packed into (0: none)
    window: TimeWindow | None = None  # the time the message named, searched within (timeAware)
    # What packing chose from: fusion's list and the standing candidates (`nexus eval` packs
    # them again at other budgets).
    fused: list[FusedEpisode] = field(default_factory=list)
    standing_candidates: list[FusedEpisode] = field(default_factory=list)
