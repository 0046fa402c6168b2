"""The prompt's layout of a turn's memories, and what it costs, exactly.

A section is a caption, then the memories grouped by conversation: a group is one session
on one day, headed once by its date ("8 May 2023"), its memories in the order they were
said, each a line `speaker: text` (an excerpt marked `…` where it was cut), the speaker
left out on a line that follows that speaker's own. Groups come in the order of their best
memory. Against `- [2023-05-08] speaker: ` on every line this saves about 8 tokens a
memory, a quarter of a short chat message; the LLM still reads who said each line, and
when.

`Tally` counts a section while packing fills it, so that a budget holds the text the LLM
gets: `count_tokens(render(...))` is always what the tally says.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence

from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.tokens import count_tokens

STANDING_CAPTION = "What the user asked to be kept in mind:"
MEMORIES_CAPTION = "Memories from earlier conversations:"
CUT = "…"

GroupKey = tuple[int, str]


def group_of(episode: Episode) -> GroupKey:
    """The group a memory is given in: its session, on its day."""
    return episode.session_id, episode.occurred_at[:10]


MONTHS = (
    *("January", "February", "March", "April", "May", "June"),
    *("July", "August", "September", "October", "November", "December"),
)


def header(episode: Episode) -> str:
    """The group's date, as "8 May 2023": three tokens, where `[2023-05-08]` is seven."""
    year, month, day = episode.occurred_at[:10].split("-")
    return f"{int(day)} {MONTHS[int(month) - 1]} {year}"


def text_of(fused: FusedEpisode) -> str:
    """The memory's text as the line gives it: whole, or its excerpt marked where cut;
    without white space at either end (a line break there would join the layout's)."""
    if fused.excerpt is None:
        return fused.episode.content.strip()
    start, end = fused.excerpt
    before = f"{CUT} " if start > 0 else ""
    after = f" {CUT}" if end < len(fused.episode.content) else ""
    return f"{before}{fused.content.strip()}{after}"


def line(fused: FusedEpisode) -> str:
    return f"{fused.episode.speaker}: {text_of(fused)}"


def line_tokens(fused: FusedEpisode, content_tokens: int) -> int:
    """What `line` costs, given what the memory's text (whole or excerpt, white space at
    its ends stripped) costs: the line break before it, a speaker, a colon and, for an
    excerpt, a mark at each cut end. Tokens never run across the space between the
    pieces."""
    cuts = 0
    if fused.excerpt is not None:
        start, end = fused.excerpt
        cuts = (start > 0) + (end < len(fused.episode.content))
    return LINE_BREAK + _speaker_tokens(fused.episode.speaker) + content_tokens + cuts


@functools.lru_cache(maxsize=4096)
def _speaker_tokens(speaker: str) -> int:
    return count_tokens(f"{speaker}:")


@functools.lru_cache(maxsize=8)
def _fixed_tokens(text: str) -> int:
    return count_tokens(text)


# Every line after a section's caption follows a line break, a token (`nexusai.tokens`).
LINE_BREAK = 1
# Every header is a date, a number, a month's name and a year: three tokens whatever it is,
# and its line break.
HEADER_TOKENS = LINE_BREAK + 3
# Between two sections of the block, an empty line: a run of line breaks, one token.
SECTION_BREAK = LINE_BREAK


def render(caption: str, memories: Sequence[FusedEpisode]) -> str:
    """The section: the caption, then each group's header and lines; empty without
    memories."""
    if not memories:
        return ""
    groups: dict[GroupKey, list[FusedEpisode]] = {}
    for fused in memories:
        groups.setdefault(group_of(fused.episode), []).append(fused)
    lines = [caption]
    for members in groups.values():
        members = sorted(members, key=_said_at)
        lines.append(header(members[0].episode))
        before = None
        for fused in members:
            named = fused.episode.speaker != before
            lines.append(line(fused) if named else text_of(fused))
            before = fused.episode.speaker
    return "\n".join(lines)


def _said_at(fused: FusedEpisode) -> tuple[str, int]:
    return fused.episode.occurred_at, fused.episode.id


class Tally:
    """A section's cost as memories are added to it, each `tokens` already its line's with
    its speaker named: the caption with the first, a header with the first of each group,
    and a speaker's name only on a line that does not follow that speaker's own."""

    def __init__(self, caption: str, budget: int) -> None:
        self.caption = _fixed_tokens(caption)
        self.left = budget
        # Each group's lines so far, in the order they are given: (said at, speaker).
        self.groups: dict[GroupKey, list[tuple[tuple[str, int], str]]] = {}

    def cost(self, fused: FusedEpisode) -> int:
        """What adding it would take from the budget now."""
        extra = 0 if self.groups else self.caption
        lines = self.groups.get(group_of(fused.episode))
        if lines is None:
            return fused.tokens + extra + HEADER_TOKENS
        speaker = fused.episode.speaker
        at = bisect.bisect(lines, (_said_at(fused), speaker))
        before = lines[at - 1][1] if at > 0 else None
        after = lines[at][1] if at < len(lines) else None
        cost = fused.tokens - (_speaker_tokens(speaker) if before == speaker else 0)
        if after is not None:  # the next line names its speaker only if this one differs
            was, now = before != after, speaker != after
            cost += (now - was) * _speaker_tokens(after)
        return cost + extra

    def fits(self, fused: FusedEpisode) -> bool:
        return self.cost(fused) <= self.left

    def add(self, fused: FusedEpisode) -> None:
        self.left -= self.cost(fused)
        lines = self.groups.setdefault(group_of(fused.episode), [])
        bisect.insort(lines, (_said_at(fused), fused.episode.speaker))


def section_tokens(caption: str, memories: Sequence[FusedEpisode]) -> int:
    """What `render` of these memories costs, from their lines' `tokens`."""
    tally = Tally(caption, 0)
    for fused in memories:
        tally.add(fused)
    return -tally.left


def block_tokens(standing: Sequence[FusedEpisode], memories: Sequence[FusedEpisode]) -> int:
    """What the standing section, the memories' section and the break between them cost:
    what `contextBudget` holds."""
    kept = section_tokens(STANDING_CAPTION, standing)
    searched = section_tokens(MEMORIES_CAPTION, memories)
    return kept + searched + (SECTION_BREAK if kept and searched else 0)
