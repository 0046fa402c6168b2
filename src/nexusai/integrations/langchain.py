"""LangChain: `NexusRetriever`, a retriever over a session's memory, and
`NexusChatMessageHistory`, a chat history stored as a session's episodes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from nexusai.client import Client, NotFoundError, checked_filter
from nexusai.integrations.common import all_episodes, client_from, find_session
from nexusai.schemas import EpisodeOut, FilterIn, RecalledOut


class NexusRetriever(BaseRetriever):
    """The memories nexusai's `POST /context` ranks for a query, as Documents, best first.
    Give `session_id`, or `session` (its title) and `project`; at most `k` memories come
    back (`invoke(query, k=3)` or `ainvoke(query, k=3)` for one call), each with its
    episode's own metadata and its id, session, speaker, time, fused score and both ranks
    in `metadata` (or, with `budget`, what fits that many tokens, at most `k`, each with
    its `tokens` and, when cut, its `excerpt`). The standing memories (pinned, the user's
    rules and preferences) never take the place of a match: with `standing=True` they
    come after the `k` best, as documents of their own marked `standing` in `metadata`.
    Searches the session's whole project, its latest messages included; with a `filter`
    (`{"after": ..., "speaker": [...], "metadata": {...}}`, here or at call time), only
    the episodes it keeps, chosen inside the search. A session given by name is looked up
    once."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: Client | None = None
    base_url: str | None = None
    api_key: str | None = None
    session_id: int | None = None
    session: str | None = None
    project: str | None = None
    k: int = Field(default=10, ge=1, le=100)
    # Tokens the memories may cost (contextBudget): what fits, long ones as excerpts.
    budget: int | None = Field(default=None, ge=0, le=32_000)
    filter: FilterIn | dict[str, Any] | None = None  # its JSON is read as a FilterIn
    # The standing memories (pinned, the user's rules and preferences) after the k best,
    # marked `standing`: a chain that wants them besides its k documents says so.
    standing: bool = False
    _found: int | None = PrivateAttr(default=None)  # the session named, once looked up

    @field_validator("filter", mode="before")
    @classmethod
    def _a_filter(cls, given: Any) -> FilterIn | None:
        """A filter mistake is the client's `InvalidInputError`, as on every face, not
        pydantic's error for this model."""
        return None if given is None else checked_filter(given)

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: FilterIn | dict[str, Any] | None = None,
        **unknown: Any,
    ) -> list[Document]:
        return self._relevant(query, k, filter, unknown)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: FilterIn | dict[str, Any] | None = None,
        **unknown: Any,
    ) -> list[Document]:
        """As `invoke`, call-time `k` and `filter` included, in a worker thread: the event
        loop is not held."""
        return await asyncio.to_thread(self._relevant, query, k, filter, unknown)

    def _relevant(
        self,
        query: str,
        k: int | None,
        filter: FilterIn | dict[str, Any] | None,
        unknown: dict[str, Any],
    ) -> list[Document]:
        if unknown:
            raise TypeError(
                f"NexusRetriever takes k and filter at call time, not {', '.join(unknown)}"
            )
        if k is not None and not 1 <= k <= 100:
            raise ValueError(f"k: give a whole number from 1 to 100, not {k}")
        rule = self.filter if filter is None else checked_filter(filter)
        if self.client is not None:
            return self._documents(self.client, query, k or self.k, rule)
        with Client(self.base_url, self.api_key) as client:  # its own: closed after the call
            return self._documents(client, query, k or self.k, rule)

    def _documents(
        self, client: Client, query: str, k: int, rule: FilterIn | dict[str, Any] | None
    ) -> list[Document]:
        try:
            found = self._recall(client, query, k, rule)
        except NotFoundError:
            if self.session_id is not None or self._found is None:
                raise
            self._found = None  # the session named was deleted or renamed: look it up again
            found = self._recall(client, query, k, rule)
        return [_document(memory) for memory in found]

    def _recall(
        self, client: Client, query: str, k: int, rule: FilterIn | dict[str, Any] | None
    ) -> list[RecalledOut]:
        sid = self._session_id(client)
        return client.recall(sid, query, k, self.budget, rule, standing=self.standing)

    def _session_id(self, client: Client) -> int:
        if self.session_id is not None:
            return self.session_id
        if self._found is None:
            if not self.session:
                raise ValueError("give session_id, or session (a title) and project")
            self._found = find_session(client, self.session, self.project)
        return self._found


def _document(memory: RecalledOut) -> Document:
    """The episode's own metadata (`source`, to cite it), then what nexusai says of it,
    which wins a clash of names; a standing memory is marked `standing`."""
    metadata = {
        **memory.metadata,
        "id": memory.id,
        "sessionId": memory.session_id,
        "speaker": memory.speaker,
        "occurredAt": memory.occurred_at,
        "score": memory.score,
        "semanticRank": memory.semantic_rank,
        "keywordRank": memory.keyword_rank,
        **({"standing": memory.standing} if memory.standing else {}),
        **({"tokens": memory.tokens} if memory.tokens is not None else {}),
        **({"excerpt": memory.excerpt.model_dump()} if memory.excerpt else {}),
    }
    return Document(page_content=memory.content, metadata=metadata, id=str(memory.id))


ROLES = {"human": "user", "ai": "assistant", "system": "system"}


class NexusChatMessageHistory(BaseChatMessageHistory):
    """A session's episodes as LangChain messages: `user` episodes are HumanMessages,
    `assistant` ones AIMessages, `system` ones SystemMessages, any other speaker a
    HumanMessage with its name. Give `session_id`, or `session` and `project` (made when
    missing: a history is written to)."""

    def __init__(
        self,
        session_id: int | None = None,
        *,
        session: str | None = None,
        project: str | None = None,
        client: Client | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> None:
        self._owned = client is None  # a client it made is its to close
        self.client = client_from(client, base_url, api_key)
        if session_id is None:
            if not session:
                raise ValueError("give session_id, or session (a title) and project")
            session_id = self.client.resolve_session(title=session, project=project).id
        self.session_id = session_id

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return [_message(e) for e in all_episodes(self.client, self.session_id)]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Stores them in one batch. Each keeps what makes it a LangChain message (its type,
        a tool message's `tool_call_id`, an AI message's `tool_calls`) in its metadata, so
        it reads back as it was sent; a message with no text (an AI message that only calls
        tools) is stored as the calls it makes."""
        body = [_episode(m) for m in messages]
        if body:
            self.client.add_episodes(self.session_id, body)

    def clear(self) -> None:
        for episode in all_episodes(self.client, self.session_id):
            self.client.delete_episode(episode.id)

    def close(self) -> None:
        if self._owned:
            self.client.close()


KEPT = "langchain"  # the metadata key that holds a message's own fields


def _episode(message: BaseMessage) -> dict[str, Any]:
    [sent] = messages_to_dict([message])
    fields = {k: v for k, v in sent["data"].items() if v not in (None, "", [], {})}
    text = _text(message) or _calls(message)
    if not text:
        raise ValueError(f"a {message.type} message with no text cannot be stored")
    if text != message.content:
        fields["content"] = message.content  # read back as sent, not as stored
    else:
        fields.pop("content", None)
    metadata = {KEPT: {"type": sent["type"], "data": fields}}
    return {"speaker": _speaker(message), "content": text, "metadata": metadata}


def _calls(message: BaseMessage) -> str:
    calls = getattr(message, "tool_calls", None) or []
    return "; ".join(f"calls {c['name']}({json.dumps(c.get('args', {}))})" for c in calls)


def _message(episode: EpisodeOut) -> BaseMessage:
    kept = (episode.metadata or {}).get(KEPT)
    if isinstance(kept, dict) and "type" in kept:
        data = {"content": episode.content, **kept.get("data", {})}
        [message] = messages_from_dict([{"type": kept["type"], "data": data}])
        return message
    if episode.speaker == "assistant":
        return AIMessage(content=episode.content)
    if episode.speaker == "system":
        return SystemMessage(content=episode.content)
    name = None if episode.speaker == "user" else episode.speaker
    return HumanMessage(content=episode.content, name=name)


def _speaker(message: BaseMessage) -> str:
    if message.type == "human" and message.name:
        return str(message.name)
    return ROLES.get(message.type, message.type)


def _text(message: BaseMessage) -> str:
    content: Any = message.content
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if isinstance(p, dict)).strip()
