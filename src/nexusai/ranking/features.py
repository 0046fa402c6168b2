"""What the learned ranker sees of a turn's candidates: only what the turn already has (both
legs' lists with their scores, the query, who said each candidate). No LLM, no network.

The names and their order are part of a model file: a model lists the features it was
trained on, and a model whose list differs from `FEATURES` is refused at load.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from nexusai.config import RETRIEVAL
from nexusai.models import Episode

# Each feature and its meaning, one line a person can read (the API's `explain`, the
# inspector's tooltips and docs/retrieval.md all take them from here).
MEANINGS: dict[str, str] = {
    "semantic_rank": "its place in the semantic list (depth + 1 when that leg missed it)",
    "keyword_rank": "its place in the keyword list (depth + 1 when that leg missed it)",
    "in_both": "1 when both legs found it",
    "cosine": "its cosine with the message (the list's lowest when that leg missed it)",
    "cosine_below_top": "how far its cosine is below the best candidate's",
    "bm25": "its BM25 score (0 when the keyword leg missed it)",
    "bm25_share_of_top": "its BM25 score as a share of the best candidate's",
    "rrf": "its RRF score at weights (1, 1), k = 60",
    "from_user": "1 when the user said it",
    "from_assistant": "1 when the assistant said it",
    "assistant_chat": "the share of candidates said by user or assistant: a user-assistant chat",
    "speaker_named": "the message names who said it",
    "other_speaker_named": "the message names another speaker of the candidates, not this one",
    "asks_about_you": "the message asks about the assistant ('your advice'), not 'can you'",
    "asks_what_you_said": "the message asks what the assistant said ('did you recommend')",
    "asks_about_me": "the message speaks of the user ('my', 'I')",
    "query_words": "how many words the message has",
    "candidate_length": "the log of its length in characters",
    "candidate_asks": "1 when it is a question",
    "age_in_pool": "0 for the newest candidate, 1 for the oldest",
    "session_share": "the share of the candidates that come from its session",
    "session_best_rrf": "the best RRF score among the other candidates of its session",
    "adjacent_best_rrf": "the best RRF score among the candidates stored beside it in its"
    " session (up to two messages either side)",
}
FEATURES: tuple[str, ...] = tuple(MEANINGS)
RRF_K = RETRIEVAL.RRF_K  # the spec's k, written once in config
ROLES = {"user", "assistant"}  # speakers that are roles, not named people
_WORD = re.compile(r"[\w']+")
_SECOND = {"you", "your", "yours", "you've", "you'd", "you're", "you'll", "yourself"}
# "Can you summarize ..." asks the assistant to do something, not about what it said.
_REQUEST = re.compile(r"^\W*(?:please\s+)?(?:can|could|would|will)\s+you\b", re.IGNORECASE)
# Only the past: "did you recommend", "you gave me" ask what the assistant said, while
# "what would you suggest" asks for new advice, whose evidence is the user's own facts.
_YOU_SAID = re.compile(
    r"\bdid\s+you\s+(?:\w+\s+)?(?:recommend|suggest|advis|tell|say|give|mention|propos"
    r"|explain|show|shar|walk|help|provid|offer)"
    r"|\byou(?:'ve|\s+have|\s+had)?\s+(?:\w+\s+)?(?:recommended|suggested|advised|told|said"
    r"|gave|given|mentioned|proposed|explained|showed|shown|shared|walked|helped|provided"
    r"|offered)\b",
    re.IGNORECASE,
)
_FIRST = {"i", "my", "me", "mine", "i've", "i'm", "i'd", "myself"}

Matrix = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Candidates:
    """A turn's candidates (semantic list first, then the keyword list's others) and their
    feature rows, in that order."""

    episodes: list[Episode]
    semantic_ranks: list[int | None]
    keyword_ranks: list[int | None]
    matrix: Matrix


def candidates(query: str, semantic: Sequence[Episode], keyword: Sequence[Episode]) -> Candidates:
    """Every episode either leg found, each once, with its features: a column at a time,
    so a turn of a hundred candidates costs well under a millisecond."""
    sem_rank, kw_rank = _ranks(semantic), _ranks(keyword)
    pool = list({e.id: e for e in [*semantic, *keyword]}.values())
    if not pool:
        return Candidates([], [], [], _EMPTY)
    sem_ranks = [sem_rank.get(e.id) for e in pool]
    kw_ranks = [kw_rank.get(e.id) for e in pool]
    columns = {
        **_leg_columns(pool, semantic, keyword, sem_ranks, kw_ranks),
        **_speaker_columns(pool, query),
        **_text_columns(pool, query),
    }
    columns.update(_session_columns(pool, columns["rrf"]))
    matrix = np.column_stack([columns[name] for name in FEATURES])
    return Candidates(pool, sem_ranks, kw_ranks, matrix)


_EMPTY = np.zeros((0, len(FEATURES)))
Columns = dict[str, Matrix]


def _ranks(ranked: Sequence[Episode]) -> dict[int, int]:
    ranks: dict[int, int] = {}
    for rank, episode in enumerate(ranked, start=1):
        ranks.setdefault(episode.id, rank)
    return ranks


def _leg_columns(
    pool: list[Episode],
    semantic: Sequence[Episode],
    keyword: Sequence[Episode],
    sem_ranks: list[int | None],
    kw_ranks: list[int | None],
) -> Columns:
    depth = max(len(semantic), len(keyword))
    sem = np.array([rank or 0 for rank in sem_ranks], dtype=np.float64)
    kw = np.array([rank or 0 for rank in kw_ranks], dtype=np.float64)
    cosines = {e.id: e.score or 0.0 for e in semantic}
    lowest = min(cosines.values(), default=0.0)
    cosine = np.array([cosines.get(e.id, lowest) for e in pool], dtype=np.float64)
    scores = {e.id: e.score or 0.0 for e in keyword}
    bm25 = np.array([scores.get(e.id, 0.0) for e in pool], dtype=np.float64)
    top_bm25 = max(scores.values(), default=0.0)
    return {
        "semantic_rank": np.where(sem > 0, sem, depth + 1),
        "keyword_rank": np.where(kw > 0, kw, depth + 1),
        "in_both": ((sem > 0) & (kw > 0)).astype(np.float64),
        "cosine": cosine,
        "cosine_below_top": max(cosines.values(), default=0.0) - cosine,
        "bm25": bm25,
        "bm25_share_of_top": bm25 / top_bm25 if top_bm25 > 0 else np.zeros(len(pool)),
        "rrf": _reciprocal(sem) + _reciprocal(kw),
    }


def _reciprocal(ranks: Matrix) -> Matrix:
    """RRF's term at weight 1, 0 where the leg did not find it."""
    found: Matrix = np.where(ranks > 0, rrf_term(1.0, np.maximum(ranks, 1)), 0.0)
    return found


def rrf_term(weight: Any, rank: Any) -> Any:
    """What a list adds to an episode's RRF score at its 1-based `rank`: the one formula,
    for a number (`orchestration.fusion`) or an array of them (the `rrf` feature)."""
    return weight / (RRF_K + rank)


def named_speakers(query: str, speakers: Iterable[str]) -> set[str]:
    """The speakers (lower case; named people, not roles) whose first name the question
    says: "what did Caroline ..." names "caroline smith"."""
    words = set(_WORD.findall(query.lower()))
    lowered = {s.lower() for s in speakers}
    return {s for s in lowered if s not in ROLES and _first_name(s) in words}


def _speaker_columns(pool: list[Episode], query: str) -> Columns:
    speakers = [e.speaker.lower() for e in pool]
    named = named_speakers(query, speakers)
    is_named = np.array([s in named for s in speakers], dtype=np.float64)
    roles = np.array([s in ROLES for s in speakers], dtype=np.float64)
    return {
        "from_user": np.array([s == "user" for s in speakers], dtype=np.float64),
        "from_assistant": np.array([s == "assistant" for s in speakers], dtype=np.float64),
        "assistant_chat": np.full(len(pool), roles.mean() if len(pool) else 0.0),
        "speaker_named": is_named,
        "other_speaker_named": (1.0 - is_named) if named else np.zeros(len(pool)),
    }


def _text_columns(pool: list[Episode], query: str) -> Columns:
    unasked = _REQUEST.sub("", query)
    words = _WORD.findall(query.lower())
    times = sorted({e.occurred_at for e in pool}, reverse=True)
    age = {t: i / max(len(times) - 1, 1) for i, t in enumerate(times)}

    def each(value: float) -> Matrix:
        return np.full(len(pool), value)

    return {
        "asks_about_you": each(bool(set(_WORD.findall(unasked.lower())) & _SECOND)),
        "asks_what_you_said": each(bool(_YOU_SAID.search(unasked))),
        "asks_about_me": each(bool(set(words) & _FIRST)),
        "query_words": each(len(words)),
        "candidate_length": np.log1p(np.array([len(e.content) for e in pool], dtype=np.float64)),
        "candidate_asks": np.array([_asks(e.content) for e in pool], dtype=np.float64),
        "age_in_pool": np.array([age[e.occurred_at] for e in pool], dtype=np.float64),
    }


def _session_columns(pool: list[Episode], rrf: Matrix) -> Columns:
    """How much of the pool its session holds, and how strong the rest of its session and
    the messages stored beside it are: evidence spread over a stretch of a conversation
    (a question and its answer, an account told over several messages). Read from the pool
    alone, so a turn reads nothing more for them. Whole columns at once, from the pool
    sorted by session: a turn runs this on every candidate."""
    sessions = np.array([episode.session_id for episode in pool])
    ids = np.array([episode.id for episode in pool])
    _, group, sizes = np.unique(sessions, return_inverse=True, return_counts=True)
    return {
        "session_share": sizes[group] / len(pool),
        "session_best_rrf": _best_other(group, rrf),
        "adjacent_best_rrf": _beside(group, ids, rrf),
    }


def _best_other(group: Ints, rrf: Matrix) -> Matrix:
    """The best RRF score among the other candidates of each one's session (0 alone): the
    session's best, or for the best itself the runner-up (equal to it on a tie)."""
    order = np.lexsort((-rrf, group))  # by session, the best of each first
    ranked, scores = group[order], rrf[order]
    first = np.r_[True, ranked[1:] != ranked[:-1]]  # each session's best
    runner_up = np.where(np.r_[~first[1:], False], np.r_[scores[1:], 0.0], 0.0)
    best = scores[first][np.cumsum(first) - 1]  # its session's best, at every place
    out = np.empty(len(order))
    out[order] = np.where(first, runner_up, best)
    return out


_BESIDE = 2  # messages of a session stored up to this many ids before or after


def _beside(group: Ints, ids: Ints, rrf: Matrix) -> Matrix:
    """The best RRF score among the candidates of its session stored beside it (by id: no
    other session's message, however close its id). A session's candidates in id order:
    one within two ids of another is at most two places from it."""
    order = np.lexsort((ids, group))
    ranked, stored, scores = group[order], ids[order], rrf[order]
    best = np.zeros(len(order))
    for step in range(1, _BESIDE + 1):
        near = (ranked[step:] == ranked[:-step]) & (stored[step:] - stored[:-step] <= _BESIDE)
        before = np.flatnonzero(near)  # each place at most once a step
        after = before + step
        best[before] = np.maximum(best[before], scores[after])
        best[after] = np.maximum(best[after], scores[before])
    out = np.empty(len(order))
    out[order] = best
    return out


def _asks(content: str) -> bool:
    # Most texts end without trailing space: no copy of them to find out.
    return content.endswith("?") or content.rstrip().endswith("?")


def _first_name(speaker: str) -> str:
    parts = speaker.split()
    return parts[0] if parts else speaker
