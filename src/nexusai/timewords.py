"""The time window a message names ("last week", "in March", "yesterday", "3 days ago",
"in 2024"), understood relative to the turn's own time.

dateparser resolves a phrase to a date and its period (day, week, month, year); it is the
well-kept library for that, in many languages. Finding the phrase is done here, by a short
list of patterns, because dateparser's own search reads time into ordinary words ("we" as
Wednesday, "may" as May) and phrases anchored on an event ("two days before my trip") as
anchored on today: a filter built from those would hide what the user asked about. A
message naming no such phrase, or several, has no window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dateparser.date import DateDataParser

_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)"
)
_WEEKDAY = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_COUNT = r"(?:\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|a few)"
_YEAR = r"(?:19|20)\d\d"
# Each a phrase dateparser resolves; a month is capitalised and needs "in", "of", a day or
# a year beside it ("May 7", "in May", "March 2024"), so "may" the verb is never a month.
_PHRASES = re.compile(
    r"\b(?:"
    r"(?i:(?:the\s+day\s+before\s+)?yesterday|today"
    r"|(?:last|this|past|previous)\s+(?:week|weekend|month|year)"
    rf"|{_COUNT}\s+(?:days?|weeks?|months?|years?)\s+ago)"
    rf"|(?i:last|on)\s+{_WEEKDAY}"
    rf"|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+{_YEAR})?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?"
    rf"|(?<=\bin\s){_MONTH}(?:,?\s+{_YEAR})?|(?<=\bof\s){_MONTH}(?:,?\s+{_YEAR})?"
    rf"|{_MONTH},?\s+{_YEAR}"
    rf"|(?<=\bin\s){_YEAR}"
    r")\b"
)
# A phrase beside these counts from an event, not from now ("two days before my trip"), or
# bounds a span rather than naming one ("the weekend before April 10", "since May 3").
_ANCHORED_AFTER = re.compile(r"^\s*(?:before|after|since|until|prior)\b", re.IGNORECASE)
_ANCHORED_BEFORE = re.compile(
    r"\b(?:before|after|since|until|till|by|from|between|prior\s+to)\s+(?:the\s+)?$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class TimeWindow:
    """[start, end) in UTC, and the words that named it."""

    start: datetime
    end: datetime
    said: str


def named_window(message: str, now: datetime) -> TimeWindow | None:
    """The one window the message names, relative to `now` and in its time zone (a naive
    time is UTC: "yesterday" is the user's yesterday when `now` carries their offset);
    None when it names none, or more than one."""
    found = [m for m in _PHRASES.finditer(message) if not _anchored(message, m)]
    if len(found) != 1:
        return None
    said = found[0].group(0)
    zone = now.tzinfo or UTC
    parsed = _parser(now.replace(tzinfo=None)).get_date_data(said)
    if parsed.date_obj is None:
        return None
    local = _window(parsed.date_obj.replace(tzinfo=zone), parsed.period or "day")
    return TimeWindow(local[0].astimezone(UTC), local[1].astimezone(UTC), said)


def _anchored(message: str, found: re.Match[str]) -> bool:
    after, before = message[found.end() :], message[: found.start()]
    return bool(_ANCHORED_AFTER.match(after) or _ANCHORED_BEFORE.search(before))


def _window(day: datetime, period: str) -> tuple[datetime, datetime]:
    """The whole day, week (Monday on), month or year the date falls in, in its zone."""
    start = day.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        start -= timedelta(days=start.weekday())
        end = start + timedelta(days=7)
    elif period == "month":
        start = start.replace(day=1)
        end = (start + timedelta(days=32)).replace(day=1)
    elif period == "year":
        start = start.replace(month=1, day=1)
        end = start.replace(year=start.year + 1)
    else:
        end = start + timedelta(days=1)
    return start, end


@lru_cache(maxsize=64)
def _parser(now: datetime) -> DateDataParser:
    """dateparser is loaded on the first time-aware turn (a fifth of a second), not at
    start; a parser per `now`, since its relative base is a setting."""
    from dateparser.date import DateDataParser

    settings = {"RELATIVE_BASE": now, "PREFER_DATES_FROM": "past", "RETURN_TIME_AS_PERIOD": True}
    return DateDataParser(languages=["en"], settings=settings)


# A question about the order of events: "in what order", "the order in which I brought
# up", "list them in order" (not "in order to"), "which came first", "a timeline of".
_ORDER = re.compile(
    r"\b(?:in\s+(?:what|which)\s+order|the\s+order\s+(?:in\s+which|of)|in\s+order(?!\s+to\b)"
    r"|chronolog\w*|timeline|sequence\s+of|(?:which|what)\s+(?:\w+\s+)?(?:came|happened)\s+first"
    r"|before\s+or\s+after)\b",
    re.IGNORECASE,
)


def asks_for_order(message: str) -> bool:
    """Whether the message asks in what order things happened: its memories are then best
    read in the order they were said (`memoryOrder: "auto"`)."""
    return _ORDER.search(message) is not None
