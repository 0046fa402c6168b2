"""A filter (`EpisodeFilter`) as SQL over the episodes table: what lists, counts,
forgets and both searches keep."""

from __future__ import annotations

import math
import re

from nexusai.memory.repositories.columns import Where
from nexusai.models import EpisodeFilter

# A filter's value that reads as a JSON number compares as one with the labels' numbers.
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


def filter_sql(rule: EpisodeFilter) -> Where:
    """The clauses (to AND, `?` marks) and parameters that keep what `rule` keeps."""
    where: list[str] = []
    params: list[object] = []
    if rule.after is not None:
        where.append("occurred_at >= ?")
        params.append(rule.after)
    if rule.before is not None:
        where.append("occurred_at < ?")
        params.append(rule.before)
    if rule.speakers:
        where.append(f"speaker IN ({_marks(len(rule.speakers))})")
        params += rule.speakers
    for key, values in rule.metadata:
        # The labels index holds each top-level value as text ('travel', '1', 'true'),
        # and a number's value as a number too, kept by the engine's triggers: no
        # episode's JSON is read, and 1 matches 1.0.
        numbers = [float(v) for v in values if _JSON_NUMBER.fullmatch(v)]
        numbers = [n for n in numbers if math.isfinite(n)]
        either = f" OR number IN ({_marks(len(numbers))})" if numbers else ""
        where.append(
            "id IN (SELECT episode_id FROM episode_labels"
            f" WHERE key = ? AND (value IN ({_marks(len(values))}){either}))"
        )
        params += [key, *values, *numbers]
    return where, params


def _marks(count: int) -> str:
    """A `?` for each of a few values (an id list goes as one JSON parameter instead)."""
    return ", ".join("?" * count)
