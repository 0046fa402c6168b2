"""An episode's vectors, by window of its text.

An embedding model reads a bounded window (MiniLM: 256 tokens), so one vector covers only
a long turn's opening. The index can hold one vector per window of an episode, each a
point of its own, and searches see episodes ranked by their best window. Measured on both
development sets, more windows per long episode cost far more than they found: on BEAM's
user-assistant chats semantic recall@10 fell from 0.560 to 0.460 with 8 windows, because a
long assistant answer gets eight chances to outrank the user's short message that holds
the fact (on LoCoMo's short turns it changed nothing). So an episode is embedded by its
first window (`VECTOR_WINDOWS`), and all of it is keyword-indexed.

A window's point id is `episode id + window * STRIDE`: window 0 keeps the episode's own id,
and every id an episode can have is known without asking the index (to delete, to exclude).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nexusai.memory.vectors import VectorIndex, VectorPoint

STRIDE = 1 << 40  # above any episode id a store will reach; point ids stay below 2**64
MAX_WINDOWS = 8  # point ids reserved per episode (old stores may hold up to 8)
VECTOR_WINDOWS = 1  # how many of them an episode is embedded with now (see above)
OVERLAP = 100  # characters two windows share, so a sentence cut by one is whole in a neighbour


def point_ids(episode_id: int) -> list[int]:
    return [episode_id + window * STRIDE for window in range(MAX_WINDOWS)]


def episode_of(point_id: int) -> int:
    return point_id % STRIDE


def windows(text: str, context: str, size: int) -> list[str]:
    """The texts to embed for an episode: its opening with the end of the turn before it,
    then overlapping windows over the rest, each cut at a space where one is near."""
    pieces: list[str] = []
    start = 0
    while start < len(text) and len(pieces) < MAX_WINDOWS:
        end = _cut(text, start + size)
        pieces.append(text[start:end].strip())
        if end >= len(text):
            break
        start = max(_cut(text, end - OVERLAP), start + 1)
    pieces = [p for p in pieces if p] or [text]
    pieces[0] = "\n".join(p for p in (pieces[0], context) if p)
    return pieces


def _cut(text: str, at: int) -> int:
    """`at`, moved back to just after a space if there is one in the 40 characters before."""
    if at >= len(text):
        return len(text)
    space = text.rfind(" ", max(at - 40, 0), at)
    return space + 1 if space > 0 else at


@dataclass(frozen=True)
class EpisodeVectors:
    """The episode index seen by episode: writes a list of window vectors per episode,
    deletes every window, and searches for episodes (best window first)."""

    index: VectorIndex

    @property
    def dimension(self) -> int:
        return self.index.dimension

    def upsert(self, episodes: Sequence[tuple[int, Sequence[Sequence[float]], int]]) -> None:
        """(episode id, its window vectors, its session id) for each episode. Windows an
        episode no longer has (it was edited shorter) are removed."""
        self.index.upsert(
            [
                VectorPoint(episode_id + window * STRIDE, vector, session_id)
                for episode_id, vectors, session_id in episodes
                for window, vector in enumerate(vectors)
            ]
        )
        stale = [
            episode_id + window * STRIDE
            for episode_id, vectors, _ in episodes
            for window in range(len(vectors), MAX_WINDOWS)
        ]
        self.index.delete(stale)

    def delete(self, episode_ids: Sequence[int]) -> None:
        self.index.delete([p for episode_id in episode_ids for p in point_ids(episode_id)])

    def search(
        self,
        vector: Sequence[float],
        session_ids: Sequence[int] | None,
        exclude_ids: Sequence[int],
        limit: int,
        only_ids: Sequence[int] | None = None,
    ) -> list[tuple[int, float]]:
        """Episodes by their best window, best first; at most `limit`; only among
        `only_ids` when given."""
        excluded = [p for episode_id in exclude_ids for p in point_ids(episode_id)]
        # Only the windows episodes are embedded with now: an older store's further windows
        # (see above) sit out a filtered search, where their episode is found by its first.
        only = (
            None
            if only_ids is None
            else [i + window * STRIDE for i in only_ids for window in range(VECTOR_WINDOWS)]
        )
        # An episode is embedded as VECTOR_WINDOWS points, so that many a result fill the
        # first fetch (asking twice that cost 0.3 ms of a 50-deep search at 100,000).
        fetch = limit * VECTOR_WINDOWS
        while True:
            hits = self.index.search(vector, session_ids, excluded, fetch, only)
            best: dict[int, float] = {}
            for point_id, score in hits:
                best.setdefault(episode_of(point_id), score)
            # An older store's further windows can fill the first fetch; then look deeper.
            if len(best) >= limit or len(hits) < fetch or fetch >= limit * MAX_WINDOWS:
                return list(best.items())[:limit]
            fetch = limit * MAX_WINDOWS

    def ids(self) -> set[int]:
        """Every episode with at least one vector."""
        return {episode_of(p) for p in self.index.ids()}

    def count(self) -> int:
        """Vectors (windows), not episodes."""
        return self.index.count()

    def reset(self, dimension: int) -> None:
        self.index.reset(dimension)

    def optimize(self) -> None:
        self.index.optimize()

    def close(self) -> None:
        self.index.close()
