"""Standing memories: the episodes a turn may carry whatever its search found. Pinned ones
always; the rules and preferences recognised when they were stored (`memory/standing.py`)
as a profile: all of them when they are no more than `standingLimit`, else the nearest the
message in meaning at or above `standingFloor`, since a later question rarely repeats a
rule's words ("Which libraries do we use?" against "Always include version numbers when
I ask about libraries").

Their vectors are made here, from the content alone, and kept per process: a scope holds
few of them, and they rarely change.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from nexusai.embedders import Embedder, Vector
from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.memory_client import MemoryClient

# Most pinned and standing episodes a turn reads of its scope (pinned first, then newest):
# a user's rules and tastes are few, and reading 200 long ones took 4 ms a turn.
STANDING_DEPTH = 50

# Standing episodes whose vectors a start makes ahead of the turns, the newest first: a
# scope's first turn would otherwise make up to STANDING_DEPTH of them (1.2 s for 50 long
# ones, measured at 100,000 episodes).
WARM_STANDING = 200
WARM_BATCH = 32
WARM_DEPTH = 40  # as deep as a turn's semantic leg asks

_VECTORS: OrderedDict[tuple[str, int, int], np.ndarray] = OrderedDict()
_VECTORS_MAX = 20_000
_VECTORS_LOCK = threading.Lock()  # turns run in many threads; an OrderedDict is not safe


def ranked(
    found: Sequence[Episode], embedder: Embedder, vector: Vector | None
) -> list[FusedEpisode]:
    """The pinned episodes of `found` (score 1), then its recognised ones nearest `vector`
    first, each scored by its cosine to the message (without a vector: as found, the
    newest first, score 0)."""
    pinned = [FusedEpisode(e, 1.0, None, None) for e in found if e.pinned]
    others = [e for e in found if not e.pinned]
    if vector is None or not others:
        return pinned + [FusedEpisode(e, 0.0, None, None) for e in others]
    similarity = np.stack(_vectors(others, embedder)) @ np.asarray(vector, dtype=np.float32)
    order = np.argsort(-similarity, kind="stable")
    return pinned + [FusedEpisode(others[i], float(similarity[i]), None, None) for i in order]


def carried(candidates: Sequence[FusedEpisode], limit: int, floor: float) -> list[FusedEpisode]:
    """Of `ranked` candidates: every pinned one, and the recognised ones as a profile.
    When all of them fit in `limit` they all come, however far from the message ("Always
    answer in French" is near no question). Only among more than fit does `floor` choose:
    the `limit` nearest at or above it (the `standingFloor` setting: on human chats many
    sayings read as rules, "I always ...", and are rarely what a question is about)."""
    pinned = [f for f in candidates if f.episode.pinned]
    others = [f for f in candidates if not f.episode.pinned]
    if limit <= 0:
        return pinned
    if len(others) <= limit:
        return pinned + others
    return pinned + [f for f in others[:limit] if floor <= 0 or f.score >= floor]


def warm_vectors(memory: MemoryClient, embedder: Embedder, keep_on: Callable[[], bool]) -> None:
    """The vectors of the store's newest standing episodes, made while `keep_on()`, each
    then asked of the vector index: a freshly opened index answers its first few dozen
    queries several times slower than later ones (measured at 100,000 points: 4 to 7 ms
    against 1), as the pages of its search graph are first touched."""
    found = [e for e in memory.standing_episodes(None, WARM_STANDING) if not e.pinned]
    for start in range(0, len(found), WARM_BATCH):
        if not keep_on():
            return
        for vector in _vectors(found[start : start + WARM_BATCH], embedder):
            memory.vector_episodes(vector.tolist(), None, (), WARM_DEPTH)


def _vectors(episodes: Sequence[Episode], embedder: Embedder) -> list[np.ndarray]:
    keys = [(embedder.name, e.id, hash(e.content)) for e in episodes]
    with _VECTORS_LOCK:
        known = [_VECTORS.get(key) for key in keys]
    missing = [i for i, vector in enumerate(known) if vector is None]
    if missing:  # embedded outside the lock: another turn's reads need not wait for it
        made = embedder.embed([episodes[i].content for i in missing])
        with _VECTORS_LOCK:
            for i, vector in zip(missing, made, strict=True):
                known[i] = _VECTORS[keys[i]] = np.asarray(vector, dtype=np.float32)
            while len(_VECTORS) > _VECTORS_MAX:
                _VECTORS.popitem(last=False)
    return [vector for vector in known if vector is not None]
