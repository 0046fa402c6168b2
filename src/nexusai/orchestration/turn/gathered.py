"""What a turn's I/O gave (`gather`), as plain data: what `assemble` reads, with no store
or model in reach."""

from __future__ import annotations

from dataclasses import dataclass, field

from nexusai.embedders import Vector
from nexusai.models import Entity, Episode
from nexusai.orchestration.fusion import FusedEpisode


@dataclass(frozen=True, kw_only=True)
class Gathered:
    """What a turn's I/O gave: the vector it searched with, the recent turns, each source's
    candidates without them, the standing ones ranked by the message, the entities, and
    what it said and how long each step took."""

    vector: Vector | None
    embedder: str  # the name of the embedder the turn's vector is (or would be) made by
    recent: list[Episode]
    found: dict[str, list[Episode]]
    # The standing candidates: pinned, then the recognised ones nearest the message (the
    # settings carry some of them: `Context.standing`).
    standing_candidates: list[FusedEpisode]
    entities: list[Entity]
    warnings: list[str]
    timings: dict[str, float]
    # Where each source gave a recent turn, dropped from `found` (its 0-based rows): what
    # a shallower list's cut reads (`first_rows`).
    dropped: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def first_rows(self, name: str, rows: int) -> list[Episode]:
        """What `found[name]` holds of the first `rows` the source gave: a search asked for
        that many, as a shallower turn asks it, with the recent turns dropped."""
        dropped = sum(1 for at in self.dropped.get(name, ()) if at < rows)
        return self.found.get(name, [])[: rows - dropped]
