"""Labelled conversations to measure retrieval on: LoCoMo, BEAM, and a documented JSONL
format for a user's own chats. Each becomes conversations in the importer's shape plus
questions whose evidence names messages by their import keys.

The JSONL format (`nexus eval jsonl FILE`), one object a line, in any order:

    {"conversation": "c1", "session": "s1", "id": "m1", "speaker": "user",
     "content": "I adopted a puppy called Biscuit", "occurredAt": "2024-03-01T10:00:00Z"}
    {"conversation": "c1", "question": "What is my dog called?", "evidence": ["m1"],
     "category": "single-hop"}

A message needs `conversation`, `session`, `id`, `speaker` and `content` (`occurredAt`
optional: then messages are a second apart in file order). A question needs
`conversation`, `question` and `evidence` (message ids of that conversation); `category`
is optional. Each conversation is evaluated in a store of its own, scoped to all its
sessions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from nexusai.errors import InvalidInput
from nexusai.memory.importing import (
    SourceConversation,
    SourceEpisode,
    SourceSession,
    describe,
    locomo_conversation,
)
from nexusai.models import NewEpisode


@dataclass(frozen=True)
class Question:
    text: str
    evidence: list[str]  # import keys of the messages that hold the answer
    category: str
    answer: str | None = None  # the reference answer, when the set gives one


@dataclass
class EvalConversation:
    conversation: SourceConversation
    questions: list[Question]


@dataclass
class EvalSet:
    name: str
    conversations: list[EvalConversation] = field(default_factory=list)


# -- LoCoMo --------------------------------------------------------------------------------

LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
_REF = re.compile(r"[;,\s]+")


def load_locomo(path: Path, chosen: Sequence[str] | None = None) -> EvalSet:
    samples = json.loads(path.read_text(encoding="utf-8"))
    picked = [s for s in samples if not chosen or s["sample_id"] in chosen]
    _check_chosen(chosen, [s["sample_id"] for s in picked], path)
    result = EvalSet("locomo")
    for sample in picked:
        prefix = f"locomo:{sample['sample_id']}:"
        questions = [
            Question(
                str(qa["question"]),
                [prefix + p for ref in qa.get("evidence") or [] for p in _REF.split(str(ref)) if p],
                LOCOMO_CATEGORIES.get(int(qa["category"]), str(qa["category"])),
                _reference(qa, "answer"),
            )
            for qa in sample["qa"]
        ]
        result.conversations.append(EvalConversation(locomo_conversation(sample), questions))
    return result


# -- BEAM ----------------------------------------------------------------------------------

# Generated user messages end in a position marker (" ->-> 1,1") that no user writes.
_BEAM_MARKER = re.compile(r"\s*->->\s*[\d,\s]+$")


def load_beam(folder: Path, chosen: Sequence[str] | None = None) -> EvalSet:
    """Chats are the numbered folders (chat.json, probing_questions.json); sessions are its
    batches, dated by the first user message's time anchor; every message an episode. The
    set is named by its folder ("beam", "beam500k"), so that tiers are reported apart."""
    chats = sorted((p.name for p in folder.iterdir() if p.is_dir()), key=_number_first)
    picked = [c for c in chats if not chosen or c in chosen]
    _check_chosen(chosen, picked, folder)
    result = EvalSet(folder.resolve().name or "beam")
    for chat in picked:
        batches = json.loads((folder / chat / "chat.json").read_text(encoding="utf-8"))
        probes = json.loads((folder / chat / "probing_questions.json").read_text(encoding="utf-8"))
        conversation = _beam_conversation(chat, batches)
        result.conversations.append(EvalConversation(conversation, _beam_questions(chat, probes)))
    return result


def _beam_conversation(chat: str, batches: list[dict[str, Any]]) -> SourceConversation:
    conversation = SourceConversation(f"beam:{chat}", f"beam {chat}", [])
    day = datetime(2024, 1, 1, tzinfo=UTC)
    for batch in batches:
        messages = [m for turn in batch["turns"] for m in turn]
        day = _beam_day(messages) or day + timedelta(days=1)
        session = SourceSession(
            f"beam:{chat}:b{batch['batch_number']}", f"batch {batch['batch_number']}"
        )
        for offset, message in enumerate(messages):
            text = _BEAM_MARKER.sub("", str(message["content"])).strip()
            when = day + timedelta(minutes=offset)
            episode = NewEpisode(str(message["role"]), text or "(empty)", when)
            session.episodes.append(SourceEpisode(f"beam:{chat}:{message['id']}", episode))
        conversation.sessions.append(session)
    return conversation


def _beam_day(messages: Iterable[dict[str, Any]]) -> datetime | None:
    for message in messages:
        anchor = message.get("time_anchor")
        if anchor:
            return datetime.strptime(str(anchor), "%B-%d-%Y").replace(tzinfo=UTC)
    return None


def _beam_questions(chat: str, probes: dict[str, list[dict[str, Any]]]) -> list[Question]:
    questions = []
    for kind, items in probes.items():
        for item in items:
            ids = _beam_ids(item.get("source_chat_ids"))
            evidence = [f"beam:{chat}:{i}" for i in ids]
            reference = _reference(item, "answer", "ideal_answer", "ideal_summary")
            questions.append(Question(str(item["question"]), evidence, kind, reference))
    return questions


def _reference(item: dict[str, Any], *keys: str) -> str | None:
    """The first of `keys` the item gives as an answer (LoCoMo's adversarial questions and
    BEAM's instruction and preference probes give none)."""
    for key in keys:
        value = item.get(key)
        if value is not None and str(value).strip():
            return str(value)
    return None


def _beam_ids(source: Any) -> list[int]:
    """Evidence ids, however nested (a list, a dict of lists, a list within a list), each
    once (some repeat an id)."""
    if isinstance(source, dict):
        return _beam_ids(list(source.values()))
    if isinstance(source, list):
        return list(dict.fromkeys(i for part in source for i in _beam_ids(part)))
    return [] if source is None else [int(source)]


def _number_first(name: str) -> tuple[int, str]:
    return (int(name), name) if name.isdigit() else (1 << 30, name)


# -- JSONL ---------------------------------------------------------------------------------


def load_jsonl(path: Path) -> EvalSet:
    conversations: dict[str, EvalConversation] = {}
    started = datetime(2024, 1, 1, tzinfo=UTC)
    with path.open(encoding="utf-8") as lines:
        for number, raw in enumerate(lines, start=1):
            if raw.strip():
                _jsonl_line(raw, number, conversations, started + timedelta(seconds=number))
    return EvalSet(path.stem, list(conversations.values()))


def _jsonl_line(
    raw: str, number: int, into: dict[str, EvalConversation], default_time: datetime
) -> None:
    try:
        line = json.loads(raw)
        name = str(line["conversation"])
        target = into.setdefault(
            name, EvalConversation(SourceConversation(f"eval:{name}", f"eval {name}", []), [])
        )
        if "question" in line:
            evidence = [f"eval:{name}:{i}" for i in line["evidence"]]
            category = str(line.get("category") or "all")
            answer = line.get("answer")
            reference = None if answer is None else str(answer)
            target.questions.append(Question(str(line["question"]), evidence, category, reference))
            return
        when = line.get("occurredAt")
        moment = datetime.fromisoformat(when.replace("Z", "+00:00")) if when else default_time
        episode = NewEpisode(str(line["speaker"]), str(line["content"]), moment)
        _session(target.conversation, name, str(line["session"])).episodes.append(
            SourceEpisode(f"eval:{name}:{line['id']}", episode)
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidInput(f"line {number}: not a message or a question: {describe(exc)}") from None


def _session(conversation: SourceConversation, name: str, session: str) -> SourceSession:
    key = f"eval:{name}:session:{session}"
    for existing in conversation.sessions:
        if existing.key == key:
            return existing
    conversation.sessions.append(SourceSession(key, session))
    return conversation.sessions[-1]


def _check_chosen(chosen: Sequence[str] | None, found: Sequence[str], where: Path) -> None:
    missing = set(chosen or []) - set(found)
    if missing:
        raise InvalidInput(f"no such conversations in {where}: {', '.join(sorted(missing))}")
