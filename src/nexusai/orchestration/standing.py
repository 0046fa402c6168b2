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

import re
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
    answer in French" is near no question). Among more than fit, a rank and a cap, never a
    cliff: first those at or above `floor` (the `standingFloor` setting), nearest first,
    then, far from the message as they may be, what keeps the user safe or was asked of
    the assistant (health, diet and explicit instructions: "I'm allergic to peanuts" is
    near no dinner question), to `limit` in all; far tastes are left out. Measured on the
    three sets (docs/evaluation.md): the far vital ones after the near ones rather than
    before them keep BEAM 500K's preference probes (0.71 against 0.59 within 1,000
    tokens)."""
    pinned = [f for f in candidates if f.episode.pinned]
    others = [f for f in candidates if not f.episode.pinned]
    if limit <= 0:
        return pinned
    if len(others) <= limit:
        return pinned + others
    near = [f for f in others if floor <= 0 or f.score >= floor]
    vital = [f for f in others if f not in near and is_vital(f.episode)]
    return pinned + (near + vital)[:limit]


def standing_left_out(
    candidates: Sequence[FusedEpisode], kept: Sequence[FusedEpisode]
) -> list[str]:
    """The warning a turn gives when it carries fewer of the user's rules and preferences
    than the scope holds (of the STANDING_DEPTH newest it reads)."""
    missing = len(candidates) - len(kept)
    if missing <= 0:
        return []
    return [
        f"{missing} of the user's {len(candidates)} rules and preferences were left out of"
        " this turn (standingLimit, standingFloor); health, diet and instructions come first"
    ]


# A preference that keeps the user safe or fed: it comes before tastes whatever the
# message asks ("Can you suggest a dinner recipe?" is not near "I'm vegan" in meaning).
_VITAL = re.compile(
    r"\b(?:allerg\w*|al[ée]rgi\w*|intoleran\w*|vegan\w*|vegetari\w*|v[ée]g[ée]t\w*|"
    r"pescatarian|kosher|halal|gluten|"
    r"lactose|celiac|coeliac|diabet\w*|can't eat|cannot eat|don't eat|do not eat|never eat|"
    r"pregnan\w*|medication|epilep\w*|asthma\w*)\b",
    re.IGNORECASE,
)


def is_vital(episode: Episode) -> bool:
    """An explicit instruction, or a preference about health or diet."""
    return episode.standing == "instruction" or bool(_VITAL.search(episode.content))


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
