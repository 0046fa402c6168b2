"""One chat turn: assemble the context, build the prompt, call the LLM, store both episodes.

The context is assembled before the user's message is stored, so that the message is not
its own memory; the message is stored before the LLM is called, so an LLM failure loses
nothing the user said.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from nexusai.errors import NexusError
from nexusai.llm import LLMError, Message, OpenAIChat
from nexusai.models import Episode, NewEpisode
from nexusai.orchestration.context import Context
from nexusai.orchestration.layout import memory_block
from nexusai.orchestration.memory_client import MemoryClient

USER, ASSISTANT = "user", "assistant"
NO_LLM = (
    "no LLM is configured, so nothing can answer and nothing was stored. Set "
    "NEXUS_LLM_BASE_URL and NEXUS_LLM_MODEL (e.g. Ollama at http://127.0.0.1:11434/v1) to "
    "chat, or use POST /context to get the memories for your own LLM call."
)


class NoLLM(NexusError):
    """Chat was asked for without an LLM: refused before anything is stored."""

    status_code = 503

    def __init__(self) -> None:
        super().__init__(NO_LLM)


def require_llm(llm: OpenAIChat | None) -> OpenAIChat:
    if llm is None:
        raise NoLLM()
    return llm


SYSTEM = (
    "You are a helpful assistant with a long-term memory of earlier conversations. "
    "Use the memories and known entities below when they help you answer; they may be "
    "out of date, so prefer what the user says now. Do not recite them unprompted."
)


def build_prompt(context: Context) -> list[Message]:
    """System message with memories (grouped, dated) and entities, then recent turns, then
    the message."""
    system = "\n\n".join(part for part in (SYSTEM, memory_block(context)) if part)
    messages: list[Message] = [{"role": "system", "content": system}]
    retried = unanswered_copy(context)  # the message itself, from a failed first try
    turns = [e for e in context.recent if e is not retried]
    # Where others speak too, every message in the user's role names its speaker, the
    # user's own as well: a user's line "Maria: ..." then never reads as Maria's.
    named = any(e.speaker not in (USER, ASSISTANT) for e in turns)
    for episode in turns:
        role = ASSISTANT if episode.speaker == ASSISTANT else USER
        said = role == USER and named
        content = _said(episode.speaker, episode.content) if said else episode.content
        messages.append({"role": role, "content": content})
    message = _said(USER, context.message) if named else context.message
    messages.append({"role": "user", "content": message})
    return messages


def _said(speaker: str, content: str) -> str:
    return f"{speaker}: {content}"


@dataclass(frozen=True)
class ChatResult:
    reply: str | None
    user_episode: Episode
    assistant_episode: Episode | None
    context: Context


class ChatFailed(LLMError):
    """The LLM failed after the user's message was stored; says which episode holds it."""

    def __init__(self, message: str, user_episode_id: int) -> None:
        super().__init__(message)
        self.user_episode_id = user_episode_id


# A client that retries a failed turn (the openai client does, twice, by default) sends the
# same message again: within this window, an unanswered copy is the same turn.
RETRY_WINDOW = timedelta(minutes=2)


def unanswered_copy(context: Context) -> Episode | None:
    """The session's last episode when it is this very message from the user, stored
    moments ago, with nothing after it: the first try of a turn whose answer failed."""
    if not context.recent:
        return None
    last = context.recent[-1]
    return last if is_unanswered_copy(last, context.message) else None


def is_unanswered_copy(last: Episode, message: str) -> bool:
    """Whether the session's last episode is `message` from the user, stored within the
    retry window."""
    if last.speaker != USER or last.content != message:
        return False
    stored = datetime.fromisoformat(last.created_at.replace("Z", "+00:00"))
    return datetime.now(UTC) - stored < RETRY_WINDOW


def last_stored(memory: MemoryClient, session_id: int) -> int | None:
    """The id of what the session stored last: a chat turn is a retry of an earlier one
    only while this has not changed since that one answered."""
    last = memory.recent_episodes(session_id, 1)
    return last[-1].id if last else None


def store_user_message(memory: MemoryClient, context: Context) -> Episode:
    """The user's message, stored once however often a failed turn is retried."""
    retried = unanswered_copy(context)
    if retried is not None:
        return retried
    [episode] = memory.add_episodes(context.session_id, [NewEpisode(USER, context.message)])
    return episode


def store_reply(memory: MemoryClient, context: Context, reply: str) -> Episode | None:
    if not reply.strip():
        return None
    [episode] = memory.add_episodes(context.session_id, [NewEpisode(ASSISTANT, reply)])
    return episode


def chat_turn(memory: MemoryClient, llm: OpenAIChat, context: Context) -> ChatResult:
    user = store_user_message(memory, context)
    try:
        reply = llm.complete(build_prompt(context))
    except LLMError as exc:
        raise ChatFailed(f"{exc} (your message is stored as episode {user.id})", user.id) from None
    return ChatResult(reply, user, store_reply(memory, context, reply), context)


def chat_events(
    memory: MemoryClient, llm: OpenAIChat, context: Context
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The streamed turn as (event, data) pairs: delta* then done, or error."""
    user = store_user_message(memory, context)
    pieces: list[str] = []
    try:
        for piece in llm.stream(build_prompt(context)):
            pieces.append(piece)
            yield "delta", {"text": piece}
    except LLMError as exc:
        yield "error", {"detail": str(exc), "userEpisodeId": user.id}
        return
    reply = store_reply(memory, context, "".join(pieces))
    yield (
        "done",
        {
            "userEpisodeId": user.id,
            "assistantEpisodeId": reply.id if reply else None,
            "reply": "".join(pieces),
        },
    )
