"""What an episode is checked against before it is written, and the row it becomes:
pure, no SQL. Refusals name the field and the setting to change."""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from nexusai.errors import InvalidInput, NexusError, TooLarge
from nexusai.memory.texts import compose_search_text
from nexusai.models import Episode, NewEpisode, now_text, to_utc_text, unstorable


@dataclass(frozen=True)
class Limits:
    """The largest content and metadata a store takes (NEXUS_MAX_CONTENT_BYTES,
    NEXUS_MAX_METADATA_BYTES)."""

    content_bytes: int
    metadata_bytes: int


class Unset:
    """Marks an argument that was not given, where None is a meaningful value."""


UNSET: Final = Unset()

MAX_RETENTION_DAYS = 36_500


def deadline(asked: str | None, occurred_at: str, days: int | None) -> str | None:
    """When an episode stops being returned: the sooner of its own expiry (`asked`) and
    its time plus its project's retention, if the project has one."""
    if days is None:
        return asked
    try:
        kept = to_utc_text(datetime.fromisoformat(occurred_at) + timedelta(days=days))
    except OverflowError:  # said near the year 9999: kept past the calendar's end
        return asked
    return kept if asked is None else min(asked, kept)


def check_retention(days: int | None) -> None:
    if days is not None and not 1 <= days <= MAX_RETENTION_DAYS:
        raise InvalidInput(f"retentionDays must be 1 to {MAX_RETENTION_DAYS}, or null")


@dataclass(frozen=True)
class Row:
    speaker: str
    content: str
    occurred_at: str
    metadata: dict[str, Any]
    image_caption: str | None
    pinned: bool = False
    expires_at: str | None = None


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: objects merge key by key, recursively; `null` removes a
    key; anything else replaces what was there."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def metadata_json(metadata: dict[str, Any]) -> str:
    """Metadata as the JSON stored, or InvalidInput naming the first value JSON has no
    number for (NaN, Infinity, or 1e400, which Python's parser reads as infinity)."""
    try:
        return json.dumps(metadata, ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise InvalidInput(
            f"{_non_finite('metadata', metadata)}: JSON has no NaN or Infinity;"
            " give a finite number, or the value as a string"
        ) from None


def _non_finite(path: str, value: Any) -> str:
    """The path of the first non-finite number in `value` (`metadata.k`, `metadata.k[2]`)."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        where = f"{path}[{key}]" if isinstance(value, list) else f"{path}.{key}"
        if isinstance(item, float) and not math.isfinite(item):
            return where
        if isinstance(item, dict | list) and (found := _non_finite(where, item)) != where:
            return found
    return path


def edited(
    current: Episode,
    content: str | None,
    speaker: str | None,
    metadata: dict[str, Any] | Unset | None,
    image_caption: str | Unset | None,
    occurred_at: datetime | None,
) -> NewEpisode:
    return NewEpisode(
        speaker=current.speaker if speaker is None else speaker,
        content=current.content if content is None else content,
        occurred_at=occurred_at,
        metadata=(
            current.metadata
            if isinstance(metadata, Unset)
            else merge_patch(current.metadata, metadata or {})
            if metadata is not None
            else {}
        ),
        image_caption=current.image_caption if isinstance(image_caption, Unset) else image_caption,
    )


def search_text(row: Row) -> str:
    return compose_search_text(row.speaker, row.content, row.image_caption)


def _texts(episode: NewEpisode) -> list[tuple[str, Any]]:
    return [
        ("speaker", episode.speaker),
        ("content", episode.content),
        ("imageCaption", episode.image_caption),
        ("metadata", episode.metadata),
    ]


def required_text(name: str, value: str, max_chars: int | None) -> str:
    if not isinstance(value, str) or _blank(value):
        raise InvalidInput(f"{name} must not be empty or only whitespace")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidInput(f"{name} is {len(value)} characters; the limit is {max_chars}")
    return value


def _blank(value: str) -> bool:
    """Nothing but white space and invisible format characters (a zero-width space, a
    byte-order mark): nothing a reader or a search sees."""
    return all(c.isspace() or unicodedata.category(c) == "Cf" for c in value)


_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def _speaker(value: str) -> str:
    """A speaker is one line: a line break in it would forge a line of the prompt."""
    speaker = required_text("speaker", value, 200)
    if any(c in _LINE_BREAKS for c in speaker):
        raise InvalidInput("speaker: a speaker is one line; remove its line breaks")
    return speaker


def optional_text(name: str, value: str | None, max_chars: int) -> str | None:
    return None if value is None else required_text(name, value, max_chars)


def validated(episodes: Sequence[NewEpisode], limits: Limits) -> list[Row]:
    rows = []
    for index, episode in enumerate(episodes):
        try:
            rows.append(row_of(episode, limits))
        except NexusError as exc:
            if len(episodes) == 1:
                raise
            raise type(exc)(f"episodes[{index}]: {exc}") from None
    return rows


def row_of(episode: NewEpisode, limits: Limits) -> Row:
    for name, value in _texts(episode):
        if (fault := unstorable(value)) is not None:
            raise InvalidInput(f"{name}: {fault}")
    content = required_text("content", episode.content, None)
    size = len(episode.content.encode("utf-8"))
    if size > limits.content_bytes:
        raise TooLarge(
            f"content is {size} bytes; the limit is {limits.content_bytes} bytes"
            " (NEXUS_MAX_CONTENT_BYTES)"
        )
    metadata = dict(episode.metadata or {})
    if any(not str(key).strip() for key in metadata):
        raise InvalidInput(
            'metadata: a key is a name, as {"topic": "travel"}; an empty key could never'
            " be filtered on"
        )
    held = len(metadata_json(metadata).encode("utf-8"))
    if held > limits.metadata_bytes:
        raise TooLarge(
            f"metadata is {held} bytes as JSON; the limit is {limits.metadata_bytes} bytes"
            " (NEXUS_MAX_METADATA_BYTES)"
        )
    occurred = to_utc_text(episode.occurred_at) if episode.occurred_at else now_text()
    speaker = _speaker(episode.speaker)
    caption = optional_text("imageCaption", episode.image_caption, 2000)
    expires = None if episode.expires_at is None else to_utc_text(episode.expires_at)
    return Row(speaker, content, occurred, metadata, caption, episode.pinned, expires)
