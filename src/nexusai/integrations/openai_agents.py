"""The OpenAI Agents SDK: `NexusSession`, the SDK's `Session` over a nexusai session, and
`recall_tool`, a function tool an agent calls to search its long-term memory.

Each of the SDK's items is one episode: its text (a message's content, or the item as JSON)
is what nexusai indexes, its role (or, for tool traffic, its type) the speaker, and the item
itself is kept in the episode's metadata, so `get_items` gives back exactly what was added.
Tool traffic (function calls, their outputs, reasoning: items without a role) is kept in a
session of its own in no project, so no turn of any face searches it, and `get_items`
gives both back in the order they were added. `recall` searches the conversation's
messages only, and leaves out the turn the agent is in: the SDK stores the user's message
before the tool runs.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

from agents import (
    FunctionTool,
    ModelBehaviorError,
    RunContextWrapper,
    SessionSettings,
    function_tool,
)
from pydantic import ValidationError

from nexusai.client import AsyncClient, Endpoints, NexusAPIError, checked_filter
from nexusai.integrations.common import async_client_from
from nexusai.schemas import EpisodeOut, FilterIn, RecalledOut

MARK = "openaiAgentsItem"  # the metadata key an item is kept under
PAGE = 1000
PLUMBING_TITLE = "openai-agents tool traffic of session"
OPEN_TURN_DEPTH = 100  # recentLimit's most: a run's tool traffic beyond it is not left out
# The speakers of conversation: message items' roles. Tool traffic is stored under its
# item type (function_call, function_call_output, reasoning, ...) and never recalled.
SAID = ("user", "assistant")


class NexusSession:
    """The SDK's `Session` protocol over a nexusai session: pass `session=NexusSession(...)`
    to `Runner.run`. Give the session's id, or its title and project (made when missing)."""

    session_settings: SessionSettings | None = None  # the SDK's own defaults

    def __init__(
        self,
        session_id: int | None = None,
        *,
        session: str | None = None,
        project: str | None = None,
        client: AsyncClient | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> None:
        if session_id is None and not session:
            raise ValueError("give session_id, or session (a title) and project")
        self._owned = client is None  # a client it made is its to close
        self.client = async_client_from(client, base_url, api_key)
        self._id = session_id
        self._plumbing: int | None = None  # the session its tool traffic is kept in
        self._title, self._project = session, project
        self.session_id = str(session_id) if session_id is not None else f"{project}/{session}"

    async def aclose(self) -> None:
        if self._owned:
            await self.client.aclose()

    async def __aenter__(self) -> NexusSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def nexus_session_id(self) -> int:
        """The nexusai session's id (found or made on first use)."""
        if self._id is None:
            assert self._title is not None
            self._id = (
                await self.client.resolve_session(title=self._title, project=self._project)
            ).id
        return self._id

    async def plumbing_session_id(self) -> int:
        """The session the conversation's tool traffic is kept in (found or made on first
        use): in no project, so its JSON never reaches a turn's prompt."""
        if self._plumbing is None:
            title = f"{PLUMBING_TITLE} {await self.nexus_session_id()}"
            self._plumbing = (await self.client.resolve_session(title=title, project=None)).id
        return self._plumbing

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The conversation's items, oldest first; with `limit`, the latest that many."""
        episodes = await self._episodes()
        if limit is not None:
            episodes = episodes[-limit:] if limit > 0 else []
        return [_item(e) for e in episodes]

    async def add_items(self, items: list[Any]) -> None:
        """Each run of messages into the conversation, each run of tool traffic beside it,
        in order: the ids keep the order the SDK added them in."""
        for plumbing, run in itertools.groupby(items, key=_is_plumbing):
            body = [_episode(item) for item in run]
            sid = await (self.plumbing_session_id() if plumbing else self.nexus_session_id())
            await self.client.add_episodes(sid, body)

    async def pop_item(self) -> Any | None:
        episodes = await self._episodes()
        if not episodes:
            return None
        await self.client.delete_episode(episodes[-1].id)
        return _item(episodes[-1])

    async def clear_session(self) -> None:
        for episode in await self._episodes():
            await self.client.delete_episode(episode.id)

    async def open_turn(self) -> int:
        """How many of the session's latest episodes are the turn a run is in, as the
        service holds them: the user's latest message and what followed it, while no
        assistant message has answered it yet (a finished run ends with one). Read from
        the service, not kept in this object, so every wiring agrees: a tool bound to
        another `NexusSession` than the run's, or finished runs copied in from another
        session, see the same turn."""
        sid = await self.nexus_session_id()
        latest = await self.client.send(Endpoints.recent(sid, OPEN_TURN_DEPTH))
        for back, episode in enumerate(reversed(latest), start=1):
            if episode.speaker == "assistant":
                return 0
            if episode.speaker == "user":
                return back
        return 0

    async def _episodes(self) -> list[EpisodeOut]:
        """The conversation's episodes and its tool traffic's, in the order they were added."""
        said = await self._all(await self.nexus_session_id())
        plumbing = await self._all(await self.plumbing_session_id())
        return sorted([*said, *plumbing], key=lambda e: e.id)

    async def _all(self, sid: int) -> list[EpisodeOut]:
        found: list[EpisodeOut] = []
        while page := await self.client.list_episodes(sid, limit=PAGE, offset=len(found)):
            found += page
            if len(page) < PAGE:
                break
        return found


def recall_tool(
    session: NexusSession, k: int = 8, filter: FilterIn | Mapping[str, Any] | None = None
) -> FunctionTool:
    """A `recall` function tool: the memories of the session's project that match what
    the agent asks, best first, each with its date, who said it and its fused score; with
    a `filter`, only among the episodes it keeps (the agent cannot widen it). Only what the
    user and the assistant said is searched, and never the turn the agent is in."""
    rule = _said_only(filter)

    @function_tool(name_override="recall", failure_error_function=_said_plainly)
    async def recall(query: str) -> str:
        """Search long-term memory of earlier conversations, by meaning and by words.

        Args:
            query: what to look for, e.g. "the recipe you gave me" or "my sister's name".
        """
        sid = await session.nexus_session_id()
        recent = await session.open_turn()
        found = await session.client.recall(sid, query, k, filter=rule, recent=recent)
        lines = [f"[{m.occurred_at[:10]}] {m.speaker}: {m.content} ({_how(m)})" for m in found]
        return "\n".join(lines) or "nothing found"

    return recall


def _how(memory: RecalledOut) -> str:
    """A match's score, or, for the user's standing memories after the matches, what it is."""
    if memory.standing == "pinned":
        return "pinned by the user"
    if memory.standing:
        return f"the user's standing {memory.standing}"
    return f"score {memory.score or 0:.4f}"


def _said_only(filter: FilterIn | Mapping[str, Any] | None) -> FilterIn:
    """The filter given, narrowed to what the user and the assistant said."""
    given = FilterIn() if filter is None else checked_filter(filter)
    speakers = [s for s in (given.speaker or SAID) if s in SAID]
    if not speakers:
        raise ValueError(f"filter.speaker: recall searches only {' and '.join(SAID)} messages")
    return given.model_copy(update={"speaker": speakers})


def _said_plainly(_: RunContextWrapper[Any], error: Exception) -> str:
    """What went wrong, for the model to correct: the service's own message, or which
    argument is wrong (the SDK's default says only that something failed)."""
    if isinstance(error, NexusAPIError):
        return f"recall failed: {error.detail}"
    refused = error.__cause__
    if isinstance(refused, ValidationError):
        fields = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
            for e in refused.errors(include_url=False)
        )
        return f"recall was called with bad arguments: {fields}; {TAKES}"
    if isinstance(error, ModelBehaviorError):  # the SDK keeps the arguments' fault to itself
        return f"recall was called with bad arguments: {TAKES}"
    return f"recall failed: {str(error).splitlines()[0] if str(error) else type(error).__name__}"


TAKES = 'it takes a JSON object with one string, {"query": "what to look for"}'


def _is_plumbing(item: Any) -> bool:
    """Tool traffic: an item with no role (a function call, its output, reasoning)."""
    return not (isinstance(item, dict) and item.get("role"))


def _episode(item: Any) -> dict[str, Any]:
    role = item.get("role") if isinstance(item, dict) else None
    speaker = str(role or (item.get("type") if isinstance(item, dict) else None) or "item")
    return {"speaker": speaker, "content": _text(item), "metadata": {MARK: item}}


def _text(item: Any) -> str:
    content = item.get("content") if isinstance(item, dict) else None
    if isinstance(content, str) and content.strip():
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        if any(p.strip() for p in parts):
            return "\n".join(p for p in parts if p)
    return json.dumps(item, ensure_ascii=False, sort_keys=True, default=str)


def _item(episode: EpisodeOut) -> Any:
    kept = episode.metadata.get(MARK)
    return kept if kept is not None else {"role": episode.speaker, "content": episode.content}
