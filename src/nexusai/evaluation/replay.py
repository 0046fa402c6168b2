"""The replay API: a labelled conversation imported into a store of its own, each
question as a turn of it, read once (`read`: the turn's `gather`, both legs) and
assembled as any weight pair, budget or fold's ranker would (`replayed`, `budgeted`), as a
live turn gives it (tests/test_congruence.py). `harness` drives it over a set; the
ranker's training and selection replay it too."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from nexusai.config import Config
from nexusai.embedders import Embedder, Vector
from nexusai.evaluation.answers import answer_words
from nexusai.evaluation.budgets import BUDGETS, depths
from nexusai.evaluation.datasets import EvalConversation
from nexusai.memory.importing import SourceConversation, SourceEpisode, SourceSession
from nexusai.memory.service import Memory
from nexusai.memory.texts import said
from nexusai.models import Episode, NewEpisode, Scope
from nexusai.orchestration.context import Context
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.modes import RRF, fusion_mode
from nexusai.orchestration.settings import RuntimeSettings
from nexusai.orchestration.turn import Gathered, TurnRequest, assemble, gather, plan, run_turn
from nexusai.orchestration.turn.sources import BY_NAME
from nexusai.ranking.features import named_speakers
from nexusai.ranking.model import Ranker
from nexusai.timewords import TimeWindow


@dataclass(frozen=True)
class EvalQuestion:
    """A question as asked: its evidence resolved to episode ids of the store."""

    text: str
    evidence: list[int]
    category: str
    slices: tuple[str, ...] = ()  # see `SLICES`
    # What a turn of this question carries under `standing` (`orchestration/standing.py`).
    standing: tuple[FusedEpisode, ...] = ()
    reference: str | None = None  # the reference answer, when the set gives one
    # Its words that the evidence states (`evaluation/answers.py`): what answer recall finds.
    answer: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Imported:
    """One labelled conversation in a store of its own, its questions resolved."""

    memory: Memory
    questions: list[EvalQuestion]
    dropped: int  # evidence refs that named no message
    scope: list[int]  # all its sessions
    now: datetime | None = None  # when its questions are asked: its last message's time
    vectors: dict[str, Vector] = field(default_factory=dict)

    def vector(self, embedder: Embedder, text: str) -> Vector:
        """The question's vector, embedded once however many runs ask it."""
        if text not in self.vectors:
            self.vectors[text] = embedder.embed_query(text)
        return self.vectors[text]


@contextmanager
def imported(
    item: EvalConversation, embedder: Embedder, turns_per_episode: int = 1
) -> Iterator[Imported]:
    """The conversation imported into a fresh store, removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory.open(Config.from_env({}, data_dir=Path(tmp), extractor="none"), embedder)
        try:
            conversation, keys = merge_turns(item.conversation, turns_per_episode)
            project = memory.store.projects.ensure(conversation.project or conversation.key)
            memory.import_conversation(conversation.sessions, project)
            ids = memory.store.imports.episode_ids(f"{conversation.key}:")
            found = {turn: ids[episode] for turn, episode in keys.items() if episode in ids}
            questions, dropped = resolve_questions(item, found)
            scope = [s.id for s in memory.store.sessions.page(project, limit=10_000)]
            speakers = {e.episode.speaker for s in conversation.sessions for e in s.episodes}
            sliced = [with_answer(memory, with_slices(memory, q, speakers)) for q in questions]
            said = [e.episode.occurred_at for s in conversation.sessions for e in s.episodes]
            now = max((t for t in said if t is not None), default=None)
            yield Imported(memory, sliced, dropped, scope, now)
        finally:
            memory.close()


# The minorities a ranker that learns the common case can fail: a question answered only by
# what the assistant said ("what was that recipe you gave me?"), and a question that names
# one speaker and is answered by another.
SLICES = {
    "assistant-evidence": "evidence only in assistant messages",
    "other-speaker": "names a speaker, answered by another",
}


# Settings every eval turn starts from: no turn is recent, and no entity is searched.
def _asked(settings: RuntimeSettings) -> RuntimeSettings:
    return replace(settings, recent_limit=0, entity_limit=0)


def request_of(chat: Imported, embedder: Embedder, text: str, legs: bool = False) -> TurnRequest:
    """The question as a turn of the conversation asks it, its vector made once: the whole
    conversation is the scope (`legs`: both legs in full)."""
    return TurnRequest(
        chat.scope[0],
        text,
        now=chat.now,
        legs=legs,
        scope=Scope(chat.scope),
        vector=chat.vector(embedder, text),
    )


def asked_as_a_turn(
    chat: Imported, embedder: Embedder, text: str, settings: RuntimeSettings, legs: bool = False
) -> Context:
    """The question as a live turn: gathered and assembled at once (what a replay of a
    `Read` must give, memory by memory)."""
    request = request_of(chat, embedder, text, legs)
    return run_turn(chat.memory, embedder, _asked(settings), request)


@dataclass(frozen=True)
class Read:
    """One question gathered once at one depth: both legs as deep as `settings` ask them,
    whatever their weights, so that every weight pair's (and ranker's) turn at that depth
    is assembled from it (`replayed`)."""

    request: TurnRequest
    gathered: Gathered
    ms: float  # what the gather took
    window: TimeWindow | None = None  # the time its question names, searched within

    def at(self, depth: int) -> Read:
        """As a read at a shallower `depth` gives it: each leg's first rows (a search asked
        for fewer rows gives the first of the same order, ties broken by id)."""
        found = {
            name: self.gathered.first_rows(name, BY_NAME[name].rows(depth, None))
            for name in self.gathered.found
        }
        return replace(self, gathered=replace(self.gathered, found=found))

    def bare(self) -> Read:
        """Without what only the indexes read of each episode (kept for training)."""
        found = {name: [_bare(e) for e in rows] for name, rows in self.gathered.found.items()}
        return replace(self, gathered=replace(self.gathered, found=found))


def read(chat: Imported, embedder: Embedder, text: str, settings: RuntimeSettings) -> Read:
    """The question gathered at the depth `settings` ask (`semanticLimit`, and deeper with
    a `contextBudget`), both legs in full."""
    request = request_of(chat, embedder, text, legs=True)
    turn = plan(_asked(settings), request, RRF())
    started = time.perf_counter()
    gathered = gather(turn, chat.memory, embedder)
    spent = (time.perf_counter() - started) * 1000
    return Read(replace(request, legs=False), gathered, spent, turn.window)


def replayed(asked: Read, settings: RuntimeSettings, ranker: Ranker | None = None) -> Context:
    """The turn `settings` give the question (`ranker` the learned mode's), assembled
    from what was read for it: as a live turn gives it, when `asked` was read at the depth
    these settings ask (tests/test_congruence.py)."""
    turn = plan(_asked(settings), asked.request, fusion_mode(settings.fusion, ranker))
    return assemble(turn, asked.gathered)


def budgeted(
    asked: Read, settings: RuntimeSettings, ranker: Ranker | None = None
) -> dict[int, list[FusedEpisode]]:
    """{depth: the fused list a turn of `settings` packs from at each depth a budget of
    `BUDGETS` ranks}, each from `asked` (read at the deepest) as a read at that depth
    gives it."""
    return {
        depth: replayed(asked.at(depth), replace(settings, context_budget=budget), ranker).fused
        for depth, budget in depths(BUDGETS, asked.request.message).items()
    }


def _bare(episode: Episode) -> Episode:
    return replace(episode, search_text="", context_text="", metadata={})


def with_slices(memory: Memory, question: EvalQuestion, speakers: set[str]) -> EvalQuestion:
    said_by = {e.speaker.lower() for e in memory.store.episodes.get_many(question.evidence)}
    named = named_speakers(question.text, speakers)
    slices = []
    if said_by == {"assistant"}:
        slices.append("assistant-evidence")
    if named and not said_by & named:
        slices.append("other-speaker")
    return replace(question, slices=tuple(slices))


def with_answer(memory: Memory, question: EvalQuestion) -> EvalQuestion:
    """The question with its answer words: its reference's words its evidence states."""
    texts = [e.content for e in memory.store.episodes.get_many(question.evidence)]
    return replace(question, answer=answer_words(question.reference, question.text, texts))


def merge_turns(
    conversation: SourceConversation, n: int
) -> tuple[SourceConversation, dict[str, str]]:
    """Every n consecutive turns of a session as one episode, a transcript of who said what
    (long episodes, as in user-assistant chats, from the same questions and evidence).
    Returns the conversation and, for each turn's key, the key of the episode holding it."""
    if n == 1:
        return conversation, {e.key: e.key for s in conversation.sessions for e in s.episodes}
    keys: dict[str, str] = {}
    sessions = []
    for session in conversation.sessions:
        merged = SourceSession(session.key, session.title)
        for start in range(0, len(session.episodes), n):
            block = session.episodes[start : start + n]
            first = block[0].episode
            lines = [_line(s.episode, with_speaker=i > 0) for i, s in enumerate(block)]
            episode = NewEpisode(first.speaker, "\n".join(lines), first.occurred_at)
            merged.episodes.append(SourceEpisode(block[0].key, episode))
            keys.update((s.key, block[0].key) for s in block)
        sessions.append(merged)
    return replace(conversation, sessions=sessions), keys


def _line(episode: NewEpisode, with_speaker: bool) -> str:
    caption = episode.image_caption
    text = episode.content + (f" [image: {caption}]" if caption else "")
    return said(episode.speaker, text) if with_speaker else text


def resolve_questions(
    item: EvalConversation, ids: dict[str, int]
) -> tuple[list[EvalQuestion], int]:
    """Questions with at least one resolvable evidence message; refs that resolve to none
    (typos in the data) are dropped and counted. Messages merged into one episode count
    once."""
    questions, dropped = [], 0
    for question in item.questions:
        found: list[int] = []
        for key in question.evidence:
            if key not in ids:
                dropped += 1
            elif ids[key] not in found:
                found.append(ids[key])
        if found:
            questions.append(
                EvalQuestion(question.text, found, question.category, reference=question.answer)
            )
    return questions, dropped
