"""A turn's context: what the LLM sees for one turn (`turn.assemble` makes it). The message
is embedded once, and that one vector serves every source and the entity search."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import tzinfo

from nexusai.models import Entity, Episode
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.timewords import TimeWindow


@dataclass(frozen=True, kw_only=True)
class Context:
    session_id: int
    message: str
    recent: list[Episode]
    memories: list[FusedEpisode]
    entities: list[Entity] = field(default_factory=list)
    # Pinned episodes and the user's rules and preferences (`orchestration/standing.py`).
    standing: list[FusedEpisode] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Each fused source's full list by its name, when the request asked for them (`legs`).
    lists: Mapping[str, list[Episode]] | None = None
    timings: dict[str, float] = field(default_factory=dict)  # ms per step, for Server-Timing
    budget: int = 0  # the contextBudget the memories were packed into (0: none)
    window: TimeWindow | None = None  # the time the message named, searched within (timeAware)
    fused: list[FusedEpisode] = field(default_factory=list)  # what packing chose from
    zone: tzinfo | None = None  # the turn's `now`'s offset: the prompt's days are its own
