"""What the learned ranker sees of a turn's candidates: only what the turn already has (both
legs' lists with their scores, the query, who said each candidate). No LLM, no network.

The names and their order are part of a model file: a model lists the features it was
trained on, and a model whose list differs from `FEATURES` is refused at load.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from nexusai.models import Episode

FEATURES: tuple[str, ...] = (
    "semantic_rank",  # 1-based; depth + 1 when the leg did not find it
    "keyword_rank",
    "in_both",
    "cosine",  # absent from the semantic list: the list's lowest (its true cosine is below)
    "cosine_below_top",
    "bm25",  # 0 when the keyword leg did not find it
    "bm25_share_of_top",
    "rrf",  # RRF at weights (1, 1), k = 60
    "from_user",
    "from_assistant",
    "assistant_chat",  # share of the candidates said by "user" or "assistant"
    "speaker_named",  # the question names the candidate's speaker
    "other_speaker_named",  # the question names a speaker of the pool, not this one
    "asks_about_you",  # second person beyond a request's "can you": "your advice"
    "asks_what_you_said",  # "did you recommend", "you gave me": the assistant's own words
    "asks_about_me",  # first person: "my", "I"
    "query_words",
    "candidate_words",
    "candidate_asks",  # the candidate is a question
    "age_in_pool",  # 0 for the newest candidate, 1 for the oldest
)
RRF_K = 60
_ROLES = {"user", "assistant"}
_WORD = re.compile(r"[\w']+")
_SECOND = {"you", "your", "yours", "you've", "you'd", "you're", "you'll", "yourself"}
# "Can you summarize ..." asks the assistant to do something, not about what it said.
_REQUEST = re.compile(r"^\W*(?:please\s+)?(?:can|could|would|will)\s+you\b", re.IGNORECASE)
_YOU_SAID = re.compile(
    r"\byou\s+(?:\w+\s+)?(?:recommend|suggest|advis|told|tell|said|say|gave|give|mention"
    r"|propos|explain|show|shar|walk|help|provid|offer)",
    re.IGNORECASE,
)
_FIRST = {"i", "my", "me", "mine", "i've", "i'm", "i'd", "myself"}

Matrix = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Candidates:
    """A turn's candidates (semantic list first, then the keyword list's others) and their
    feature rows, in that order."""

    episodes: list[Episode]
    semantic_ranks: list[int | None]
    keyword_ranks: list[int | None]
    matrix: Matrix


def candidates(query: str, semantic: Sequence[Episode], keyword: Sequence[Episode]) -> Candidates:
    """Every episode either leg found, each once, with its features."""
    sem_rank = _ranks(semantic)
    kw_rank = _ranks(keyword)
    pool = list({e.id: e for e in [*semantic, *keyword]}.values())
    rows = _Pool(pool, semantic, keyword, query)
    matrix = np.array([rows.row(e, sem_rank.get(e.id), kw_rank.get(e.id)) for e in pool])
    return Candidates(
        pool,
        [sem_rank.get(e.id) for e in pool],
        [kw_rank.get(e.id) for e in pool],
        matrix.reshape(len(pool), len(FEATURES)),
    )


def _ranks(ranked: Sequence[Episode]) -> dict[int, int]:
    ranks: dict[int, int] = {}
    for rank, episode in enumerate(ranked, start=1):
        ranks.setdefault(episode.id, rank)
    return ranks


class _Pool:
    """What every row of one turn shares: the lists' extremes, the question's words, the
    pool's speakers and times."""

    def __init__(
        self,
        pool: list[Episode],
        semantic: Sequence[Episode],
        keyword: Sequence[Episode],
        query: str,
    ) -> None:
        words = _WORD.findall(query.lower())
        cosines = [e.score or 0.0 for e in semantic]
        self.top_cosine = max(cosines, default=0.0)
        self.low_cosine = min(cosines, default=0.0)
        self.top_bm25 = max((e.score or 0.0 for e in keyword), default=0.0)
        self.cosine = {e.id: e.score or 0.0 for e in semantic}
        self.bm25 = {e.id: e.score or 0.0 for e in keyword}
        self.depth = max(len(semantic), len(keyword))
        self.words = set(words)
        self.query_words = len(words)
        unasked = _REQUEST.sub("", query)
        self.about_you = bool(set(_WORD.findall(unasked.lower())) & _SECOND)
        self.you_said = bool(_YOU_SAID.search(unasked))
        speakers = [e.speaker.lower() for e in pool]
        self.assistant_chat = sum(s in _ROLES for s in speakers) / max(len(speakers), 1)
        self.named = {s for s in speakers if s not in _ROLES and _first_name(s) in self.words}
        times = sorted({e.occurred_at for e in pool}, reverse=True)
        self.age = {t: i / max(len(times) - 1, 1) for i, t in enumerate(times)}

    def row(self, episode: Episode, sem: int | None, kw: int | None) -> list[float]:
        speaker = episode.speaker.lower()
        cosine = self.cosine.get(episode.id, self.low_cosine)
        bm25 = self.bm25.get(episode.id, 0.0)
        named = speaker in self.named
        return [
            float(sem or self.depth + 1),
            float(kw or self.depth + 1),
            float(sem is not None and kw is not None),
            cosine,
            self.top_cosine - cosine,
            bm25,
            bm25 / self.top_bm25 if self.top_bm25 > 0 else 0.0,
            (1 / (RRF_K + sem) if sem else 0.0) + (1 / (RRF_K + kw) if kw else 0.0),
            float(speaker == "user"),
            float(speaker == "assistant"),
            self.assistant_chat,
            float(named),
            float(bool(self.named) and not named),
            float(self.about_you),
            float(self.you_said),
            float(bool(self.words & _FIRST)),
            float(self.query_words),
            math.log1p(len(_WORD.findall(episode.content))),
            float(episode.content.rstrip().endswith("?")),
            self.age[episode.occurred_at],
        ]


def _first_name(speaker: str) -> str:
    parts = speaker.split()
    return parts[0] if parts else speaker
