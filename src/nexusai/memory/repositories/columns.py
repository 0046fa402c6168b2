"""How rows read as the models: the columns an episode or a session is read from, and
the clause every read of episodes keeps."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any, Final

from nexusai.models import Episode

# What every read of episodes keeps (its one parameter: now): an episode past its
# `expires_at` is never returned, though the upkeep has yet to delete it.
LIVE = "(expires_at IS NULL OR expires_at > ?)"
# An `Episode`'s fields are the episodes table's columns of the same names, less the score a
# search gives: every read that makes episodes selects these and reads them by place.
# `SELECT *` also read what only the indexes use, and a row read by name searches its
# columns for each field: a turn makes a hundred of them.
EPISODE_FIELDS: Final = tuple(field.name for field in fields(Episode) if field.name != "score")
EPISODE_COLUMNS: Final = ", ".join(EPISODE_FIELDS)
SCORE_AT: Final = len(EPISODE_FIELDS)  # where a search's score follows them

# A filter as SQL over the episodes table: clauses to AND, with their `?` parameters.
Where = tuple[list[str], list[object]]

# A session's row and when its conversation began (the index on episodes' session and time
# answers the min).
SESSION_COLUMNS = (
    "sessions.*, (SELECT min(occurred_at) FROM episodes"
    " WHERE episodes.session_id = sessions.id) AS started_at"
)


def episode_columns(table: str) -> str:
    """`EPISODE_COLUMNS` of the table (or alias) `table`, for a read that joins it."""
    return ", ".join(f"{table}.{name}" for name in EPISODE_FIELDS)


def live(table: str) -> str:
    """`LIVE` for the table (or alias) `table`, for a read that joins it."""
    return LIVE.replace("expires_at", f"{table}.expires_at")


def episode_from_row(row: Any, score: float | None = None) -> Episode:
    """An episode from a row of `EPISODE_COLUMNS`, by place; the empty metadata most
    episodes carry is not parsed."""
    episode_id, session_id, speaker, content, occurred_at, created_at = row[:6]
    metadata, caption, search_text, context_text = row[6:10]
    standing, pinned, expires_at, expiry_asked = row[10:SCORE_AT]
    return Episode(
        episode_id,
        session_id,
        speaker,
        content,
        occurred_at,
        created_at,
        {} if metadata == "{}" else json.loads(metadata),
        caption,
        search_text,
        context_text,
        score,
        standing,
        bool(pinned),
        expires_at,
        expiry_asked,
    )
