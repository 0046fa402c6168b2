"""nexusai as an MCP server (the official `mcp` SDK): tools an assistant calls to remember,
recall and forget.

A thin layer over the HTTP API, through `nexusai.client.AsyncClient`, so no retrieval or
storage is written again here. Served three ways: `nexus mcp` over stdio against a running
service (`NEXUS_URL`), `nexus mcp` over stdio with the embedded store when none runs (the
app in-process, behind an ASGI transport), and the service's own `/mcp` (streamable HTTP,
the same API key rule as every route).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from nexusai.client import AsyncClient, Call, Endpoints, NexusAPIError

INSTRUCTIONS = (
    "Long-term memory of earlier conversations. Store what the user says worth keeping with "
    "`remember`; before answering, `recall` what was said before (by meaning and by words). "
    "A conversation is a session, named by you (`session`) inside a `project`; the "
    "sessions of a project share their memories."
)


class MessageIn(BaseModel):
    content: str = Field(description="What was said")
    speaker: str = Field(default="user", description="Who said it: user, assistant or a name")
    occurredAt: str | None = Field(
        default=None, description="When it was said (ISO 8601); now if left out"
    )


class Tools:
    """The tools, each one call (or a few) to the HTTP API through the client."""

    def __init__(self, client: Callable[[], AsyncClient]) -> None:
        self._client = client

    async def _send(self, call: Call[Any]) -> Any:
        try:
            return await self._client().send(call)
        except NexusAPIError as exc:
            raise ToolError(exc.detail) from None

    async def _session(
        self, session_id: int | None, session: str | None, project: str | None
    ) -> int:
        if session_id is not None:
            return session_id
        if session:
            return int((await self._send(Endpoints.resolve_session(project, session))).id)
        raise ToolError("say which conversation: session_id, or session (a name) and project")

    async def remember(
        self,
        messages: list[MessageIn],
        session: str | None = None,
        project: str | None = None,
        session_id: int | None = None,
    ) -> dict[str, Any]:
        sid = await self._session(session_id, session, project)
        body = [m.model_dump(exclude_none=True) for m in messages]
        stored = await self._send(Endpoints.add_episodes(sid, body))
        return {"sessionId": sid, "episodeIds": [e.id for e in stored]}

    async def recall(
        self,
        query: str,
        session: str | None = None,
        project: str | None = None,
        session_id: int | None = None,
    ) -> list[dict[str, Any]]:
        sid = await self._session(session_id, session, project)
        found = await self._send(Endpoints.context(sid, query, explain=True))
        return [m.model_dump(mode="json", by_alias=True) for m in found.memories]

    async def context(
        self,
        message: str,
        session: str | None = None,
        project: str | None = None,
        session_id: int | None = None,
    ) -> dict[str, Any]:
        sid = await self._session(session_id, session, project)
        found = await self._send(Endpoints.context(sid, message, explain=True))
        return dict(found.model_dump(mode="json", by_alias=True))

    async def entities(
        self,
        session: str | None = None,
        project: str | None = None,
        session_id: int | None = None,
        q: str | None = None,
        prefix: str | None = None,
        limit: int = 20,
    ) -> list[dict[str, Any]]:
        sid = await self._session(session_id, session, project)
        found = await self._send(Endpoints.entities(sid, q, prefix, limit))
        return [e.model_dump(mode="json", by_alias=True) for e in found]

    async def forget(
        self,
        episode_id: int | None = None,
        session_id: int | None = None,
        query: str | None = None,
        session: str | None = None,
        project: str | None = None,
        dry_run: bool = True,
    ) -> dict[str, Any]:
        targets, drop = await self._targets(episode_id, session_id, query, session, project)
        if dry_run:
            return {"wouldForget": len(targets), "ids": targets}
        for target in targets:
            await self._send(drop(target))
        return {"forgot": len(targets), "ids": targets}

    async def _targets(
        self,
        episode_id: int | None,
        session_id: int | None,
        query: str | None,
        session: str | None,
        project: str | None,
    ) -> tuple[list[int], Callable[[int], Call[None]]]:
        if episode_id is not None:
            await self._send(Endpoints.get_episode(episode_id))
            return [episode_id], Endpoints.delete_episode
        if query:
            sid = await self._session(session_id, session, project)
            found = await self._send(Endpoints.search(query, [sid], 200))
            return [e.id for e in found if _says(e.content, query)], Endpoints.delete_episode
        if session_id is not None:
            await self._send(Endpoints.get_session(session_id))
            return [session_id], Endpoints.delete_session
        raise ToolError("say what to forget: episode_id, session_id, or a query")

    async def sessions(
        self, action: str = "list", project_id: int | None = None, title: str | None = None
    ) -> list[dict[str, Any]]:
        if action == "create":
            made = await self._send(Endpoints.create_session(project_id, title))
            return [made.model_dump(mode="json", by_alias=True)]
        if action != "list":
            raise ToolError(f"action must be list or create, not {action!r}")
        found = await self._send(Endpoints.list_sessions(project_id, limit=1000))
        return [s.model_dump(mode="json", by_alias=True) for s in found]


def _says(content: str, query: str) -> bool:
    """Whether the episode itself holds every word of the query: keyword search also finds
    the turn after one (it is indexed with that turn's end), which is not what to forget."""
    text = content.casefold()
    return all(word in text for word in query.casefold().split() if len(word) > 1)


DESCRIPTIONS = {
    "remember": "Store one or more messages in a conversation (created by name when new).",
    "recall": "Memories relevant to a query from the conversation's project: each with its"
    " text, date, fused score and its rank by meaning (semanticRank) and by keyword"
    " (keywordRank).",
    "context": "What a chat turn with this message would give the LLM: recent turns, memories"
    " and entities.",
    "entities": "People, places and things the conversation's memory knows (q: by meaning,"
    " prefix: by name).",
    "forget": "Forget an episode, a whole session, or the episodes of a conversation that say"
    " every word of a query. dry_run (the default) only counts what would go.",
    "sessions": "List conversations (sessions), or create one (action: create).",
}


def build_server(client: Callable[[], AsyncClient]) -> MCPServer[Any]:
    """The MCP server; `client` gives the AsyncClient every tool speaks through."""
    server: MCPServer[Any] = MCPServer(name="nexusai", instructions=INSTRUCTIONS)
    tools = Tools(client)
    for name, description in DESCRIPTIONS.items():
        server.tool(name=name, description=description)(getattr(tools, name))
    return server


@asynccontextmanager
async def embedded_client() -> AsyncIterator[AsyncClient]:
    """The whole service in this process (no server, no port), for `nexus mcp` when no
    NEXUS_URL is set: its app behind an ASGI transport, its start-up and shutdown run."""
    import httpx

    from nexusai.app import create_app
    from nexusai.config import Config

    config = Config.from_env()
    app = create_app(config)
    async with app.router.lifespan_context(app):
        key = next(iter(config.api_keys), None)
        transport = httpx.ASGITransport(app=app)
        async with AsyncClient("http://nexusai", key, transport=transport) as client:
            yield client
