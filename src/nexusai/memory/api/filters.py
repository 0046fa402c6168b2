"""Which episodes a request means, from its query string: `after` and `before` (ISO 8601,
either open), `speaker` (repeat it for one of several) and `metadata.KEY` (repeat it for
one of several values). The shape every face gives a filter in (`models.EpisodeFilter`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request

from nexusai.errors import InvalidInput
from nexusai.models import EpisodeFilter, time_window, unstorable
from nexusai.schemas import IsoTime, check_speakers

# A query key of this prefix names a metadata key (`http.known_query_keys` lets it by).
METADATA_PREFIX = "metadata."


def episode_filter(
    request: Request,
    after: Annotated[
        IsoTime | None, Query(description="Said at or after this time (ISO 8601)")
    ] = None,
    before: Annotated[IsoTime | None, Query(description="Said before this time (ISO 8601)")] = None,
    speaker: Annotated[
        list[str] | None, Query(description="Said by this speaker; repeat it for one of several")
    ] = None,
    _metadata: Annotated[
        str | None,
        Query(
            alias=METADATA_PREFIX + "*",
            description="metadata.KEY=VALUE: a top-level metadata key has this value (compared"
            " as text); repeat it for one of several values, or with other keys for all of them",
        ),
    ] = None,
) -> EpisodeFilter:
    start, end = time_window(after, before)
    if speaker is not None:
        _check_texts("speaker", speaker)
        try:
            check_speakers(speaker)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
    return EpisodeFilter(start, end, tuple(speaker or ()), _metadata_of(request))


def _check_texts(name: str, values: list[str]) -> None:
    """A query string is held to what a body is: no text a store cannot hold."""
    fault = unstorable(values)
    if fault is not None:
        raise InvalidInput(f"{name}: {fault}")


def _metadata_of(request: Request) -> tuple[tuple[str, tuple[str, ...]], ...]:
    values: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        if name.startswith(METADATA_PREFIX):
            key = name.removeprefix(METADATA_PREFIX)
            if not key.strip() or key == "*":
                raise InvalidInput(f"{name}: name a metadata key, as metadata.topic=travel")
            _check_texts(name, [key, value])
            values.setdefault(key, []).append(value)
    return tuple((key, tuple(found)) for key, found in values.items())
