"""The spec's fusion of its two legs, for tests that state RRF by the spec's names: the
service fuses every weighted source by name (`fusion.fuse_weighted`)."""

from __future__ import annotations

from collections.abc import Sequence

from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode, fuse_weighted


def fuse_ranked(
    semantic: Sequence[Episode],
    keyword: Sequence[Episode],
    semantic_weight: float,
    keyword_weight: float,
    limit: int,
) -> list[FusedEpisode]:
    """`fuse_weighted` over the two legs at these weights."""
    lists = {"semantic": semantic, "keyword": keyword}
    return fuse_weighted(lists, {"semantic": semantic_weight, "keyword": keyword_weight}, limit)
