"""Standing memories: the episodes a turn may carry whatever its search found. Pinned ones
always; the rules and preferences recognised when they were stored (`memory/standing.py`)
as a profile: all of them when they are no more than `standingLimit`, else the nearest the
message in meaning at or above `standingFloor`, since a later question rarely repeats a
rule's words ("Which libraries do we use?" against "Always include version numbers when
I ask about libraries").

Pure: which of the ranked candidates a turn carries. Their vectors, and the ranking by
them, are `standing_vectors`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode

# Most pinned and standing episodes a turn reads of its scope (pinned first, then newest):
# a user's rules and tastes are few, and reading 200 long ones took 4 ms a turn.
STANDING_DEPTH = 50


def carried(candidates: Sequence[FusedEpisode], limit: int, floor: float) -> list[FusedEpisode]:
    """Of `standing_vectors.ranked` candidates: every pinned one, and the recognised ones
    as a profile. When all of them fit in `limit` they all come, however far from the
    message ("Always answer in French" is near no question). Among more than fit, a rank
    and a cap, never a cliff: first those at or above `floor` (the `standingFloor`
    setting), nearest first, then, far from the message as they may be, what keeps the
    user safe or was asked of the assistant (health, diet and explicit instructions: "I'm
    allergic to peanuts" is near no dinner question), to `limit` in all; far tastes are
    left out. Measured on the three sets (docs/evaluation.md): the far vital ones after
    the near ones rather than before them keep BEAM 500K's preference probes (0.71
    against 0.59 within 1,000 tokens)."""
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
