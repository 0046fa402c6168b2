"""Packing: the stage after fusion. Which of the fused memories a turn gives the LLM, and
how much of each, within the `contextBudget` setting (tokens, `nexusai.tokens`).

- `contextBudget` 0: the spec's turn, the first `semanticLimit` memories whole.
- Above 0, `Dense`: from the deeper list fusion gives, the memories with the most evidence
  per token. Each memory's value is the chance fusion gives it (the learned ranker's
  probability; at RRF, the reciprocal of its place); a long one may enter as an excerpt, the passage
  that holds the message's words. What fits is taken by value per token, an excerpt grown
  back to the whole message while there is room, and the memories keep fusion's order.
- `Greedy` (for comparison in `nexus eval`): fusion's order, each memory whole if it fits.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace

from nexusai.keywords import query_terms
from nexusai.models import Episode
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.tokens import count_tokens, token_spans

# Most memories a budgeted turn gives, however many short ones would fit.
MAX_MEMORIES = 50
# A memory longer than this many tokens may enter as an excerpt of about `EXCERPT_TOKENS`.
EXCERPT_OVER = 120
EXCERPT_TOKENS = 80
# How deep fusion ranks for a budgeted turn: the pool packing chooses from.
PACK_DEPTH = 50


def memory_line(episode: Episode, content: str) -> str:
    """A memory as the prompt gives it (`chat.memory_block`): its date, who said it, what."""
    return f"- [{episode.occurred_at[:10]}] {episode.speaker}: {content}"


def line_tokens(episode: Episode, content: str) -> int:
    return count_tokens(memory_line(episode, content))


def whole(fused: FusedEpisode) -> FusedEpisode:
    """The memory as it is, its cost counted."""
    return replace(fused, tokens=line_tokens(fused.episode, fused.episode.content))


def value(fused: FusedEpisode, place: int) -> float:
    """What fusion says a memory at this place (1-based) is worth: the learned ranker's
    probability that it answers; at RRF, whose scores barely fall from one place to the
    next (1/61, 1/62, ...), the reciprocal of its place."""
    if fused.placed_by is not None:
        return 1.0 / (1.0 + math.exp(-fused.score))
    return 1.0 / place


class Packer(ABC):
    name: str

    @abstractmethod
    def pack(self, fused: Sequence[FusedEpisode], message: str, budget: int) -> list[FusedEpisode]:
        """What of `fused` (best first) goes into a prompt of `budget` tokens."""


class Greedy(Packer):
    """Fusion's order, each memory whole when it fits (one long reply can take the rest)."""

    name = "greedy"

    def pack(self, fused: Sequence[FusedEpisode], message: str, budget: int) -> list[FusedEpisode]:
        taken: list[FusedEpisode] = []
        left = budget
        for candidate in map(whole, fused):
            if candidate.tokens <= left and len(taken) < MAX_MEMORIES:
                taken.append(candidate)
                left -= candidate.tokens
        return taken


class Dense(Packer):
    """The most value per token: long memories as excerpts first, grown back while room."""

    name = "dense"

    def pack(self, fused: Sequence[FusedEpisode], message: str, budget: int) -> list[FusedEpisode]:
        terms = query_terms(message)
        options = [_shortest(whole(f), terms) for f in fused]
        worth = [value(f, place) for place, f in enumerate(fused, start=1)]
        order = sorted(range(len(options)), key=lambda i: -worth[i] / options[i].tokens)
        taken: dict[int, FusedEpisode] = {}
        left = budget
        for i in order:
            if options[i].tokens <= left and len(taken) < MAX_MEMORIES:
                taken[i] = options[i]
                left -= options[i].tokens
        for i in sorted(taken, key=lambda i: -worth[i]):  # excerpts grown back
            if taken[i].excerpt is not None:
                grown = whole(fused[i])
                if grown.tokens - taken[i].tokens <= left:
                    left -= grown.tokens - taken[i].tokens
                    taken[i] = grown
        return [taken[i] for i in sorted(taken)]


def _shortest(fused: FusedEpisode, terms: Sequence[str]) -> FusedEpisode:
    """The memory whole, or, when long, its excerpt."""
    if fused.tokens <= EXCERPT_OVER:
        return fused
    start, end = excerpt_span(fused.episode.content, terms)
    text = fused.episode.content[start:end]
    return replace(fused, excerpt=(start, end), tokens=line_tokens(fused.episode, text))


def excerpt_span(text: str, terms: Sequence[str]) -> tuple[int, int]:
    """The character span of the `EXCERPT_TOKENS` tokens of `text` that hold the most of
    the message's words (a word's first five letters, as a crude stem); the opening when
    none is there (the part its vector was made from)."""
    spans = token_spans(text)
    if len(spans) <= EXCERPT_TOKENS:
        return 0, len(text)
    stems = {term[:5] for term in terms}
    hits = [int(text[s:e].casefold()[:5] in stems) for s, e in spans]
    best, best_hits, window = 0, sum(hits[:EXCERPT_TOKENS]), sum(hits[:EXCERPT_TOKENS])
    for first in range(1, len(spans) - EXCERPT_TOKENS + 1):
        window += hits[first + EXCERPT_TOKENS - 1] - hits[first - 1]
        if window > best_hits:
            best, best_hits = first, window
    if not best_hits:
        return spans[0][0], spans[EXCERPT_TOKENS - 1][1]
    # The window centred on its hits, so each has words around it.
    found = [i for i in range(best, best + EXCERPT_TOKENS) if hits[i]]
    middle = (found[0] + found[-1]) // 2
    start = min(max(0, middle - EXCERPT_TOKENS // 2), len(spans) - EXCERPT_TOKENS)
    return spans[start][0], spans[start + EXCERPT_TOKENS - 1][1]


PACKERS: dict[str, Packer] = {packer.name: packer for packer in (Dense(), Greedy())}


def pack(
    fused: Sequence[FusedEpisode], message: str, budget: int, limit: int, packer: str = "dense"
) -> list[FusedEpisode]:
    """The turn's memories: at budget 0 the first `limit` whole (the spec's turn, nothing
    counted); above it, what `packer` chooses."""
    if budget <= 0:
        return list(fused[:limit])
    return PACKERS[packer].pack(fused, message, budget)
