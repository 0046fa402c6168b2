"""Retrieval quality on labelled conversations, through the real retrieval path.

Each conversation is imported into a fresh store; every question with evidence is asked
as a turn of it, scoped to the conversation's sessions, with no recent turns. A turn is
the one every face runs, in its two halves: the question is read (`turn.gather`, both
legs) once per depth, and each weight pair's turn, and each fold's ranker's, is assembled
from that read (`turn.assemble`), as a live turn would give it (tests/test_congruence.py).
The question is embedded once, as a real turn's one vector serves every source.

recall@k is what a turn that gets k memories finds: the question is asked at
`semanticLimit` k (the semantic leg asks for k, the keyword leg for 2k, k are kept), as a
user who gives the LLM k memories has it. With `depth`, it is instead the top k of a single
turn at `semanticLimit` depth: how well that one list is ordered. MRR and latency are
always of the deepest turn asked.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from nexusai.config import Config
from nexusai.embedders import Embedder, Vector
from nexusai.errors import InvalidInput
from nexusai.evaluation.answers import answer_words
from nexusai.evaluation.budgets import BUDGETS, Fold, Packed, depths, within_budget
from nexusai.evaluation.calibration import cross_validated, fit
from nexusai.evaluation.datasets import EvalConversation, EvalSet
from nexusai.evaluation.metrics import hit_at, percentile, recall_at, reciprocal_rank
from nexusai.evaluation.standing import standing_figures
from nexusai.memory.importing import SourceConversation, SourceEpisode, SourceSession
from nexusai.memory.service import Memory
from nexusai.memory.texts import said
from nexusai.models import Episode, NewEpisode, Scope
from nexusai.orchestration.context import Context
from nexusai.orchestration.fusion import FusedEpisode
from nexusai.orchestration.modes import RRF, Learned, fusion_mode
from nexusai.orchestration.packing import Packer, PlacedWorth
from nexusai.orchestration.settings import DEFAULTS, RuntimeSettings
from nexusai.orchestration.turn import Gathered, TurnRequest, assemble, gather, plan, run_turn
from nexusai.orchestration.turn.sources import BY_NAME
from nexusai.ranking.features import named_speakers
from nexusai.ranking.model import Ranker
from nexusai.timewords import TimeWindow

SWEEP = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0]  # keywordWeight at semanticWeight 1

Weights = tuple[float, float]
# Called with each conversation while it is imported, and each question's deepest read.
Also = Callable[["Imported", str, str, "Sequence[Read]"], None]


@dataclass(frozen=True)
class Asked:
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


@dataclass
class Run:
    """What one weight pair (or the learned ranker) retrieved for every question, per
    `semanticLimit` asked."""

    weights: Weights | None  # None: fusion "learned"
    ranked: dict[int, list[list[int]]]
    latency_ms: list[float]  # at the deepest limit
    packed: Packed | None = None  # what budgeted turns gave (`BUDGET_PAIRS` and learned)


# The pairs whose turns are also packed into token budgets: each leg alone and both.
BUDGET_PAIRS = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0))


def weight_pairs(extra: Sequence[Weights]) -> list[Weights]:
    """Semantic only and keyword only first, then `extra`, then the sweep; each once."""
    pairs = [(1.0, 0.0), (0.0, 1.0), *extra, *((1.0, w) for w in SWEEP)]
    return list(dict.fromkeys(pairs))


def evaluate(
    evalset: EvalSet,
    embedder: Embedder,
    ks: Sequence[int] = (5, 10, 20),
    extra: Sequence[Weights] = (),
    progress: Callable[[str], None] | None = None,
    depth: int | None = None,
    turns_per_episode: int = 1,
    also: Also | None = None,
    base: RuntimeSettings = DEFAULTS,
) -> dict[str, Any]:
    """Every weight pair's scores on one labelled set; `also` is called with each
    conversation while it is imported (the learned ranker's pools are collected there).
    `base`: the settings every turn starts from (its keywordBudget and timeAware; each
    run sets its weights and limit). The JSON's `questions` are kept under `asked` for
    rows scored later."""
    if depth is not None and depth < max(ks):
        raise InvalidInput(f"--depth {depth} is less than the largest k ({max(ks)})")
    limits = [depth] if depth else sorted(set(ks))
    pairs = weight_pairs(extra)
    runs = {pair: Run(pair, {limit: [] for limit in limits}, []) for pair in pairs}
    for pair in BUDGET_PAIRS:
        runs[pair].packed = Packed(RRF.packer)  # scored later, by `budget_rows`
    questions: list[Asked] = []
    dropped = 0
    for item in evalset.conversations:
        asked, lost = _evaluate_conversation(
            evalset.name, item, embedder, runs, turns_per_episode, also, base
        )
        questions += asked
        dropped += lost
        if progress:
            progress(item.conversation.key)
    categories = list(dict.fromkeys(q.category for q in questions))
    return {
        "dataset": evalset.name,
        "conversations": [c.conversation.key for c in evalset.conversations],
        "questions": len(questions),
        "droppedEvidenceRefs": dropped,
        "semanticLimit": depth or "k",
        "turnsPerEpisode": turns_per_episode,
        "keywordBudget": base.keyword_budget,
        "timeAware": base.time_aware,
        "results": [
            {"dataset": evalset.name, **summary(runs[pair], questions, ks, categories)}
            for pair in pairs
        ],
        "legChoiceBound": leg_choice_bound(runs[(1.0, 0.0)], runs[(0.0, 1.0)], questions, ks),
        "standing": standing_figures(evalset),
        "asked": questions,
        "categories": categories,
        "packed": {pair: runs[pair].packed for pair in BUDGET_PAIRS},
    }


def leg_choice_bound(
    semantic: Run, keyword: Run, questions: list[Asked], ks: Sequence[int]
) -> dict[str, float]:
    """Recall@k if each question were answered by whichever single leg did better on it:
    what no per-question choice of leg (or weights leaning all one way) can pass. Fusion
    can, only by taking finds from both lists for one question."""

    def best(k: int, i: int) -> float:
        lists = (_ranked_at(semantic, k)[i], _ranked_at(keyword, k)[i])
        return max(recall_at(ranked, questions[i].evidence, k) for ranked in lists)

    n = max(len(questions), 1)
    return {str(k): sum(best(k, i) for i in range(len(questions))) / n for k in ks}


@dataclass(frozen=True)
class Imported:
    """One labelled conversation in a store of its own, its questions resolved."""

    memory: Memory
    questions: list[Asked]
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


def with_slices(memory: Memory, question: Asked, speakers: set[str]) -> Asked:
    said_by = {e.speaker.lower() for e in memory.store.episodes.get_many(question.evidence)}
    named = named_speakers(question.text, speakers)
    slices = []
    if said_by == {"assistant"}:
        slices.append("assistant-evidence")
    if named and not said_by & named:
        slices.append("other-speaker")
    return replace(question, slices=tuple(slices))


def with_answer(memory: Memory, question: Asked) -> Asked:
    """The question with its answer words: its reference's words its evidence states."""
    texts = [e.content for e in memory.store.episodes.get_many(question.evidence)]
    return replace(question, answer=answer_words(question.reference, question.text, texts))


def _evaluate_conversation(
    dataset: str,
    item: EvalConversation,
    embedder: Embedder,
    runs: dict[Weights, Run],
    turns_per_episode: int,
    also: Also | None,
    base: RuntimeSettings,
) -> tuple[list[Asked], int]:
    fold = (dataset, item.conversation.key)
    with imported(item, embedder, turns_per_episode) as chat:
        deep = []
        for i, question in enumerate(chat.questions):
            chat.questions[i], deepest = _ask(chat, embedder, fold, question, runs, base)
            deep.append(deepest)
        if also:
            also(chat, dataset, item.conversation.key, deep)
    return chat.questions, chat.dropped


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


def resolve_questions(item: EvalConversation, ids: dict[str, int]) -> tuple[list[Asked], int]:
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
                Asked(question.text, found, question.category, reference=question.answer)
            )
    return questions, dropped


def _ask(
    chat: Imported,
    embedder: Embedder,
    fold: Fold,
    question: Asked,
    runs: dict[Weights, Run],
    base: RuntimeSettings,
) -> tuple[Asked, Read]:
    """The question read once per depth, each weight pair's turns assembled from those
    reads. Returns it with the standing candidates its turn carries at any floor, and its
    deepest read (a budgeted turn's, which the learned mode ranks)."""
    limits = sorted(next(iter(runs.values())).ranked)
    reads = {limit: read(chat, embedder, question.text, _at(base, limit)) for limit in limits}
    deep = read(chat, embedder, question.text, replace(base, context_budget=BUDGETS[-1]))
    question = replace(question, standing=tuple(deep.gathered.standing))
    for (semantic, keyword), run in runs.items():  # every run here is a weight pair
        weighed = replace(base, semantic_weight=semantic, keyword_weight=keyword)
        for limit, ranked in run.ranked.items():
            started = time.perf_counter()
            turn = replayed(reads[limit], _at(weighed, limit))
            if limit == limits[-1]:
                spent = (time.perf_counter() - started) * 1000
                run.latency_ms.append(reads[limit].ms + spent)
            ranked.append([f.episode.id for f in turn.memories])
        if run.packed is not None:  # asked as budgeted turns ask (deeper), packed at each
            lists = budgeted(deep, weighed)
            run.packed.add(
                fold, question.text, lists, question.standing, question.evidence, question.answer
            )
    return question, deep


def _at(settings: RuntimeSettings, limit: int) -> RuntimeSettings:
    return replace(settings, semantic_limit=limit)


def _scores(
    run: Run, chosen: list[int], questions: list[Asked], ks: Sequence[int]
) -> dict[str, Any]:
    """Scores over the questions at the indexes `chosen`; recall@k and hit@k from the turn
    at `semanticLimit` k (or the one deep turn), MRR from the deepest."""

    def ranked(limit: int) -> list[tuple[list[int], list[int]]]:
        lists = _ranked_at(run, limit)
        return [(lists[i], questions[i].evidence) for i in chosen]

    n = max(len(chosen), 1)
    recall, hit = {}, {}
    for k in ks:
        pairs = ranked(k)
        recall[str(k)] = sum(recall_at(r, evidence, k) for r, evidence in pairs) / n
        hit[str(k)] = sum(hit_at(r, evidence, k) for r, evidence in pairs) / n
    deepest = ranked(max(run.ranked))
    mrr = sum(reciprocal_rank(r, evidence) for r, evidence in deepest) / n
    return {"recall": recall, "hit": hit, "mrr": mrr, "questions": len(chosen)}


def _ranked_at(run: Run, k: int) -> list[list[int]]:
    """Every question's ranking from the turn asked at semanticLimit k (or the one deep
    turn, with --depth)."""
    return run.ranked[k if k in run.ranked else max(run.ranked)]


def summary(
    run: Run, questions: list[Asked], ks: Sequence[int], categories: Sequence[str]
) -> dict[str, Any]:
    """A row of the results: recall, hit and MRR overall, per category and per slice."""
    by_category = {
        name: _scores(
            run, [i for i, q in enumerate(questions) if q.category == name], questions, ks
        )
        for name in categories
    }
    by_slice = {
        name: _scores(run, [i for i, q in enumerate(questions) if name in q.slices], questions, ks)
        for name in SLICES
    }
    overall = _scores(run, list(range(len(questions))), questions, ks)
    return {
        "fusion": RRF.name if run.weights else Learned.name,
        "semanticWeight": run.weights[0] if run.weights else None,
        "keywordWeight": run.weights[1] if run.weights else None,
        "recall": overall["recall"],
        "hit": overall["hit"],
        "mrr": overall["mrr"],
        "latencyMs": {"p50": percentile(run.latency_ms, 50), "p95": percentile(run.latency_ms, 95)},
        "byCategory": by_category,
        "bySlice": by_slice,
        **(
            {"withinBudget": scored_budgets(run.packed, questions)}
            if run.packed is not None and run.packed.packer == Learned.packer
            else {}
        ),
    }


def scored_budgets(
    packed: Packed, questions: Sequence[Asked], packer_for: Callable[[Fold], Packer] | None = None
) -> dict[str, Any]:
    """Recall within each budget of what `packed`'s turns gave (`evaluation.budgets`)."""
    evidence = [q.evidence for q in questions]
    categories = [q.category for q in questions]
    return within_budget(packed.packer, packed.given(packer_for), evidence, categories)


def budget_rows(results: Sequence[dict[str, Any]]) -> PlacedWorth | None:
    """The budget rows of the RRF pairs of every set's results, each conversation packed
    by RRF's worth fitted to every other conversation of every set (with one conversation
    in all, the shipped fit). Returns the fit on all (1, 1)'s lists, or None with one."""
    shipped: PlacedWorth | None = None
    for pair in BUDGET_PAIRS:
        entries = [e for r in results for e in r["packed"][pair].entries]
        many = len({e.fold for e in entries}) > 1
        fitted = cross_validated(entries) if many else {}
        for result in results:
            row = next(r for r in result["results"] if _pair(r) == pair)
            packed = result["packed"][pair]
            packer_for = fitted.__getitem__ if many else None
            row["withinBudget"] = scored_budgets(packed, result["asked"], packer_for)
        if pair == (1.0, 1.0) and many:
            shipped = fit(entries)
    return shipped


def _pair(row: dict[str, Any]) -> Weights | None:
    if row.get("fusion") != RRF.name:
        return None
    return (row["semanticWeight"], row["keywordWeight"])


def plot(result: dict[str, Any], path: Path, k: int | None = None) -> None:
    """recall@k against keywordWeight at semanticWeight 1, with keyword-only for scale; k is
    10 when the run measured it, else the largest cut-off it did."""
    try:
        import matplotlib
    except ImportError:
        raise InvalidInput("--plot needs matplotlib: pip install 'nexusai[plot]'") from None
    measured = sorted(int(cut) for cut in result["results"][0]["recall"])
    k = k if k is not None else (10 if 10 in measured else measured[-1])
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(
        (r["keywordWeight"], r["recall"][str(k)])
        for r in result["results"]
        if r["semanticWeight"] == 1.0
    )
    keyword_only = next(
        r["recall"][str(k)] for r in result["results"] if r["semanticWeight"] == 0.0
    )
    figure, axes = plt.subplots(figsize=(7, 4.2))
    axes.plot([w for w, _ in rows], [v for _, v in rows], marker="o", label="semanticWeight 1")
    axes.axhline(keyword_only, linestyle="--", color="gray", label="keyword only (0, 1)")
    axes.set_xlabel("keywordWeight")
    axes.set_ylabel(f"evidence recall@{k}")
    axes.set_title(f"{result['dataset']} ({result['questions']} questions): recall@{k}")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
