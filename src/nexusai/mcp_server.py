"""nexusai as an MCP server (the official `mcp` SDK): tools an assistant calls to remember,
recall and forget.

A thin layer over the HTTP API, through `nexusai.client.AsyncClient`, so no retrieval or
storage is written again here. Served three ways: `nexus mcp` over stdio against a running
service (`NEXUS_URL`), `nexus mcp` over stdio with the embedded store when none runs (the
app in-process, behind an ASGI transport), and the service's own `/mcp` (streamable HTTP,
each call made with the caller's own key, so the same key rule as every route).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
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


ClientFor = Callable[[Context | None], AsyncClient]


class Tools:
    """The tools, each one call (or a few) to the HTTP API through the client. The client
    is chosen per call from the tool's context: over `/mcp` it carries the caller's own key,
    so a project key's tools see what that key sees, and no more."""

    def __init__(self, client: ClientFor) -> None:
        self._client = client

    async def _send(self, ctx: Context | None, call: Call[Any]) -> Any:
        try:
            return await self._client(ctx).send(call)
        except NexusAPIError as exc:
            raise ToolError(exc.detail) from None

    async def _session(
        self, ctx: Context | None, session_id: int | None, session: str | None, project: str | None
    ) -> int:
        if session_id is not None:
            return session_id
        if session:
            return int((await self._send(ctx, Endpoints.resolve_session(project, session))).id)
        raise ToolError("say which conversation: session_id, or session (a name) and project")

    async def remember(
        self,
        ctx: Context,
        messages: list[MessageIn],
        session: str | None = None,
        project: str | None = None,
        session_id: int | None = None,
    ) -> dict[str, Any]:
        sid = await self._session(ctx, session_id, session, project)
        body = [m.model_dump(exclude_none=True) for m in messages]
        stored = await self._send(ctx, Endpoints.add_episodes(sid, body))
        return {"sessionId": sid, "episodeIds": [e.id for e in stored]}

    async def recall(
        self,
        ctx: Context,
        query: str,
        session: str | None = None,
        project: str | None = None,
        session_id: int | None = None,
    ) -> list[dict[str, Any]]:
        sid = await self._session(ctx, session_id, session, project)
        found = await self._send(ctx, Endpoints.context(sid, query, explain=True))
        return [m.model_dump(mode="json", by_alias=True) for m in found.memories]

    async def context(
        self,
        ctx: Context,
        message: str,
        session: str | None = None,
        project: str | None = None,
        session_id: int | None = None,
    ) -> dict[str, Any]:
        sid = await self._session(ctx, session_id, session, project)
        found = await self._send(ctx, Endpoints.context(sid, message, explain=True))
        return dict(found.model_dump(mode="json", by_alias=True))

    async def entities(
        self,
        ctx: Context,
        session: str | None = None,
        project: str | None = None,
        session_id: int | None = None,
        q: str | None = None,
        prefix: str | None = None,
        limit: int = 20,
    ) -> list[dict[str, Any]]:
        sid = await self._session(ctx, session_id, session, project)
        found = await self._send(ctx, Endpoints.entities(sid, q, prefix, limit))
        return [e.model_dump(mode="json", by_alias=True) for e in found]

    async def forget(
        self,
        ctx: Context,
        episode_id: int | None = None,
        session_id: int | None = None,
        query: str | None = None,
        session: str | None = None,
        project: str | None = None,
        dry_run: bool = True,
    ) -> dict[str, Any]:
        targets, drop = await self._targets(ctx, episode_id, session_id, query, session, project)
        if dry_run:
            return {"wouldForget": len(targets), "ids": targets}
        for target in targets:
            await self._send(ctx, drop(target))
        return {"forgot": len(targets), "ids": targets}

    async def _targets(
        self,
        ctx: Context,
        episode_id: int | None,
        session_id: int | None,
        query: str | None,
        session: str | None,
        project: str | None,
    ) -> tuple[list[int], Callable[[int], Call[None]]]:
        if episode_id is not None:
            await self._send(ctx, Endpoints.get_episode(episode_id))
            return [episode_id], Endpoints.delete_episode
        if query:
            sid = await self._session(ctx, session_id, session, project)
            found = await self._send(ctx, Endpoints.search(query, [sid], 200))
            return [e.id for e in found if _says(e.content, query)], Endpoints.delete_episode
        if session_id is not None:
            await self._send(ctx, Endpoints.get_session(session_id))
            return [session_id], Endpoints.delete_session
        raise ToolError("say what to forget: episode_id, session_id, or a query")

    async def sessions(
        self,
        ctx: Context,
        action: str = "list",
        project_id: int | None = None,
        title: str | None = None,
    ) -> list[dict[str, Any]]:
        if action == "create":
            made = await self._send(ctx, Endpoints.create_session(project_id, title))
            return [made.model_dump(mode="json", by_alias=True)]
        if action != "list":
            raise ToolError(f"action must be list or create, not {action!r}")
        found = await self._send(ctx, Endpoints.list_sessions(project_id, limit=1000))
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


def build_server(client: ClientFor) -> MCPServer[Any]:
    """The MCP server; `client` gives the AsyncClient a tool call speaks through."""
    server: MCPServer[Any] = MCPServer(name="nexusai", instructions=INSTRUCTIONS)
    tools = Tools(client)
    for name, description in DESCRIPTIONS.items():
        server.tool(name=name, description=description)(getattr(tools, name))
    return server


def per_caller(make: Callable[[str | None], AsyncClient]) -> ClientFor:
    """For `/mcp`: each tool call speaks with the key its caller sent to `/mcp` (the door
    has checked it already), so the tools answer with exactly what that key may see."""
    clients: dict[str | None, AsyncClient] = {}

    def client_for(ctx: Context | None) -> AsyncClient:
        key = _caller_key(ctx)
        if key not in clients:
            if len(clients) >= 256:  # keys come and go; a client is cheap to make again
                clients.clear()
            clients[key] = make(key)
        return clients[key]

    return client_for


def _caller_key(ctx: Context | None) -> str | None:
    try:
        request = ctx.request_context.request if ctx is not None else None
    except ValueError:  # outside a request: no caller to speak for
        return None
    headers = getattr(request, "headers", None)
    header = headers.get("authorization", "") if headers is not None else ""
    scheme, _, key = header.partition(" ")
    return key.strip() if scheme.lower() == "bearer" and key.strip() else None


@asynccontextmanager
async def embedded_client() -> AsyncIterator[AsyncClient]:
    """The whole service in this process (no server, no port), for `nexus mcp` when no
    NEXUS_URL is set: its app behind an ASGI transport, its start-up and shutdown run."""
    import httpx

    from nexusai.app import create_app
    from nexusai.config import Config
    from nexusai.memory.service import Memory

    config = Config.from_env()
    # Opened here, so a store another process holds is one clear error before any serving.
    app = create_app(config, memory=Memory.open(config))
    async with app.router.lifespan_context(app):
        key = next(iter(config.api_keys), None)
        transport = httpx.ASGITransport(app=app)
        async with AsyncClient("http://nexusai", key, transport=transport) as client:
            yield client
