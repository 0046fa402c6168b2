"""Bring existing conversations in: LoCoMo, ChatGPT exports, and JSONL for everything else.

Readers stream their file (ijson for JSON arrays, line by line for JSONL) and yield one
conversation at a time; each conversation is written in one transaction, so a malformed
record stops the import with nothing half-written for that conversation. Every session and
episode carries a key derived from the source, recorded in the store: importing the same
file again skips what is already there.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import IO, Any

import ijson

from nexusai.errors import InvalidInput
from nexusai.memory.service import Memory
from nexusai.models import NewEpisode


class ImportFormatError(InvalidInput):
    """The file is not in the format named; says which line or record is wrong."""


@dataclass(frozen=True)
class SourceEpisode:
    key: str
    episode: NewEpisode


@dataclass
class SourceSession:
    key: str
    title: str | None
    episodes: list[SourceEpisode] = field(default_factory=list)


@dataclass
class SourceConversation:
    key: str
    project: str | None
    sessions: list[SourceSession]
    skipped: int = 0


@dataclass
class ImportSummary:
    conversations: int = 0
    sessions: int = 0
    episodes: int = 0
    skipped: int = 0
    seconds: float = 0.0


Reader = Callable[[IO[bytes]], Iterator[SourceConversation]]


# -- LoCoMo ------------------------------------------------------------------------------

_SESSION = re.compile(r"^session_(\d+)$")


def read_locomo(stream: IO[bytes]) -> Iterator[SourceConversation]:
    """One project per conversation, one session per LoCoMo session."""
    for index, sample in enumerate(_json_items(stream), start=1):
        try:
            yield locomo_conversation(sample)
        except (KeyError, TypeError, ValueError) as exc:
            raise ImportFormatError(f"record {index}: not a LoCoMo sample ({exc!r})") from None


def locomo_conversation(sample: dict[str, Any]) -> SourceConversation:
    sample_id = str(sample["sample_id"])
    turns = sample["conversation"]
    numbers = sorted(int(m.group(1)) for k in turns if (m := _SESSION.match(k)))
    conversation = SourceConversation(f"locomo:{sample_id}", f"locomo {sample_id}", [])
    for number in numbers:
        started = datetime.strptime(turns[f"session_{number}_date_time"], "%I:%M %p on %d %B, %Y")
        session = SourceSession(
            f"locomo:{sample_id}:session_{number}", f"{sample_id} session {number}"
        )
        for offset, turn in enumerate(turns[f"session_{number}"]):
            caption = str(turn.get("blip_caption") or "")
            text = str(turn.get("text") or "").strip() or (f"[image: {caption}]" if caption else "")
            if not text:
                conversation.skipped += 1
                continue
            metadata = {"diaId": turn["dia_id"]}
            # Turns have no times of their own: a second apart keeps their order.
            when = started.replace(tzinfo=UTC) + timedelta(seconds=offset)
            episode = NewEpisode(str(turn["speaker"]), text, when, metadata, caption or None)
            session.episodes.append(SourceEpisode(f"locomo:{sample_id}:{turn['dia_id']}", episode))
        conversation.sessions.append(session)
    return conversation


# -- ChatGPT export ------------------------------------------------------------------------


def read_chatgpt(stream: IO[bytes]) -> Iterator[SourceConversation]:
    """conversations.json: one session per conversation, along its current branch."""
    for index, item in enumerate(_json_items(stream), start=1):
        try:
            yield _chatgpt_conversation(item, index)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ImportFormatError(
                f"record {index}: not a ChatGPT conversation ({exc!r})"
            ) from None


def _chatgpt_conversation(item: dict[str, Any], index: int) -> SourceConversation:
    conversation_id = str(item.get("conversation_id") or item.get("id") or index)
    mapping: dict[str, Any] = item["mapping"]
    node_id = item.get("current_node") or _last_leaf(mapping)
    branch = []
    while node_id is not None:
        node = mapping[node_id]
        branch.append(node)
        node_id = node.get("parent")
    session = SourceSession(f"chatgpt:{conversation_id}", item.get("title"))
    conversation = SourceConversation(session.key, None, [session])
    for node in reversed(branch):
        message = node.get("message")
        if not message:
            continue
        role = message["author"]["role"]
        parts = (message.get("content") or {}).get("parts") or []
        text = "\n".join(p for p in parts if isinstance(p, str)).strip()
        if role not in ("user", "assistant") or not text:
            conversation.skipped += 1  # system, tool and empty messages
            continue
        stamp = message.get("create_time")
        when = datetime.fromtimestamp(float(stamp), UTC) if stamp else None
        session.episodes.append(
            SourceEpisode(
                f"chatgpt:{conversation_id}:{message['id']}", NewEpisode(role, text, when)
            )
        )
    return conversation


def _last_leaf(mapping: dict[str, Any]) -> str | None:
    leaves = [k for k, v in mapping.items() if not v.get("children")]
    return leaves[-1] if leaves else None


# -- JSONL -------------------------------------------------------------------------------


def read_jsonl(stream: IO[bytes]) -> Iterator[SourceConversation]:
    """One episode per line: {session, speaker, content, occurredAt?, metadata?}. A run of
    lines of one session is written together."""
    current: SourceConversation | None = None
    seen: Counter[str] = Counter()
    for number, raw in enumerate(stream, start=1):
        if not raw.strip():
            continue
        name, source = _jsonl_episode(raw, number, seen)
        if current is not None and current.sessions[0].title != name:
            yield current
            current = None
        if current is None:
            session = SourceSession(f"jsonl:{name}", name)
            current = SourceConversation(session.key, None, [session])
        current.sessions[0].episodes.append(source)
    if current is not None:
        yield current


def _jsonl_episode(raw: bytes, number: int, seen: Counter[str]) -> tuple[str, SourceEpisode]:
    try:
        line = json.loads(raw)
        name = str(line["session"])
        when = line.get("occurredAt")
        episode = NewEpisode(
            str(line["speaker"]),
            str(line["content"]),
            datetime.fromisoformat(when.replace("Z", "+00:00")) if when else None,
            dict(line.get("metadata") or {}),
            line.get("imageCaption"),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ImportFormatError(f"line {number}: not a JSONL episode ({exc!r})") from None
    # Same session, speaker, text and time: the same episode, however often it is imported
    # (the count keeps a message that really was said twice).
    digest = hashlib.sha256(
        json.dumps([name, episode.speaker, episode.content, when]).encode()
    ).hexdigest()[:24]
    seen[digest] += 1
    return name, SourceEpisode(f"jsonl:{digest}:{seen[digest]}", episode)


def _json_items(stream: IO[bytes]) -> Iterator[Any]:
    try:
        yield from ijson.items(stream, "item", use_float=True)
    except ijson.JSONError as exc:
        raise ImportFormatError(f"not valid JSON: {exc}") from None


FORMATS: dict[str, Reader] = {"locomo": read_locomo, "chatgpt": read_chatgpt, "jsonl": read_jsonl}
_MARKS = {"sample_id": "locomo", "mapping": "chatgpt"}  # a key only that format's records have


def detect_format(name: str, stream: IO[bytes]) -> str:
    """The format of a file by its name (.jsonl) or, for JSON, by the keys of its first
    record; the stream is left where it was."""
    if name.lower().endswith((".jsonl", ".ndjson")):
        return "jsonl"
    start = stream.tell()
    try:
        for prefix, event, value in ijson.parse(stream):
            if prefix == "item" and event == "map_key" and value in _MARKS:
                return _MARKS[value]
            if prefix == "" and event == "end_array":
                break
    except ijson.JSONError:
        pass
    finally:
        stream.seek(start)
    raise ImportFormatError(
        f"cannot tell the format of {name}: give --format locomo, chatgpt or jsonl"
    )


def import_stream(
    memory: Memory,
    stream: IO[bytes],
    fmt: str,
    project: str | None = None,
    progress: Callable[[ImportSummary], None] | None = None,
) -> ImportSummary:
    """Imports every conversation in the stream; `project` puts them all in that project
    (created when missing) unless the format has projects of its own."""
    if fmt not in FORMATS:
        raise InvalidInput(f"format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    summary = ImportSummary()
    started = time.perf_counter()
    for conversation in FORMATS[fmt](stream):
        name = conversation.project or project
        project_id = memory.store.ensure_project(name) if name else None
        sessions, episodes, skipped = memory.import_conversation(conversation.sessions, project_id)
        summary.conversations += 1
        summary.sessions += sessions
        summary.episodes += episodes
        summary.skipped += skipped + conversation.skipped
        summary.seconds = time.perf_counter() - started
        if progress:
            progress(summary)
    summary.seconds = time.perf_counter() - started
    return summary
