"""Packing: the stage after fusion. Which of the fused memories a turn gives the LLM, and
how much of each, within the `contextBudget` setting (tokens, `nexusai.tokens`).

- `contextBudget` 0: the spec's turn, the first `semanticLimit` memories whole.
- Above 0, from the deeper list fusion gives, by the packer the fusion mode names:
  - `Dense` (the learned mode): the most evidence per token. A memory's worth is the
    ranker's probability that it answers; what fits is taken by worth per token, a long
    memory as an excerpt (the passage that holds the message's words), grown back to the
    whole message while there is room. The memories keep fusion's order.
  - `Greedy` (RRF, whose scores say only the order): fusion's order, each memory whole
    while it fits. Weighing RRF's list by place per token, or cutting its long memories
    to excerpts in order, each lost recall on one development set (docs/evaluation.md).
"""

from __future__ import annotations

import bisect
import functools
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace

from nexusai.keywords import query_terms
from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.learned import probability
from nexusai.tokens import count_tokens

# A memory longer than this may enter as an excerpt of about `EXCERPT_TOKENS` tokens,
# measured in characters (English runs about 4.5 a token, spaces included) so that a long
# text is never tokenized whole to decide: about 120 tokens, and 80.
EXCERPT_OVER_CHARS = 540
EXCERPT_TOKENS = 80
EXCERPT_CHARS = 360
# How deep fusion ranks for a budgeted turn: the pool packing chooses from.
PACK_DEPTH = 50
# Recognised standing memories take at most this share of a budget (pinned ones may take
# all of it): the rest is the searched memories'.
STANDING_SHARE = 0.25


def memory_line(episode: Episode, content: str) -> str:
    """A memory as the prompt gives it (`chat.memory_block`): its date, who said it, what."""
    return f"{_prefix(episode)}{content}"


def _prefix(episode: Episode) -> str:
    return f"- [{episode.occurred_at[:10]}] {episode.speaker}: "


def line_tokens(episode: Episode, content: str) -> int:
    """What `memory_line` costs: the prefix's tokens and the content's, which never run
    into each other (a space is between)."""
    return _prefix_tokens(_prefix(episode)) + count_tokens(content)


def whole(fused: FusedEpisode) -> FusedEpisode:
    """The memory as it is, its cost counted (the same sum as `line_tokens`, the content's
    count kept by `content_tokens`)."""
    cost = _prefix_tokens(_prefix(fused.episode)) + content_tokens(fused.episode)
    return replace(fused, tokens=cost, excerpt=None)


@functools.lru_cache(maxsize=4096)
def _prefix_tokens(prefix: str) -> int:
    """A date and a speaker: few of them, each counted once."""
    return count_tokens(prefix)


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
        found = count_tokens(episode.content)
        with _COUNTED_LOCK:
            _COUNTED[key] = found
            if len(_COUNTED) > _COUNTED_MAX:
                _COUNTED.popitem(last=False)
    return found


def value(fused: FusedEpisode) -> float:
    """The learned ranker's probability that the memory answers the message."""
    return probability(fused.score)


class Packer(ABC):
    name: str

    @abstractmethod
    def pack(
        self, fused: Sequence[FusedEpisode], message: str, budget: int, limit: int
    ) -> list[FusedEpisode]:
        """What of `fused` (best first) goes into a prompt of `budget` tokens: at most
        `limit` memories."""


class Greedy(Packer):
    """Fusion's order, each memory whole when it fits (one long reply can take the rest)."""

    name = "greedy"

    def pack(
        self, fused: Sequence[FusedEpisode], message: str, budget: int, limit: int
    ) -> list[FusedEpisode]:
        taken: list[FusedEpisode] = []
        left = budget
        for memory in fused:
            if len(taken) == limit:
                break
            # Each run of non-space holds a token at least: what cannot fit is not counted.
            if len(memory.episode.content.split()) > left:
                continue
            candidate = whole(memory)
            if candidate.tokens <= left:
                taken.append(candidate)
                left -= candidate.tokens
        return taken


class Dense(Packer):
    """The most value per token: long memories as excerpts first, grown back while room."""

    name = "dense"

    def pack(
        self, fused: Sequence[FusedEpisode], message: str, budget: int, limit: int
    ) -> list[FusedEpisode]:
        words = stems_of(message)
        options = [_shortest(f, words) for f in fused]
        worth = [value(f) for f in fused]
        taken = self._choose(options, worth, budget, limit)
        left = budget - sum(option.tokens for option in taken.values())
        for i in sorted(taken, key=lambda i: -worth[i]):  # excerpts grown back
            if taken[i].excerpt is not None:
                grown = whole(fused[i])
                if grown.tokens - taken[i].tokens <= left:
                    left -= grown.tokens - taken[i].tokens
                    taken[i] = grown
        return [taken[i] for i in sorted(taken)]

    def _choose(
        self, options: list[FusedEpisode], worth: list[float], budget: int, limit: int
    ) -> dict[int, FusedEpisode]:
        order = sorted(range(len(options)), key=lambda i: -worth[i] / options[i].tokens)
        taken: dict[int, FusedEpisode] = {}
        left = budget
        for i in order:
            if options[i].tokens <= left and len(taken) < limit:
                taken[i] = options[i]
                left -= options[i].tokens
        return taken


def _shortest(fused: FusedEpisode, terms: tuple[str, ...]) -> FusedEpisode:
    """The memory whole, or, when long, its excerpt (the whole is counted only if the
    excerpt is grown back)."""
    if len(fused.episode.content) <= EXCERPT_OVER_CHARS:
        return whole(fused)
    start, end = excerpt_span(fused.episode.content, terms)
    text = fused.episode.content[start:end]
    return replace(fused, excerpt=(start, end), tokens=line_tokens(fused.episode, text))


def stems_of(message: str) -> tuple[str, ...]:
    """The message's words as a text is searched for them: a word starting as one of them
    does (its first five letters, lower case, as a crude stem)."""
    return tuple(sorted({term[:5].lower() for term in query_terms(message) if term}))


def excerpt_span(text: str, terms: tuple[str, ...]) -> tuple[int, int]:
    """The span of about `EXCERPT_TOKENS` tokens of `text` that holds the most of the
    message's words (a word's first five letters, as a crude stem), centred on them; the
    opening when none is there (what the episode's vector was made from). Found on the
    characters (`EXCERPT_CHARS`), so a long text is never tokenized whole on a turn."""
    if len(text) <= EXCERPT_CHARS:
        return 0, len(text)
    hits = _hits(text, terms)
    if not hits:
        return 0, _word_end(text, EXCERPT_CHARS)
    best, most = 0, 0
    for first in range(len(hits)):  # the most hits within one window's length
        count = bisect.bisect_right(hits, hits[first] + EXCERPT_CHARS) - first
        if count > most:
            best, most = first, count
    inside = hits[best : best + most]
    middle = (inside[0] + inside[-1]) // 2
    start = min(max(0, middle - EXCERPT_CHARS // 2), len(text) - EXCERPT_CHARS)
    start = _word_start(text, start)
    return start, _word_end(text, start + EXCERPT_CHARS)


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


PACKERS: dict[str, Packer] = {packer.name: packer for packer in (Dense(), Greedy())}


def pack(
    fused: Sequence[FusedEpisode], message: str, budget: int, limit: int, packer: str
) -> list[FusedEpisode]:
    """The turn's memories: at budget 0 the first `limit` whole (the spec's turn, nothing
    counted); above it, at most `limit` that `packer` chooses (the fusion mode's own,
    `FusionMode.packer`)."""
    if budget <= 0:
        return list(fused[:limit])
    return PACKERS[packer].pack(fused, message, budget, limit)


def pack_turn(
    fused: Sequence[FusedEpisode],
    standing: Sequence[FusedEpisode],
    message: str,
    budget: int,
    limit: int,
    packer: str,
) -> tuple[list[FusedEpisode], list[FusedEpisode]]:
    """A turn's two lists, (standing, memories), from fusion's list and the standing
    candidates (pinned first, then the most relevant). At budget 0 the memories are the
    spec's, and the standing ones all come beside, those among the memories too (the
    prompt gives each once, as a standing one). With a budget, the standing ones come
    first, whole, each while it fits (a recognised one within `STANDING_SHARE` of it), and
    the memories are packed into what is left, without them."""
    if budget <= 0:
        return [whole(f) for f in standing], pack(fused, message, 0, limit, packer)
    kept = _standing_within(standing, budget)
    left = budget - sum(f.tokens for f in kept)
    if left <= 0:
        return kept, []
    taken = {f.episode.id for f in kept}
    rest = [f for f in fused if f.episode.id not in taken]
    return kept, pack(rest, message, left, limit, packer)


def _standing_within(standing: Sequence[FusedEpisode], budget: int) -> list[FusedEpisode]:
    kept: list[FusedEpisode] = []
    spent = 0
    for candidate in standing:
        line = whole(candidate)
        room = budget if candidate.episode.pinned else int(budget * STANDING_SHARE)
        if spent + line.tokens <= room:
            kept.append(line)
            spent += line.tokens
    return kept
