"""The time window a message names, read against the turn's own time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from nexusai.timewords import asks_for_order, named_window

NOW = datetime(2026, 6, 15, 12, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize(
    ("message", "start", "days", "said"),
    [
        ("what did we discuss last week?", "2026-06-08", 7, "last week"),
        ("What did I do in March?", "2026-03-01", 31, "March"),
        ("Yesterday, what did I eat?", "2026-06-14", 1, "Yesterday"),
        ("Did I mention the May 7 meeting?", "2026-05-07", 1, "May 7"),
        ("What did I say 3 days ago about the report?", "2026-06-12", 1, "3 days ago"),
        ("where did we go in 2023", "2023-01-01", 365, "2023"),
        ("what happened last month", "2026-05-01", 31, "last month"),
        ("What did I do last Friday?", "2026-06-12", 1, "last Friday"),
        ("What happened on 8 May, 2023?", "2023-05-08", 1, "8 May, 2023"),
        ("Anything in December?", "2025-12-01", 31, "December"),  # the past one
    ],
)
def test_a_named_time_is_a_window(message: str, start: str, days: int, said: str) -> None:
    window = named_window(message, NOW)
    assert window is not None
    assert window.start == datetime.fromisoformat(start).replace(tzinfo=UTC)
    assert window.end - window.start == timedelta(days=days)
    assert window.said == said


@pytest.mark.parametrize(
    "message",
    [
        "When did Caroline go to the support group?",
        "May I ask about the report?",  # the verb, not the month
        "I may go",
        "What did we do two days before my trip?",  # counted from the trip, not from now
        "What did Maria do the weekend before April 10, 2023?",  # a span it bounds
        "How much did I save from April 9 on?",
        "the trip in March and the one in April",  # two times: no one window
        "what is my dog called?",
    ],
)
def test_no_window_where_none_is_named(message: str) -> None:
    assert named_window(message, NOW) is None


def test_the_turns_own_time_and_zone_are_the_base() -> None:
    """At 01:00 on 2 March in UTC+2 (23:00 on 1 March in UTC), yesterday is 1 March there:
    22:00 on 29 February to 22:00 on 1 March in UTC."""
    plus_two = timezone(timedelta(hours=2))
    window = named_window("what did I do yesterday", datetime(2024, 3, 2, 1, tzinfo=plus_two))
    assert window is not None
    assert window.start == datetime(2024, 2, 29, 22, tzinfo=UTC)
    assert window.end == datetime(2024, 3, 1, 22, tzinfo=UTC)


@pytest.mark.parametrize(
    ("message", "asks"),
    [
        ("In what order did I bring up the budget tracker's features?", True),
        ("Can you list the order in which I mentioned my trips?", True),
        ("List my job interviews in order", True),
        ("Give me a timeline of the move", True),
        ("Which race happened first, the 5k or the marathon?", True),
        ("Was the wedding before or after the trip?", True),
        ("I save money in order to travel", False),
        ("What is my sister's first name?", False),
        ("When did Caroline go to the support group?", False),
    ],
)
def test_a_question_about_the_order_of_events_is_recognised(message: str, asks: bool) -> None:
    assert asks_for_order(message) is asks
