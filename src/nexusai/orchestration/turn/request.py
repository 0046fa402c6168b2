"""What a face asks of a turn. Pure: no I/O (what the sources search with is `legs`)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from datetime import datetime

from nexusai.embedders import Vector
from nexusai.models import EpisodeFilter, Scope


@dataclass(frozen=True)
class TurnRequest:
    """One turn: the session and its new message, and how it is asked.

    `rule`: only the episodes it keeps are memories or standing ones (entities are not
    filtered); `now`: the turn's own time, which a time the message names is read against
    (the clock's when None); `explain`: each memory says what placed it; `legs`: both legs
    are asked in full whatever their weights, and come back (the inspector re-fuses them);
    `scope`: the session's, when it was read already (a key's check, the eval's
    conversation); `vector`: the message's, when it was made already (the eval asks one
    question many ways)."""

    session_id: int
    message: str
    _: KW_ONLY
    rule: EpisodeFilter | None = None
    now: datetime | None = None
    explain: bool = False
    legs: bool = False
    scope: Scope | None = None
    vector: Vector | None = None


def keyword_rows(limit: int, headroom: int | None = None) -> int:
    """How many rows the keyword leg asks for `limit` memories: the spec's twice as many,
    headroom for the recent turns it drops, or `headroom` past `limit`."""
    return limit + (limit if headroom is None else headroom)
