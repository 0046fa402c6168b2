"""The standing memories' vectors: made from the content alone and kept per process (a
scope holds few of them, and they rarely change), the candidates ranked by them, and the
newest made ahead at a start."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from nexusai.embedders import Embedder, Vector
from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.memory_client import MemoryClient

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
    pinned = [FusedEpisode(e, 1.0) for e in found if e.pinned]
    others = [e for e in found if not e.pinned]
    if vector is None or not others:
        return pinned + [FusedEpisode(e, 0.0) for e in others]
    similarity = np.stack(_vectors(others, embedder)) @ np.asarray(vector, dtype=np.float32)
    order = np.argsort(-similarity, kind="stable")
    return pinned + [FusedEpisode(others[i], float(similarity[i])) for i in order]


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
