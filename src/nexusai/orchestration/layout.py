"""The prompt's layout of a turn's memories, and what it costs, exactly.

A section is a caption, then the memories grouped by conversation: a group is one session
on one day, headed once by its date ("8 May 2023"; a second conversation of that day
"8 May 2023, conversation 2"), its memories in the order they were said, each a line
`speaker: text` (an excerpt marked `…` where it was cut). Every memory names its speaker,
and a memory's own further lines are indented: a message that says "assistant: ..." or
holds a list can never read as another speaker's, or run into the next memory. Groups
come in the order of their best memory. Against `- [2023-05-08] speaker: ` on every line
this saves about 6 tokens a memory; the LLM still reads who said each line, and when. The
standing section is dated too, its newest group first. Days are the turn's own (`zone`,
its `now`'s offset; UTC without one): a memory of 23:30 in New York is under that day.
The block a turn's memories make of the prompt (`memory_block`) is here too, so that
`/context` shows the prompt without importing chat.

`Tally` counts a section while packing fills it, so that a budget holds the text the LLM
gets: `count_tokens(render(...))` is always what the tally says.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime, tzinfo

from nexusai.models import Episode
from nexusai.orchestration.context import Context
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.tokens import count_tokens

STANDING_CAPTION = "What the user asked to be kept in mind:"
MEMORIES_CAPTION = "Memories from earlier conversations:"
CUT = "…"

GroupKey = tuple[int, str]


def group_of(episode: Episode, zone: tzinfo | None = None) -> GroupKey:
    """The group a memory is given in: its session, on its day (in `zone`)."""
    return episode.session_id, day_of(episode.occurred_at, zone)


def day_of(occurred_at: str, zone: tzinfo | None) -> str:
    """The day (YYYY-MM-DD) a stored time falls on in `zone`; UTC's without one."""
    if zone is None:
        return occurred_at[:10]
    moment = datetime.fromisoformat(occurred_at.replace("Z", "+00:00"))
    return moment.astimezone(zone).date().isoformat()


MONTHS = (
    *("January", "February", "March", "April", "May", "June"),
    *("July", "August", "September", "October", "November", "December"),
)


def header(episode: Episode, nth: int = 1, zone: tzinfo | None = None) -> str:
    """The group's date, as "8 May 2023": three tokens, where `[2023-05-08]` is seven; the
    nth conversation of one day says which ("8 May 2023, conversation 2")."""
    year, month, day = day_of(episode.occurred_at, zone).split("-")
    date = f"{int(day)} {MONTHS[int(month) - 1]} {year}"
    return date if nth == 1 else f"{date}, conversation {nth}"


# A memory's further lines, each indented (blank ones left empty, so that a run of line
# breaks stays one run): spaces are no token, so the count is the text's own.
_FURTHER_LINE = re.compile(r"\n(?=[^\n])")
INDENT = "  "


def text_of(fused: FusedEpisode) -> str:
    """The memory's text as the line gives it: whole, or its excerpt marked where cut;
    without white space at either end (a line break there would join the layout's), its
    further lines indented."""
    if fused.excerpt is None:
        text = fused.episode.content.strip()
    else:
        start, end = fused.excerpt
        before = f"{CUT} " if start > 0 else ""
        after = f" {CUT}" if end < len(fused.episode.content) else ""
        text = f"{before}{fused.content.strip()}{after}"
    return _FURTHER_LINE.sub("\n" + INDENT, text)


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


def whole_line_tokens(episode: Episode, content_tokens: int) -> int:
    """`line_tokens` of the whole memory: no cut ends."""
    return LINE_BREAK + _speaker_tokens(episode.speaker) + content_tokens


@functools.lru_cache(maxsize=4096)
def _speaker_tokens(speaker: str) -> int:
    return count_tokens(f"{speaker}:")


@functools.lru_cache(maxsize=8)
def _fixed_tokens(text: str) -> int:
    return count_tokens(text)


# Every line after a section's caption follows a line break, a token (`nexusai.tokens`).
LINE_BREAK = 1
# Every header is a date, a number, a month's name and a year: three tokens whatever it is,
# and its line break; a day's second conversation on says ", conversation N", three more.
HEADER_TOKENS = LINE_BREAK + 3
NTH_TOKENS = 3
# Between two sections of the block, an empty line: a run of line breaks, one token.
SECTION_BREAK = LINE_BREAK


def render(
    caption: str,
    memories: Sequence[FusedEpisode],
    dated: bool = True,
    zone: tzinfo | None = None,
) -> str:
    """The section: the caption, then each group's header and lines (`dated`), or each
    line in the order given; empty without memories."""
    if not memories:
        return ""
    if not dated:
        return "\n".join([caption, *map(line, memories)])
    groups: dict[GroupKey, list[FusedEpisode]] = {}
    for fused in memories:
        groups.setdefault(group_of(fused.episode, zone), []).append(fused)
    nth = _nth_in_time(groups)
    lines = [caption]
    for key, members in groups.items():
        lines.append(header(members[0].episode, nth[key], zone))
        lines.extend(line(fused) for fused in sorted(members, key=_said_at))
    return "\n".join(lines)


def _nth_in_time(groups: Mapping[GroupKey, Sequence[FusedEpisode]]) -> dict[GroupKey, int]:
    """Each group's place among its day's groups by when it was said, not by rank: "8 May
    2023, conversation 2" is that day's second conversation given. (As many groups of a day
    say a number either way, so the cost is the same.)"""
    by_day: dict[str, list[tuple[tuple[str, int], GroupKey]]] = {}
    for key, members in groups.items():
        by_day.setdefault(key[1], []).append((min(map(_said_at, members)), key))
    return {
        key: nth for keyed in by_day.values() for nth, (_, key) in enumerate(sorted(keyed), start=1)
    }


def _said_at(fused: FusedEpisode) -> tuple[str, int]:
    return fused.episode.occurred_at, fused.episode.id


class Tally:
    """A section's cost as memories are added to it, each `tokens` already its line's: the
    caption with the first, and (`dated`) a header with the first of each group."""

    def __init__(
        self, caption: str, budget: int, dated: bool = True, zone: tzinfo | None = None
    ) -> None:
        self.caption = _fixed_tokens(caption)
        self.left = budget
        self.dated = dated
        self.zone = zone
        self.groups: set[GroupKey] = set()
        self.days: Counter[str] = Counter()
        self.lines = 0

    def cost(self, fused: FusedEpisode) -> int:
        """What adding it would take from the budget now."""
        cost = fused.tokens + (0 if self.lines else self.caption)
        group = group_of(fused.episode, self.zone)
        if self.dated and group not in self.groups:
            cost += HEADER_TOKENS + (NTH_TOKENS if self.days[group[1]] else 0)
        return cost

    def fits(self, fused: FusedEpisode) -> bool:
        return self.cost(fused) <= self.left

    def add(self, fused: FusedEpisode) -> None:
        self.left -= self.cost(fused)
        self.lines += 1
        group = group_of(fused.episode, self.zone)
        if group not in self.groups:
            self.groups.add(group)
            self.days[group[1]] += 1


def section_tokens(
    caption: str,
    memories: Sequence[FusedEpisode],
    dated: bool = True,
    zone: tzinfo | None = None,
) -> int:
    """What `render` of these memories costs, from their lines' `tokens`."""
    tally = Tally(caption, 0, dated, zone)
    for fused in memories:
        tally.add(fused)
    return -tally.left


def block_tokens(
    standing: Sequence[FusedEpisode],
    memories: Sequence[FusedEpisode],
    zone: tzinfo | None = None,
) -> int:
    """What the standing section, the memories' section and the break between them cost:
    what `contextBudget` holds."""
    kept = section_tokens(STANDING_CAPTION, standing, zone=zone)
    searched = section_tokens(MEMORIES_CAPTION, memories, zone=zone)
    return kept + searched + (SECTION_BREAK if kept and searched else 0)


def _searched(context: Context) -> list[FusedEpisode]:
    """The memories not also standing ones: the prompt gives each once, as standing."""
    standing = {m.episode.id for m in context.standing}
    return [m for m in context.memories if m.episode.id not in standing]


def standing_section(standing: Sequence[FusedEpisode], zone: tzinfo | None = None) -> str:
    """The user's rules and preferences, the newest first, each group under its date: of
    "I'm vegetarian" and a later "I eat fish now", the model reads which came last."""
    newest = sorted(standing, key=_said_at, reverse=True)
    return render(STANDING_CAPTION, newest, zone=zone)


def memory_block(context: Context) -> str:
    """The standing memories, the memories and the entities of a turn, as the system
    message presents them (`layout`: the memories grouped by conversation, each group dated)."""
    parts = [
        standing_section(context.standing, context.zone),
        render(MEMORIES_CAPTION, _searched(context), zone=context.zone),
    ]
    if context.entities:
        parts.append("Known entities:\n" + "\n".join(f"- {e.describe()}" for e in context.entities))
    return "\n\n".join(part for part in parts if part)


def memory_tokens(context: Context) -> int:
    """What the block's standing and memory sections cost: what `contextBudget` holds."""
    return block_tokens(context.standing, _searched(context), context.zone)
