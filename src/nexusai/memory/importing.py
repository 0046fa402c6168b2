"""Bring existing conversations in: LoCoMo, ChatGPT exports, and JSONL for everything else.

Readers stream their file (ijson for JSON arrays, line by line for JSONL) and yield one
conversation at a time. An import reads the whole file once before it writes anything, so a
malformed record anywhere stops it with nothing stored; then each conversation is written in
one transaction. Every session and episode carries a key derived from the source (and the
project it goes into), recorded in the store: importing the same file into the same place
again skips what is already there.
"""

from __future__ import annotations

import codecs
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

from nexusai.errors import InvalidInput, NexusError, first_line
from nexusai.memory.export import JSONL_KEYS
from nexusai.memory.repositories.validation import MAX_RETENTION_DAYS
from nexusai.memory.service import Memory
from nexusai.models import NewEpisode, parse_time


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
    # How many conversations it stands for: a JSONL window holds several sessions, each a
    # conversation of its own.
    conversations: int = 1
    # An export's own project line: the project the import makes when none is named, and
    # the retention a project it makes is given.
    exported_from: ExportedProject | None = None


@dataclass(frozen=True)
class ExportedProject:
    name: str
    retention_days: int | None = None


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
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ImportFormatError(
                f"record {index}: not a LoCoMo sample: {describe(exc)}"
            ) from None


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
                f"record {index}: not a ChatGPT conversation: {describe(exc)}"
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
    key = f"chatgpt:{conversation_id}"
    session = SourceSession(key, item.get("title") or key)
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


def read_jsonl(stream: IO[bytes], window: int = 0) -> Iterator[SourceConversation]:
    """One episode per line: {session, sessionId?, speaker, content, occurredAt?,
    imageCaption?, metadata?, pinned?, expiresAt?, id?}, and no other key (`nexus export`
    writes this). `session` is the session's title; with `sessionId` (an export's own id)
    sessions of one title stay apart, and the title may be null. A line of only `session`
    and `sessionId` is a session with no episodes.

    Lines are written a window of sessions at a time, each session's in the order of the
    file: a window closes at the first new session once it holds `window` episodes
    (`JSONL_WINDOW` when 0), so a session whose lines are together is written whole, in one
    transaction. A log whose sessions run through the file (lines in time order) closes a
    window at `WINDOW_MOST` times that, a session then spanning windows; either way the
    lines are written and embedded in batches of many, not one at a time."""
    sessions: dict[str, SourceSession] = {}
    exported: ExportedProject | None = None
    held, window = 0, window or JSONL_WINDOW
    for exported, (key, title), source in _jsonl_records(stream):
        if held >= window and (key not in sessions or held >= window * WINDOW_MOST):
            yield _window(sessions, exported)
            sessions, held = {}, 0
        session = sessions.setdefault(key, SourceSession(key, title))
        if source is not None:
            session.episodes.append(source)
            held += 1
    if sessions:
        yield _window(sessions, exported)


# Episodes of a JSONL file written in one transaction and embedded in its batches: a few
# embedding batches' worth, so that the writes keep pace with the embedder.
JSONL_WINDOW = 1024
WINDOW_MOST = 8


def _window(
    sessions: dict[str, SourceSession], exported: ExportedProject | None
) -> SourceConversation:
    found = list(sessions.values())
    return SourceConversation(
        found[0].key, None, found, exported_from=exported, conversations=len(found)
    )


def _jsonl_records(
    stream: IO[bytes],
) -> Iterator[tuple[ExportedProject | None, tuple[str, str | None], SourceEpisode | None]]:
    """Each line's export project (from the first line), session and episode."""
    exported: ExportedProject | None = None
    seen: Counter[str] = Counter()
    for number, raw in enumerate(stream, start=1):
        if number == 1:
            raw = _without_utf8_bom(raw)
            if (exported := _project_line(raw)) is not None:
                continue
        if raw.strip():
            yield exported, *_jsonl_episode(raw, number, seen)


def _project_line(raw: bytes) -> ExportedProject | None:
    """The first line of an export: {"project": name, "retentionDays": days or null}; None
    when the line is an episode."""
    try:
        line = json.loads(raw)
    except ValueError:
        return None  # the episode reader says what is wrong with it
    if not isinstance(line, dict) or "project" not in line:
        return None
    days = line.get("retentionDays")
    unknown = sorted(set(line) - {"project", "retentionDays"})
    if unknown or not isinstance(line["project"], str) or not line["project"].strip():
        raise ImportFormatError(
            'line 1: a project line is {"project": "a name", "retentionDays": days or null}'
        )
    if days is not None and (
        isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_RETENTION_DAYS
    ):
        raise ImportFormatError(
            f"line 1: retentionDays must be a whole number from 1 to {MAX_RETENTION_DAYS},"
            f" or null; not {days!r}"
        )
    return ExportedProject(line["project"], days)


def _jsonl_session(line: dict[str, Any]) -> tuple[str, str | None]:
    """A line's session: its import key and its title."""
    if "sessionId" not in line:
        name = _text(line, "session", allow_number=True)
        return f"jsonl:{name}", name
    sid = line["sessionId"]
    if isinstance(sid, bool) or not isinstance(sid, int) or sid < 1:
        raise TypeError(f"sessionId must be a whole number from 1, not {_kind(sid)}")
    title = None if line.get("session") is None else _text(line, "session", allow_number=True)
    return f"jsonl:{title or ''}#{sid}", title


def _jsonl_episode(
    raw: bytes, number: int, seen: Counter[str]
) -> tuple[tuple[str, str | None], SourceEpisode | None]:
    """The line's session, and its episode (None for a session's own line)."""
    try:
        line = json.loads(raw)
        if not isinstance(line, dict):
            raise TypeError(f"a line must be a JSON object, not {_kind(line)}")
        unknown = sorted(set(line) - JSONL_KEYS)
        if unknown:
            raise ValueError(
                f"unknown key {unknown[0]!r}: a line takes {', '.join(sorted(JSONL_KEYS))};"
                " put your own fields in metadata"
            )
        session = _jsonl_session(line)
        if set(line) <= {"session", "sessionId"} and "sessionId" in line:
            return session, None
        name = session[0].removeprefix("jsonl:")  # as keys were made before sessionId
        when = line.get("occurredAt")
        metadata = line.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise TypeError(f"metadata must be an object, not {_kind(metadata)}")
        pinned = line.get("pinned", False)
        if not isinstance(pinned, bool):
            raise TypeError(f"pinned must be true or false, not {_kind(pinned)}")
        episode = NewEpisode(
            _text(line, "speaker"),
            _text(line, "content"),
            _when(when),
            metadata,
            _text(line, "imageCaption") if line.get("imageCaption") is not None else None,
            pinned,
            _when(line.get("expiresAt"), "expiresAt"),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ImportFormatError(f"line {number}: not a JSONL episode: {describe(exc)}") from None
    # Same session, speaker, text and time: the same episode, however often it is imported
    # (the count keeps a message that really was said twice).
    digest = hashlib.sha256(
        json.dumps([name, episode.speaker, episode.content, when]).encode()
    ).hexdigest()[:24]
    seen[digest] += 1
    return session, SourceEpisode(f"jsonl:{digest}:{seen[digest]}", episode)


def _text(line: dict[str, Any], key: str, allow_number: bool = False) -> str:
    """A text field; a session may be named by a whole number, taken as its digits."""
    value = line[key]
    if isinstance(value, int) and not isinstance(value, bool) and allow_number:
        return str(value)
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string, not {_kind(value)}")
    if not value.strip():
        raise ValueError(f"{key} must not be empty or only whitespace")
    return value


_BOMS = {
    codecs.BOM_UTF32_LE: "UTF-32",
    codecs.BOM_UTF32_BE: "UTF-32",
    codecs.BOM_UTF16_LE: "UTF-16",
    codecs.BOM_UTF16_BE: "UTF-16",
}


def _without_utf8_bom(first: bytes) -> bytes:
    """The first line without UTF-8's byte order mark (some editors write one); a file in
    UTF-16 or UTF-32 is refused by name, not as a stray byte."""
    for bom, name in _BOMS.items():
        if first.startswith(bom):
            raise ImportFormatError(
                f"line 1: the file is {name} (it starts with a byte order mark); save it as UTF-8"
            )
    return first.removeprefix(codecs.BOM_UTF8)


def _when(value: Any, name: str = "occurredAt") -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} must be an ISO 8601 string, not {_kind(value)}")
    try:
        return parse_time(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "true or false"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


def describe(exc: BaseException) -> str:
    """What is wrong, in words (never a Python repr)."""
    if isinstance(exc, KeyError):
        return f"the key {exc.args[0]!r} is missing"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at position {exc.start})"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg} at column {exc.colno})"
    return first_line(exc) or type(exc).__name__


def _json_items(stream: IO[bytes]) -> Iterator[Any]:
    try:
        yield from ijson.items(stream, "item", use_float=True)
    except ijson.IncompleteJSONError as exc:
        # ijson's message draws a pointer under the text; its first line says what it is.
        said = first_line(exc).removeprefix("parse error: ").removesuffix(" (right here)")
        raise ImportFormatError(f"not valid JSON: {said} (at byte {stream.tell()})") from None
    except (ijson.JSONError, UnicodeDecodeError) as exc:
        raise ImportFormatError(f"not valid JSON: {describe(exc)}") from None


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
    (created when missing) unless the format has projects of its own; an export's own
    project line names the project when `project` is None, and gives a project the import
    makes its retention. The stream is read
    through once first (it must be seekable): a bad record stops the import before it has
    written anything."""
    if fmt not in FORMATS:
        raise InvalidInput(f"format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    start = stream.tell()
    for conversation in FORMATS[fmt](stream):
        _check(memory, conversation)
    stream.seek(start)
    summary = ImportSummary()
    started = time.perf_counter()
    for conversation in FORMATS[fmt](stream):
        exported = conversation.exported_from
        placed = project or (exported.name if exported else None)
        name = conversation.project or placed
        days = exported.retention_days if exported else None
        project_id = memory.store.projects.ensure(name, days) if name else None
        sessions = _placed(conversation, None if conversation.project else placed)
        new_sessions, episodes, skipped = memory.import_conversation(sessions, project_id)
        summary.conversations += conversation.conversations
        summary.sessions += new_sessions
        summary.episodes += episodes
        summary.skipped += skipped + conversation.skipped
        summary.seconds = time.perf_counter() - started
        if progress:
            progress(summary)
    summary.seconds = time.perf_counter() - started
    return summary


def _check(memory: Memory, conversation: SourceConversation) -> None:
    """What the write would refuse (sizes, empty speakers, captions), refused now, by the
    store's own rules, naming the session: nothing of the file is written yet."""
    for session in conversation.sessions:
        try:
            memory.store.episodes.check([source.episode for source in session.episodes])
        except NexusError as exc:
            raise type(exc)(f"session {session.title or session.key!r}: {exc}") from None


def _placed(conversation: SourceConversation, project: str | None) -> list[SourceSession]:
    """Source keys of an import into a project name the project too: the same file into
    another project is another copy, into the same one the same (and keys of imports into
    no project are as they always were)."""
    if project is None:
        return conversation.sessions
    suffix = f"@{project}"
    return [
        SourceSession(
            session.key + suffix,
            session.title,
            [SourceEpisode(e.key + suffix, e.episode) for e in session.episodes],
        )
        for session in conversation.sessions
    ]
