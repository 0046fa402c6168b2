"""The rows the memory service stores, as plain dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

# Fixed width and always UTC, so that text order is time order in SQL.
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def to_utc_text(moment: datetime) -> str:
    """A datetime as sortable UTC text; a naive datetime is taken to be UTC already."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime(_TIME_FORMAT)


def now_text() -> str:
    return to_utc_text(datetime.now(UTC))


@dataclass(frozen=True)
class Project:
    id: int
    name: str
    created_at: str


@dataclass(frozen=True)
class Session:
    id: int
    project_id: int | None
    title: str | None
    created_at: str


@dataclass(frozen=True)
class NewEpisode:
    speaker: str
    content: str
    occurred_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Episode:
    id: int
    session_id: int
    speaker: str
    content: str
    occurred_at: str
    created_at: str
    metadata: dict[str, Any]
