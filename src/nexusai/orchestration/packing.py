"""Packing: the stage after fusion. Which of the fused memories a turn gives the LLM, and
how much of each, within the `contextBudget` setting (tokens, `nexusai.tokens`).

- `contextBudget` 0: the spec's turn, the first `semanticLimit` memories whole.
- Above 0, from the deeper list fusion gives, by the packer the fusion mode names: the
  most evidence per token (`Packer`), a long memory as an excerpt (the passage that
  holds the message's words), grown back to the whole message while there is room. The
  memories keep fusion's order. What a memory is worth:
  - `Dense` (the learned mode): the ranker's probability that it answers.
  - `Placed` (RRF, whose scores say only the order): the chance that a memory at its
    place in fusion's list, of its length, answers, fitted on the development sets.
- What a memory costs is its line in the prompt's layout (`layout`), and a section's
  caption and group headers are counted as the memories that need them are taken.
"""

from __future__ import annotations

import bisect
import math
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import tzinfo
from typing import NamedTuple

from nexusai.config import RETRIEVAL
from nexusai.keywords import query_terms
from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.layout import (
    MEMORIES_CAPTION,
    SECTION_BREAK,
    STANDING_CAPTION,
    Tally,
    line_tokens,
    whole_line_tokens,
)
from nexusai.ranking.model import probability
from nexusai.timewords import asks_for_order
from nexusai.tokens import count_tokens

# A memory longer than this may enter as an excerpt of about `EXCERPT_TOKENS` tokens,
# measured in characters (English runs about 4.5 a token, spaces included) so that a long
# text is never tokenized whole to decide: about 120 tokens, and 80.
EXCERPT_OVER_CHARS = 540
EXCERPT_TOKENS = 80
EXCERPT_CHARS = 360
CHARS_PER_TOKEN = EXCERPT_CHARS / EXCERPT_TOKENS
# Where an excerpt opens: this share of its length before the first of the message's words
# it holds, so that most of it follows them (a fact tends to come after the words that ask
# for it: "my budget is ..."); centred on them gave a little less of the answers' words
# (docs/evaluation.md, "Excerpts, worth per token ...").
EXCERPT_LEAD = 0.25
PACK_DEPTH = RETRIEVAL.POOL_DEPTH  # how deep fusion ranks for a budgeted turn, at least
# How deep fusion ranks for a larger budget: (the largest budget ranked that deep, depth),
# and past the last, `RETRIEVAL.POOL_DEPTH_MAX`. Short memories run out before a large
# budget does (50 of LoCoMo's fill about 1,700 tokens): measured in docs/evaluation.md,
# "The pool follows the budget".
DEPTHS_BY_BUDGET: tuple[tuple[int, int], ...] = ((1000, PACK_DEPTH), (2000, 100))
# A message that asks in what order things happened is answered by every mention of one
# thread, each short: its list is ranked as deep as any budget's, and a long memory comes
# as a passage of about 30 tokens. 90 characters named more messages and carried fewer of
# the answer's words (docs/evaluation.md, "Questions about order").
ORDER_EXCERPT_CHARS = 135
# Recognised standing memories take at most this share of a budget (pinned ones may take
# all of it): the rest is the searched memories'.
STANDING_SHARE = 0.25


class Stage(NamedTuple):
    """One stage of packing a budgeted turn: a budget, and how deep its list is ranked."""

    budget: int
    depth: int


def stages(budget: int, least: int = 0) -> tuple[Stage, ...]:
    """The stages a turn packed into `budget` tokens packs in, shallowest first: each
    shallower depth at the largest budget ranked that deep, then the turn's own budget
    (each depth at least `least`, the `semanticLimit`; one stage a depth)."""
    found: list[Stage] = []
    for top, depth in [*DEPTHS_BY_BUDGET, (budget, RETRIEVAL.POOL_DEPTH_MAX)]:
        stage = Stage(min(top, budget), max(depth, least))
        if found and found[-1].depth == stage.depth:
            found.pop()
        found.append(stage)
        if budget <= top:
            break
    return tuple(found)


@dataclass(frozen=True)
class Packing:
    """How a budgeted turn packs: its stages, and about how long an excerpt is."""

    stages: tuple[Stage, ...]
    excerpt_chars: int = EXCERPT_CHARS


def packing_for(budget: int, message: str, least: int = 0) -> Packing:
    """How a turn packed into `budget` tokens packs for `message` (`least`: the
    `semanticLimit`): an order question's list as deep as any, its excerpts short."""
    if asks_for_order(message):
        deepest = max(least, RETRIEVAL.POOL_DEPTH_MAX)
        return Packing(stages(budget, deepest), ORDER_EXCERPT_CHARS)
    return Packing(stages(budget, least))


def whole(fused: FusedEpisode) -> FusedEpisode:
    """The memory as it is, its line's cost counted (the text's count kept by
    `content_tokens`)."""
    return fused.priced(whole_line_tokens(fused.episode, content_tokens(fused.episode)))


# An episode's whole text counted once, not on every turn that packs it (a long reply is
# half a millisecond); by id and the text's hash, so an edited episode is counted again.
_COUNTED: OrderedDict[tuple[int, int], int] = OrderedDict()
_COUNTED_MAX = 100_000
_COUNTED_LOCK = threading.Lock()  # turns run in many threads; an OrderedDict is not safe


def content_tokens(episode: Episode) -> int:
    key = (episode.id, hash(episode.content))
    with _COUNTED_LOCK:
        found = _COUNTED.get(key)
    if found is None:
        found = count_tokens(episode.content.strip())  # as a line gives it
        with _COUNTED_LOCK:
            _COUNTED[key] = found
            if len(_COUNTED) > _COUNTED_MAX:
                _COUNTED.popitem(last=False)
    return found


class Packer(ABC):
    """Worth per token: each memory as its shortest option (a long one as its excerpt), in
    the order of its worth per token, taken while each fits. Where the next does not fit,
    the packing stops, and that one comes cut to the room left (if it is `FILL_TOKENS` or
    more). So a memory given within a budget is given within any larger one: recall never
    falls as the budget grows. What room a limit leaves grows excerpts back to whole.
    A subclass says what a memory is worth."""

    name: str

    @abstractmethod
    def worth(self, options: Sequence[FusedEpisode]) -> list[float]:
        """How likely each memory (fusion's list, best first, each as its shortest
        option) is to answer the message."""

    def pack(
        self,
        fused: Sequence[FusedEpisode],
        message: str,
        tally: Tally,
        limit: int,
        chars: int = EXCERPT_CHARS,
    ) -> list[FusedEpisode]:
        """What of `fused` (best first) goes into the section `tally` counts: at most
        `limit` memories, in fusion's order (an excerpt about `chars` long)."""
        words = stems_of(message)
        options = shortest_options(fused, words, chars)
        worth = self.worth(options)
        order = sorted(range(len(options)), key=lambda i: -worth[i] / options[i].tokens)
        taken: dict[int, FusedEpisode] = {}
        for i in order:
            if len(taken) == limit:
                break
            if not tally.fits(options[i]):
                if (cut := _cut_to(fused[i], words, tally)) is not None:
                    taken[i] = cut
                    tally.add(cut)
                break
            taken[i] = options[i]
            tally.add(options[i])
        for i in sorted(taken, key=lambda i: -worth[i]):  # excerpts grown back
            if taken[i].excerpt is not None:
                grown = whole(fused[i])
                if grown.tokens - taken[i].tokens <= tally.left:
                    tally.left -= grown.tokens - taken[i].tokens
                    taken[i] = grown
        return [taken[i] for i in sorted(taken)]


class Dense(Packer):
    """The learned mode's: a memory is worth the ranker's probability that it answers."""

    name = "dense"

    def worth(self, options: Sequence[FusedEpisode]) -> list[float]:
        return [probability(f.score) for f in options]


class Placed(Packer):
    """RRF's, whose scores say only the order: a memory's worth is the chance that a memory
    at its place, of its length, is evidence (`PlacedWorth`)."""

    name = "placed"

    def __init__(self, fitted: PlacedWorth | None = None) -> None:
        self.fitted = fitted or PLACED_WORTH

    def worth(self, options: Sequence[FusedEpisode]) -> list[float]:
        return [self.fitted.chance(place, f) for place, f in enumerate(options)]


@dataclass(frozen=True)
class PlacedWorth:
    """The chance that a memory of a fused list is evidence, from its place (0 first), its
    cost in tokens and whether it is an excerpt: a logistic fit, each dataset weighed
    alike (`evaluation.calibration`)."""

    bias: float
    place: float  # on log(place + 1)
    tokens: float  # on log(tokens)
    excerpt: float

    def chance(self, place: int, option: FusedEpisode) -> float:
        weights = (self.bias, self.place, self.tokens, self.excerpt)
        return probability(sum(w * x for w, x in zip(weights, terms(place, option), strict=True)))


def terms(place: int, option: FusedEpisode) -> tuple[float, float, float, float]:
    """What `PlacedWorth` weighs of a memory at `place`: 1, log(place + 1), log(tokens),
    and whether it is an excerpt (what `evaluation.calibration` fits them to)."""
    excerpt = float(option.excerpt is not None)
    return (1.0, math.log(place + 1), math.log(max(option.tokens, 1)), excerpt)


# Fitted on LoCoMo and both BEAM tiers by `nexus eval all` (it prints the fit on every
# conversation given, and scores each with a fit that left it out: docs/evaluation.md).
PLACED_WORTH = PlacedWorth(bias=-3.291, place=-1.031, tokens=0.76, excerpt=-1.688)
# The room the last memory may be cut to: less says too little to be worth its tokens.
FILL_TOKENS = 40


def _cut_to(fused: FusedEpisode, terms: tuple[str, ...], tally: Tally) -> FusedEpisode | None:
    """The memory as the passage that fills what `tally` has left, or None when that is
    less than `FILL_TOKENS`."""
    room = tally.left - tally.cost(replace(fused, tokens=0))
    if room < FILL_TOKENS:
        return None
    chars = int(room * CHARS_PER_TOKEN)
    while chars >= FILL_TOKENS * 2:
        cut = _excerpt(fused, *excerpt_span(fused.episode.content, terms, chars))
        if tally.fits(cut):
            return cut
        chars = chars * 4 // 5
    return None


def shortest_options(
    fused: Sequence[FusedEpisode], terms: tuple[str, ...], chars: int = EXCERPT_CHARS
) -> list[FusedEpisode]:
    """Each memory as packing first weighs it: whole, or a long one as its excerpt of
    about `chars` around the message's `terms` (`stems_of`)."""
    return [_shortest(f, terms, chars) for f in fused]


def _shortest(fused: FusedEpisode, terms: tuple[str, ...], chars: int) -> FusedEpisode:
    """The memory whole, or, when long (over `EXCERPT_OVER_CHARS` at the default length,
    as much longer at another), its excerpt (the whole is counted only if the excerpt is
    grown back)."""
    if len(fused.episode.content) <= chars * EXCERPT_OVER_CHARS // EXCERPT_CHARS:
        return whole(fused)
    start, end, counted = _passage(fused.episode, terms, chars)
    cut = fused.priced(0, (start, end))
    return cut.priced(line_tokens(cut, counted), (start, end))


def _excerpt(fused: FusedEpisode, start: int, end: int) -> FusedEpisode:
    """The memory as the passage from `start` to `end`, its line's cost counted."""
    cut = fused.priced(0, (start, end))
    return cut.priced(line_tokens(cut, count_tokens(cut.content.strip())), (start, end))


# A long episode's passage for a message's words, and what its text costs, kept: `nexus
# eval` packs one fused list at many budgets, floors and fits (the same passages each
# time), and a turn's packer weighs each memory's passage before growing some back.
_PASSAGES: OrderedDict[tuple[int, int, tuple[str, ...], int], tuple[int, int, int]] = OrderedDict()
_PASSAGES_MAX = 100_000
_PASSAGES_LOCK = threading.Lock()


def _passage(episode: Episode, terms: tuple[str, ...], chars: int) -> tuple[int, int, int]:
    """(start, end, tokens of the stripped passage) of `excerpt_span`."""
    key = (episode.id, hash(episode.content), terms, chars)
    with _PASSAGES_LOCK:
        found = _PASSAGES.get(key)
    if found is None:
        start, end = excerpt_span(episode.content, terms, chars)
        found = (start, end, count_tokens(episode.content[start:end].strip()))
        with _PASSAGES_LOCK:
            _PASSAGES[key] = found
            if len(_PASSAGES) > _PASSAGES_MAX:
                _PASSAGES.popitem(last=False)
    return found


def stems_of(message: str) -> tuple[str, ...]:
    """The message's words as a text is searched for them: a word starting as one of them
    does (its first five letters, lower case, as a crude stem)."""
    return tuple(sorted({term[:5].lower() for term in query_terms(message) if term}))


def excerpt_span(text: str, terms: tuple[str, ...], chars: int = EXCERPT_CHARS) -> tuple[int, int]:
    """The span of about `chars` characters of `text` (`EXCERPT_TOKENS` tokens by default)
    that holds the most of the message's words (a word's first five letters, as a crude
    stem), opening a quarter of its length before the first of them (`EXCERPT_LEAD`); the
    opening when none is there (what the episode's vector was made from). Found on the
    characters, so a long text is never tokenized whole on a turn."""
    if len(text) <= chars:
        return 0, len(text)
    hits = _hits(text, terms)
    if not hits:
        return 0, _word_end(text, chars)
    best, most = 0, 0
    for first in range(len(hits)):  # the most hits within one window's length
        count = bisect.bisect_right(hits, hits[first] + chars) - first
        if count > most:
            best, most = first, count
    start = min(max(0, hits[best] - int(chars * EXCERPT_LEAD)), len(text) - chars)
    start = _word_start(text, start)
    return start, _word_end(text, start + chars)


def _hits(text: str, stems: tuple[str, ...]) -> list[int]:
    """Where words starting as the stems are in the text, in order. Found with `str.find`
    on the lower-cased text, which is many times faster than a regular expression there."""
    lowered = text.lower()
    found = []
    for stem in stems:
        at = lowered.find(stem)
        while at != -1:
            if at == 0 or not lowered[at - 1].isalnum():
                found.append(at)
            at = lowered.find(stem, at + 1)
    return sorted(found)


def _word_start(text: str, at: int) -> int:
    """`at`, moved on to the start of the next word (unless it is at the text's start)."""
    if at == 0:
        return 0
    space = text.find(" ", at)
    return at if space == -1 or space - at > 30 else space + 1


def _word_end(text: str, at: int) -> int:
    """`at`, moved back to the end of the word before it."""
    if at >= len(text):
        return len(text)
    space = text.rfind(" ", 0, at)
    return at if space == -1 or at - space > 30 else space


PACKERS: dict[str, Packer] = {packer.name: packer for packer in (Dense(), Placed())}
"""Every packer by name: a mode names its own (`FusionMode.packer`). A new entry needs:
its `worth` (and, if fitted, its fit in `evaluation.calibration`, printed by `nexus eval`
and kept here as `PLACED_WORTH` is); a mode that names it; `nexus eval` then scores it
within every budget under that name (`budgets.Packed`, `within_budget`)."""


def pack_turn(
    fused: Sequence[FusedEpisode],
    standing: Sequence[FusedEpisode],
    message: str,
    budget: int,
    limit: int,
    packer: Packer,
    chars: int = EXCERPT_CHARS,
    zone: tzinfo | None = None,
) -> tuple[list[FusedEpisode], list[FusedEpisode]]:
    """A turn's two lists, (standing, memories), from fusion's list and the standing
    candidates (pinned first, then the most relevant). At budget 0 the memories are the
    spec's first `limit`, and the standing ones all come beside, those among the memories
    too (the prompt gives each once, as a standing one). With a budget, the standing ones
    come first, whole, while they fit (the recognised ones within `STANDING_SHARE` of it),
    and the memories are packed into what is left, without them: both sections, as
    `layout` renders them, cost at most `budget`, and what a budget gives a larger one
    gives too (`_standing_room`)."""
    if budget <= 0:
        return [whole(f) for f in standing], list(fused[:limit])
    kept, reserved = _standing_within(standing, budget, zone)
    taken = {f.episode.id for f in kept}
    rest = [f for f in fused if f.episode.id not in taken]
    tally = Tally(MEMORIES_CAPTION, budget - reserved, zone=zone)
    return kept, packer.pack(rest, message, tally, limit, chars)


def pack_in_stages(
    lists: Mapping[int, Sequence[FusedEpisode]],
    staged: Sequence[Stage],
    standing: Sequence[FusedEpisode],
    message: str,
    limit: int,
    packer: Packer,
    chars: int = EXCERPT_CHARS,
    zone: tzinfo | None = None,
) -> tuple[list[FusedEpisode], list[FusedEpisode]]:
    """`pack_turn` for a budget whose list (`lists`, by depth) is ranked deeper than a
    smaller budget's (`stages`): the memories the largest budget of the stage before gives,
    as it gives them, then the room left packed from this stage's list. A deeper list
    ranks its candidates again (a learned score reads the whole pool), so packing it alone
    could leave out what a smaller budget gave; packed in stages, what a budget gives any
    larger one gives too, at every depth."""
    *before, (budget, depth) = staged
    if not before:
        return pack_turn(lists[depth], standing, message, budget, limit, packer, chars, zone)
    _, given = pack_in_stages(lists, before, standing, message, limit, packer, chars, zone)
    kept, reserved = _standing_within(standing, budget, zone)
    shown = {f.episode.id for f in kept}
    given = [f for f in given if f.episode.id not in shown]  # now a standing one
    tally = Tally(MEMORIES_CAPTION, budget - reserved, zone=zone)
    for f in given:
        tally.add(f)
    shown.update(f.episode.id for f in given)
    rest = [f for f in lists[depth] if f.episode.id not in shown]
    return kept, given + packer.pack(rest, message, tally, limit - len(given), chars)


def _standing_within(
    standing: Sequence[FusedEpisode], budget: int, zone: tzinfo | None = None
) -> tuple[list[FusedEpisode], int]:
    """The standing ones that fit, each in turn until one does not (pinned within the
    whole budget, the recognised within their share), and the room kept for them."""
    lines = [whole(f) for f in standing]
    costs = _section_costs(lines, zone)
    pinned = sum(f.episode.pinned for f in lines)
    pinned_room, recognised_room = _standing_room(costs, pinned, budget)
    kept = []
    for at, line in enumerate(lines):
        room = pinned_room if at < pinned else pinned_room + recognised_room
        if costs[at] > room:
            break
        kept.append(line)
    return kept, pinned_room + recognised_room


def _section_costs(lines: Sequence[FusedEpisode], zone: tzinfo | None = None) -> list[int]:
    """What the standing section costs with its first 1, 2, ... lines, and the break after
    it (kept whether or not memories follow: a token, so the room never depends on them)."""
    tally = Tally(STANDING_CAPTION, 0, zone=zone)
    costs = []
    for line in lines:
        tally.add(line)
        costs.append(-tally.left + SECTION_BREAK)
    return costs


def _standing_room(costs: Sequence[int], pinned: int, budget: int) -> tuple[int, int]:
    """The room kept for the pinned ones (all of the budget they need) and for the
    recognised ones (what they need, within `STANDING_SHARE` of the budget less the
    pinned ones' room). Neither depends on which of them fit: each grows by at most a
    token a token of budget, so the memories' room never shrinks as the budget grows,
    and a pinned memory that first fits never pushes out a memory a smaller budget gave."""
    pinned_need = costs[pinned - 1] if pinned else 0
    pinned_room = min(budget, pinned_need)
    recognised_need = (costs[-1] if costs else 0) - pinned_need
    share = int(budget * STANDING_SHARE) - pinned_need
    return pinned_room, max(0, min(share, recognised_need))
