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
    # What the indexes see (never sent out): the turn as said, and the turn before it.
    search_text: str = ""
    context_text: str = ""


CAPTION_KEY = "imageCaption"


def said(speaker: str, content: str) -> str:
    return f"{speaker}: {content}"


# How much of the turn before an episode is indexed and embedded with it. Its end is what a
# reply answers ("Yes, last Tuesday!"); all of a long answer would crowd the episode's own
# words out of its vector (the model reads 256 tokens) and index that answer twice.
CONTEXT_CHARS = 300


def compose_context_text(speaker: str, content: str) -> str:
    """The end of the previous turn, as said, cut at a word where one is near."""
    text = said(speaker, content)
    if len(text) <= CONTEXT_CHARS:
        return text
    tail = text[-CONTEXT_CHARS:]
    space = tail.find(" ")
    return f"{speaker}: …{tail[space + 1 :] if 0 <= space < 40 else tail}"


def compose_search_text(speaker: str, content: str, metadata: dict[str, Any]) -> str:
    """The episode as the indexes see it: who said what, and the caption of an image it
    shared. (The turn before it is indexed beside it, as `context_text`.)"""
    text = said(speaker, content)
    caption = metadata.get(CAPTION_KEY)
    if isinstance(caption, str) and caption.strip():
        text += f" [image: {caption.strip()}]"
    return text
