"""A streamed chat turn's server-sent events, typed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from nexusai.schemas import ContextOut


@dataclass(frozen=True)
class ChatEvent:
    """One server-sent event of a streamed chat turn: a `ContextEvent`, `DeltaEvent`s, then
    a `DoneEvent` or an `ErrorEvent`; `data` is the event's JSON as sent."""

    event: str
    data: dict[str, Any]


@dataclass(frozen=True)
class ContextEvent(ChatEvent):
    """What the turn gave the LLM, before it answers."""

    context: ContextOut


@dataclass(frozen=True)
class DeltaEvent(ChatEvent):
    """The next piece of the reply."""

    text: str


@dataclass(frozen=True)
class DoneEvent(ChatEvent):
    """The whole reply, and the episodes both messages are stored as."""

    reply: str
    user_episode_id: int
    assistant_episode_id: int | None


@dataclass(frozen=True)
class ErrorEvent(ChatEvent):
    """The LLM failed; the user's message is stored (`user_episode_id`)."""

    detail: str
    user_episode_id: int | None


def chat_event(event: str, data: dict[str, Any]) -> ChatEvent:
    """The typed event for a server-sent event's name and JSON."""
    if event == "context":
        return ContextEvent(event, data, ContextOut.model_validate(data))
    if event == "delta":
        return DeltaEvent(event, data, str(data["text"]))
    if event == "done":
        reply = str(data.get("reply") or "")
        return DoneEvent(event, data, reply, data["userEpisodeId"], data.get("assistantEpisodeId"))
    if event == "error":
        return ErrorEvent(event, data, str(data.get("detail")), data.get("userEpisodeId"))
    return ChatEvent(event, data)


class EventReader:
    """Server-sent events read line by line, as they arrive (both clients feed it)."""

    def __init__(self) -> None:
        self._event = ""

    def feed(self, line: str) -> ChatEvent | None:
        if line.startswith("event: "):
            self._event = line[7:]
        elif line.startswith("data: "):
            return chat_event(self._event, json.loads(line[6:]))
        return None
