"""The domain's rows as plain dataclasses, shared by both services and every face.

This module imports nothing of nexusai's: the memory service stores these, orchestration
receives them (in-process or over HTTP), and `schemas` maps them to JSON.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from typing import Any

from nexusai.errors import InvalidInput

# Fixed width and always UTC, so that text order is time order in SQL.
# The year is written with four digits by hand: strftime's %Y writes year 1 as "1" on
# glibc, which neither sorts nor parses back.
_TIME_FORMAT = "-%m-%dT%H:%M:%S.%fZ"


def to_utc_text(moment: datetime) -> str:
    """A datetime as sortable UTC text; a naive datetime is taken to be UTC already."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is in year 0, which datetime lacks
        raise InvalidInput(
            f"{moment.isoformat()} is outside 0001-01-01 to 9999-12-31 in UTC"
        ) from None
    return f"{utc.year:04d}{utc.strftime(_TIME_FORMAT)}"


TIME_EXAMPLE = "2026-05-01 or 2026-05-01T14:30:00Z"
# A query string's "+02:00" arrives as " 02:00" when the client did not percent-encode it.
_PLUS_AS_SPACE = re.compile(r"[T\d] \d{2}(:?\d{2})?$")
# The ISO 8601 forms read, and only these: a calendar date (extended or basic), then
# optionally "T" or a space and a time, then optionally its offset. Python's own parser is
# looser (any character between date and time, an offset on a date alone, week dates), and
# read "2026-05-01+02:00" as 02:00 UTC: a forget before it would cover hours more.
_DATE = r"\d{4}-\d{2}-\d{2}|\d{8}"
# Fractions past microseconds (Go, .NET and Java write 7 to 9 digits) are read to the
# microsecond, as Python keeps them.
_CLOCK = r"\d{2}(?::\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?)?|\d{4}(?:\d{2}(?:[.,]\d{1,9})?)?"
_OFFSET = r"Z|[+-]\d{2}(?::?\d{2})?"
_ISO_8601 = re.compile(rf"(?:{_DATE})(?:[T ](?:{_CLOCK})(?:{_OFFSET})?)?")


def parse_time(value: object) -> datetime:
    """The one reading of a date field on every face: ISO 8601 text (a calendar date,
    extended or basic, alone being its midnight; a time after "T" or a space; an offset
    only after a time), or a datetime from Python, within 0001-01-01 to 9999-12-31 in UTC.
    ValueError otherwise, saying what to send: a number is never read as Unix seconds,
    nor a bare year as one, and week or ordinal dates (2026-W18, 2026-121) are not read."""
    if isinstance(value, datetime):
        return _in_range(value)
    if isinstance(value, date):  # a calendar date alone: its midnight, as its text reads
        return datetime(value.year, value.month, value.day)
    if not isinstance(value, str):
        kind = "true or false" if isinstance(value, bool) else type(value).__name__
        raise ValueError(
            f"give a date as ISO 8601 text ({TIME_EXAMPLE}), not {kind}: numbers are not read"
            " as Unix seconds"
        )
    if _ISO_8601.fullmatch(value):
        try:
            return _in_range(datetime.fromisoformat(value))
        except ValueError as exc:
            if "outside" in str(exc):
                raise
    if _PLUS_AS_SPACE.search(value):
        raise ValueError(
            f"{value!r} is not an ISO 8601 date and time: in a query string, send the '+' of"
            " a time zone as %2B (or use Z)"
        )
    raise ValueError(
        f"{value!r} is not an ISO 8601 date and time; give a calendar date, then"
        f" optionally T, a time and its offset, as {TIME_EXAMPLE}"
    )


def _in_range(moment: datetime) -> datetime:
    """ValueError when the moment has no UTC time datetime can hold (9999-12-31T23:59-01:00
    is in year 10000)."""
    try:
        to_utc_text(moment)
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None
    return moment


def time_window(after: datetime | None, before: datetime | None) -> tuple[str | None, str | None]:
    """A filter's window on when episodes were said, as sortable UTC text (either open);
    InvalidInput when it ends before it starts. The one rule for every face's filter."""
    start = None if after is None else to_utc_text(after)
    end = None if before is None else to_utc_text(before)
    if start is not None and end is not None and start >= end:
        raise InvalidInput(f"after ({start}) must be earlier than before ({end})")
    return start, end


def unstorable(value: Any) -> str | None:
    """Why some text in this value (a string, or one inside a list, dict or model, keys
    too) cannot be stored, or None. The NUL character: PostgreSQL cannot store it, and no
    chat message means it. A lone UTF-16 surrogate (what a JavaScript string cut in half
    holds): it is no character, so it has no UTF-8 form to store."""
    if isinstance(value, str):
        if "\x00" in value:
            return "text may not contain the NUL character (\\u0000)"
        if _SURROGATE.search(value):
            return "text may not contain a lone UTF-16 surrogate (\\ud800 to \\udfff)"
        return None
    if isinstance(value, dict):
        items: list[Any] = [*value.keys(), *value.values()]
    elif isinstance(value, list | tuple):
        items = list(value)
    elif hasattr(type(value), "model_fields"):  # a pydantic model: its fields' values
        items = [getattr(value, f) for f in type(value).model_fields]
    else:
        return None
    return next((fault for item in items if (fault := unstorable(item)) is not None), None)


_SURROGATE = re.compile("[\ud800-\udfff]")


def now_text() -> str:
    return to_utc_text(datetime.now(UTC))


def finds_nothing(session_ids: Sequence[int] | None, limit: int) -> bool:
    """The spec's scoping rule for every search: an empty scope finds nothing (None is
    every session), and neither does a limit of 0."""
    return limit <= 0 or (session_ids is not None and not session_ids)


@dataclass(frozen=True)
class Project:
    id: int
    name: str
    created_at: str
    retention_days: int | None = None  # its episodes are kept this long after being said


@dataclass(frozen=True)
class Session:
    id: int
    project_id: int | None
    title: str | None
    created_at: str
    started_at: str | None = None  # its earliest episode's time: when the conversation began


@dataclass(frozen=True)
class Scope:
    """The sessions a search from a session sees, and whether they are every session the
    store holds (one project with all of a user's sessions): a filter on them would then
    keep every row, so the legs search without one."""

    session_ids: list[int]
    every_session: bool = False
    project_id: int | None = None  # the session's project: what a project key's check reads

    def filter_ids(self) -> list[int] | None:
        """The sessions a search filters on; None, no filter, when that keeps every row."""
        return None if self.every_session else self.session_ids


@dataclass(frozen=True)
class EpisodeFilter:
    """Which episodes: said at or after `after` and before `before` (UTC text, either
    open), by one of `speakers` (any when empty), and, for each metadata key, with one of
    its values (compared as text, "1" matches 1 and "true" matches true, and a value that
    reads as a number as a number too: "1" matches 1.0)."""

    after: str | None = None
    before: str | None = None
    speakers: tuple[str, ...] = ()
    metadata: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def is_empty(self) -> bool:
        return self == EpisodeFilter()

    def narrowed(self, after: str, before: str) -> EpisodeFilter:
        """This filter within [after, before) too (a window that ends up empty keeps none)."""
        start = max(t for t in (self.after, after) if t is not None)
        end = min(t for t in (self.before, before) if t is not None)
        return replace(self, after=start, before=end)


@dataclass(frozen=True)
class NewEpisode:
    speaker: str
    content: str
    occurred_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    image_caption: str | None = None
    pinned: bool = False  # stored pinned (an exported store's pins, imported again)
    expires_at: datetime | None = None  # past it no read returns it; the upkeep deletes it


@dataclass(frozen=True)
class Episode:
    id: int
    session_id: int
    speaker: str
    content: str
    occurred_at: str
    created_at: str
    metadata: dict[str, Any]
    image_caption: str | None = None  # indexed with the text; metadata is not
    # What the indexes see (never sent out): the turn as said, and the turn before it.
    search_text: str = ""
    context_text: str = ""
    # What the search that found it scored it (cosine for vectors, BM25 for keywords,
    # higher is better); None outside a search. The learned ranker reads it.
    score: float | None = None
    # A rule the user set or a lasting preference, recognised when stored
    # (`memory/standing.py`): "instruction", "preference" or None.
    standing: str | None = None
    pinned: bool = False  # the user pinned it: a turn of its scope always carries it
    expires_at: str | None = None  # when it stops being returned, and is deleted
    # Its own expiry, as written; `expires_at` may be sooner, from its project's retention.
    expiry_asked: str | None = None


@dataclass(frozen=True)
class Entity:
    id: int
    name: str
    type: str  # person | animal | place | organization | product | event | work
    first_seen: str
    last_seen: str
    mention_count: int
    summary: str | None
    latest_mention_ids: list[int]

    def describe(self) -> str:
        """How the chat prompt presents it."""
        seen = f"mentioned {self.mention_count}x, last on {self.last_seen[:10]}"
        return f"{self.name} ({self.type}; {seen})"
