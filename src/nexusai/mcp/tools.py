"""nexusai as an MCP server (the official `mcp` SDK): tools an assistant calls to remember,
recall and forget.

A thin layer over the HTTP API, through `nexusai.client.AsyncClient`, so no retrieval or
storage is written again here. Served three ways: `nexus mcp` over stdio against a running
service (`NEXUS_URL`), `nexus mcp` over stdio with the embedded store when none runs (the
app in-process, behind an ASGI transport), and the service's own `/mcp` (streamable HTTP,
each call made with the caller's own key, so the same key rule as every route).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal, Self

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from nexusai import __version__
from nexusai.client import AsyncClient, Call, Endpoints, NexusAPIError
from nexusai.idempotency import digest
from nexusai.refusals import refusal
from nexusai.schemas import MAX_ID, EpisodeOut, FilterIn, IsoTime, check_storable

INSTRUCTIONS = (
    "Long-term memory of earlier conversations. Store what the user says worth keeping with "
    "`remember`; before answering, `recall` what was said before (by meaning and by words). "
    "A conversation is a session, named by you (`session`) inside a `project`; the "
    "sessions of a project share their memories. Only `remember` makes a session; the "
    "other tools find one by name, or by `session_id`."
)

SessionName = Annotated[
    str | None, Field(description="The conversation's name (a session's title)", max_length=500)
]
ProjectName = Annotated[
    str | None, Field(description="The project the session is in (its name)", max_length=500)
]
Budget = Annotated[
    int | None,
    Field(
        description="Tokens the memories may cost in all: what fits (at fusion learned, the"
        " most evidence per token, long ones cut to the passage that matters)",
        ge=0,
        le=32_000,
    ),
]
SessionId = Annotated[
    int | None, Field(description="The session's id, instead of its name", ge=1, le=MAX_ID)
]
Filter = Annotated[
    FilterIn | None,
    Field(
        description="Only the episodes said in a time window (after, before), by some"
        " speakers, or with some metadata values (a search chooses among them only)"
    ),
]


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    content: str = Field(description="What was said", min_length=1)
    speaker: str = Field(default="user", description="Who said it: user, assistant or a name")
    occurredAt: str | None = Field(
        default=None, description="When it was said (ISO 8601); now if left out"
    )
    metadata: dict[str, Any] | None = Field(
        default=None,
        description='Your own labels, as {"topic": "travel"}: what forget, recall and context'
        " filter on (filter.metadata)",
    )
    expiresAt: str | None = Field(
        default=None,
        description="From this time (ISO 8601) it is never recalled, and is deleted; never if"
        " left out",
    )

    @model_validator(mode="after")
    def _storable(self) -> Self:
        check_storable(self)
        return self


ClientFor = Callable[[Context | None], AsyncClient]


def compact(data: Any) -> CallToolResult:
    """A tool's answer, short for a model's context: JSON without spaces, nulls or empty
    metadata, and scores to 4 significant digits (the same data is structured too)."""
    trimmed = _trim(data)
    text = json.dumps(trimmed, ensure_ascii=False, separators=(",", ":"))
    structured = trimmed if isinstance(trimmed, dict) else {"result": trimmed}
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


def _trim(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _trim(v) for k, v in value.items() if v is not None and v != {}}
    if isinstance(value, list):
        return [_trim(v) for v in value]
    if isinstance(value, float):
        return float(f"{value:.4g}")
    return value


class Tools:
    """The tools, each one call (or a few) to the HTTP API through the client. The client
    is chosen per call from the tool's context: over `/mcp` it carries the caller's own key,
    so a project key's tools see what that key sees, and no more."""

    def __init__(self, client: ClientFor) -> None:
        self._client = client

    async def _send(self, ctx: Context | None, call: Call[Any], items: str = "episodes") -> Any:
        """The call's answer; a refusal as a tool error. `items`: what the tool calls a
        batch's items, where the API's message says `episodes[i]`."""
        try:
            return await self._client(ctx).send(call)
        except NexusAPIError as exc:
            raise ToolError(re.sub(r"\bepisodes\[", f"{items}[", exc.detail)) from None

    async def _find(
        self, ctx: Context | None, session_id: int | None, session: str | None, project: str | None
    ) -> int:
        """The session named (never made: reading writes nothing); an unknown name is an
        error that says which sessions there are."""
        if session_id is not None:
            return session_id
        if not session:
            raise ToolError("say which conversation: session (a name) and project, or session_id")
        project_id = await self._project_id(ctx, project) if project else None
        found = await self._send(ctx, Endpoints.list_sessions(project_id, limit=1000))
        named = [s for s in found if s.title == session]
        if len(named) == 1:
            return int(named[0].id)
        where = f" in project {project!r}" if project else ""
        if named:
            ids = ", ".join(f"{s.id} (project {s.project_id})" for s in named)
            raise ToolError(
                f"several sessions are named {session!r}: {ids}; give project or session_id"
            )
        titles = ", ".join(sorted({repr(s.title) for s in found if s.title})[:50]) or "none"
        raise ToolError(f"there is no session named {session!r}{where}; sessions: {titles}")

    async def _project_id(self, ctx: Context | None, project: str) -> int:
        projects = await self._send(ctx, Endpoints.list_projects(limit=1000))
        for known in projects:
            if known.name == project:
                return int(known.id)
        names = ", ".join(repr(p.name) for p in projects) or "none"
        raise ToolError(f"there is no project named {project!r}; projects: {names}")

    async def remember(
        self,
        ctx: Context,
        messages: Annotated[list[MessageIn], Field(description="What was said", min_length=1)],
        session: SessionName = None,
        project: ProjectName = None,
        session_id: SessionId = None,
    ) -> CallToolResult:
        body = [m.model_dump(exclude_none=True) for m in messages]
        # A client that calls again after a lost answer sends the same arguments: stored
        # once. The same words said again after something else was stored are said again.
        before = await self._before_batch(ctx, session_id, session, project, body)
        key = digest("remember", session_id, session, project, body, before)
        if session_id is not None:
            call = Endpoints.add_episodes(session_id, body, idempotency_key=key)
        elif session:  # the session is made in the episodes' transaction, or not at all
            call = Endpoints.add_episodes_named(project, session, body, idempotency_key=key)
        else:
            raise ToolError("say which conversation: session (a name), or session_id")
        stored = await self._send(ctx, call, items="messages")
        answer: dict[str, Any] = {
            "sessionId": stored[0].session_id,
            "episodeIds": [e.id for e in stored],
        }
        if any(e.expires_at for e in stored):
            answer["expiresAt"] = [e.expires_at for e in stored]
        return compact(answer)

    async def _before_batch(
        self,
        ctx: Context,
        session_id: int | None,
        session: str | None,
        project: str | None,
        body: list[dict[str, Any]],
    ) -> int | None:
        """The id of the session's last episode before this batch: before the session's
        tail when that tail is this very batch (a retry after a lost answer: the same key,
        answered as the first), else its last episode (said again after something else: a
        new key, stored again), as `/chat` and `/v1` tell a retry from a repeat."""
        try:
            sid = await self._find(ctx, session_id, session, project)
        except ToolError:
            return None  # no such session yet: the first write makes it
        tail = await self._send(ctx, Endpoints.recent(sid, len(body) + 1))
        said = [(m.get("speaker", "user"), m["content"]) for m in body]
        ends_with_it = [(e.speaker, e.content) for e in tail[-len(body) :]] == said
        if ends_with_it:
            earlier = tail[: -len(body)]
            return earlier[-1].id if earlier else None
        return tail[-1].id if tail else None

    async def recall(
        self,
        ctx: Context,
        query: Annotated[
            str, Field(description="What to look for: a question or words", min_length=1)
        ],
        session: SessionName = None,
        project: ProjectName = None,
        session_id: SessionId = None,
        limit: Annotated[int, Field(description="How many memories, at most", ge=1, le=100)] = 10,
        budget: Budget = None,
        filter: Filter = None,
    ) -> CallToolResult:
        sid = await self._find(ctx, session_id, session, project)
        found = await self._send(ctx, Endpoints.recall(sid, query, limit, budget, filter))
        return compact([_memory(m) for m in found])

    async def context(
        self,
        ctx: Context,
        message: Annotated[str, Field(description="The user's new message", min_length=1)],
        session: SessionName = None,
        project: ProjectName = None,
        session_id: SessionId = None,
        budget: Budget = None,
        filter: Filter = None,
        now: Annotated[
            IsoTime | None,
            Field(
                description="The turn's own time (ISO 8601), which a time the message names"
                ' ("last week") is read against; default: now'
            ),
        ] = None,
    ) -> CallToolResult:
        sid = await self._find(ctx, session_id, session, project)
        call = Endpoints.context(sid, message, True, budget=budget, filter=filter, now=now)
        found = await self._send(ctx, call)
        return compact(
            {
                "recent": [_said(e) for e in found.recent],
                "standing": [_memory(m) for m in found.standing or []] or None,
                "memories": [_memory(m) for m in found.searched()],
                "entities": [_entity(e) for e in found.entities],
                "warnings": found.warnings or None,
                "prompt": found.prompt or None,
                "tokens": found.tokens,
                "budget": found.budget,
            }
        )

    async def entities(
        self,
        ctx: Context,
        session: SessionName = None,
        project: ProjectName = None,
        session_id: SessionId = None,
        q: Annotated[str | None, Field(description="Find by meaning")] = None,
        prefix: Annotated[str | None, Field(description="Find by the start of a name")] = None,
        limit: Annotated[int, Field(description="How many, at most", ge=1, le=100)] = 20,
    ) -> CallToolResult:
        sid = await self._find(ctx, session_id, session, project)
        found = await self._send(ctx, Endpoints.entities(sid, q, prefix, limit))
        return compact([_entity(e) for e in found])

    async def forget(
        self,
        ctx: Context,
        episode_id: Annotated[int | None, Field(description="One episode", ge=1, le=MAX_ID)] = None,
        session_id: SessionId = None,
        query: Annotated[
            str | None, Field(description="The episodes that say every word of this")
        ] = None,
        session: SessionName = None,
        project: ProjectName = None,
        dry_run: Annotated[bool, Field(description="Only say what would go")] = True,
        filter: Filter = None,
    ) -> CallToolResult:
        if filter is not None:
            return await self._forget_filtered(ctx, filter, session_id, session, project, dry_run)
        targets, drop, episodes = await self._targets(
            ctx, episode_id, session_id, query, session, project
        )
        if not dry_run:
            for target in targets:
                await self._send(ctx, drop(target))
        return compact(_forgotten(episodes, dry_run))

    async def _forget_filtered(
        self,
        ctx: Context,
        rule: FilterIn,
        session_id: int | None,
        session: str | None,
        project: str | None,
        dry_run: bool,
    ) -> CallToolResult:
        """`DELETE /episodes` in the one session named: a filter never reaches further, and
        one that names nothing (`{}`) is refused, not read as the whole session."""
        if rule.to_filter().is_empty():
            raise ToolError(
                "filter: name at least one of after, before, speaker or metadata; to forget a"
                " whole conversation, leave filter out and give session or session_id"
            )
        sid = await self._find(ctx, session_id, session, project)
        try:
            call = Endpoints.forget([sid], rule, dry_run=dry_run)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        done = await self._send(ctx, call)
        return compact(_forgotten(done.episode_ids, dry_run, done.episodes))

    async def pin(
        self,
        ctx: Context,
        episode_id: Annotated[int, Field(description="The episode", ge=1, le=MAX_ID)],
        pinned: Annotated[bool, Field(description="true pins it, false unpins it")] = True,
    ) -> CallToolResult:
        changed = await self._send(ctx, Endpoints.update_episode(episode_id, {"pinned": pinned}))
        return compact({"episodeId": changed.id, "pinned": changed.pinned})

    async def _targets(
        self,
        ctx: Context,
        episode_id: int | None,
        session_id: int | None,
        query: str | None,
        session: str | None,
        project: str | None,
    ) -> tuple[list[int], Callable[[int], Call[None]], list[int]]:
        """What to delete, how, and the episodes that goes with it."""
        if episode_id is not None:
            await self._send(ctx, Endpoints.get_episode(episode_id))
            return [episode_id], Endpoints.delete_episode, [episode_id]
        if query:
            sid = await self._find(ctx, session_id, session, project)
            ids = [e.id for e in await self._every_episode(ctx, sid) if _says(e.content, query)]
            return ids, Endpoints.delete_episode, ids
        if session_id is not None or session:
            sid = await self._find(ctx, session_id, session, project)
            held = await self._every_episode(ctx, sid)
            return [sid], Endpoints.delete_session, [e.id for e in held]
        raise ToolError("say what to forget: episode_id, a session, or a query")

    async def _every_episode(self, ctx: Context, session_id: int) -> list[EpisodeOut]:
        """All of a session's episodes, page by page: a forget takes every match, not the
        first page of them."""
        found: list[EpisodeOut] = []
        while True:
            call = Endpoints.list_episodes(session_id, limit=PAGE, offset=len(found))
            page = await self._send(ctx, call)
            found.extend(page)
            if len(page) < PAGE:
                return found

    async def sessions(
        self,
        ctx: Context,
        action: Annotated[Literal["list", "create"], Field(description="list or create")] = "list",
        project: ProjectName = None,
        title: Annotated[str | None, Field(description="A new session's name")] = None,
    ) -> CallToolResult:
        if action == "create":
            if not title:
                raise ToolError("a new session needs a title")
            made = await self._send(ctx, Endpoints.resolve_session(title=title, project=project))
            return compact([_session(made)])
        project_id = await self._project_id(ctx, project) if project else None
        found = await self._send(ctx, Endpoints.list_sessions(project_id, limit=1000))
        return compact([_session(s) for s in found])


def _said(episode: BaseModel) -> dict[str, Any]:
    """An episode (or a memory, with its score and ranks) as the API answers it, less what a
    model has no use for; `compact` drops the nulls and empty metadata."""
    return episode.model_dump(mode="json", by_alias=True, exclude={"created_at"})


_memory = _said


def _entity(entity: BaseModel) -> dict[str, Any]:
    keep = {"name", "type", "mention_count", "summary"}
    return entity.model_dump(mode="json", by_alias=True, include=keep)


def _session(session: Any) -> dict[str, Any]:
    return {"id": session.id, "title": session.title, "projectId": session.project_id}


def _says(content: str, query: str) -> bool:
    """Whether the episode itself holds every word of the query, each as a word ("cat" is
    not in "category"): keyword search also finds the turn after one (it is indexed with
    that turn's end), which is not what to forget."""
    text = content.casefold()
    words = [word for word in query.casefold().split() if len(word) > 1]
    return all(re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text) for word in words)


# Episodes a page when a forget reads a whole session, and ids an answer lists at most.
PAGE = 1000
LISTED = 1000


def _forgotten(ids: list[int], dry_run: bool, count: int | None = None) -> dict[str, Any]:
    """What a forget answers: how many went (or would go), and their ids, the first
    `LISTED` of them (`moreIds` says how many the list leaves out)."""
    count = len(ids) if count is None else count
    said = "wouldForget" if dry_run else "forgot"
    left_out = count - min(len(ids), LISTED)
    return {said: count, "episodeIds": ids[:LISTED], "moreIds": left_out or None}


DESCRIPTIONS = {
    "remember": "Store one or more messages in a conversation (made by name when new). A call"
    " with the same messages right after the first (nothing else stored in that"
    " conversation since) is taken as a retry of it and answers its ids without storing them"
    ' again: to store a message said twice in a row ("ok", "ok"), send both in one call.',
    "recall": "Memories relevant to a query from the conversation's project, best first: each"
    " with its text, date, fused score and its rank by meaning (semanticRank) and by keyword"
    " (keywordRank). Searches everything stored, the latest messages included. After the"
    " `limit` best come the user's standing memories (pinned ones, and the rules and"
    " preferences nearest the query), each marked `standing`.",
    "context": "What a chat turn with this message would give the LLM: recent turns, standing"
    " memories (pinned ones, and the user's rules and preferences nearest the message),"
    " memories (the recent turns are left out of them, as the prompt holds those) and"
    " entities.",
    "entities": "People, places and things the conversation's memory knows (q: by meaning,"
    " prefix: by name).",
    "forget": "Forget an episode, a whole session, the episodes of a conversation that say"
    " every word of a query, or those a filter keeps (a time window, speakers, metadata"
    " values). dry_run (the default) only lists the episodes that would go.",
    "pin": "Pin an episode (pinned: false unpins it): every turn of its project (or session)"
    " then carries it, among its standing memories, whatever the message.",
    "sessions": "List conversations (sessions), in a project or all; or create one"
    " (action: create, with a title).",
}


def build_server(client: ClientFor) -> MCPServer[Any]:
    """The MCP server; `client` gives the AsyncClient a tool call speaks through. Arguments
    are strict: an unknown one, or a value of the wrong type, is an error."""
    server: MCPServer[Any] = MCPServer(
        name="nexusai", instructions=INSTRUCTIONS, version=__version__
    )
    tools = Tools(client)
    for name, description in DESCRIPTIONS.items():
        server.tool(name=name, description=description)(getattr(tools, name))
        _make_strict(server._tool_manager.get_tool(name))
    return server


class _PlainErrors(Tool):
    """A tool whose refused arguments are one line per field, as the HTTP API says them
    (`messages[0].content: Field required`), not pydantic's dump with its links."""

    async def run(
        self, arguments: dict[str, Any], context: Any, convert_result: bool = False
    ) -> Any:
        try:
            return await super().run(arguments, context, convert_result)
        except ToolError as exc:
            refused = exc.__cause__
            if not isinstance(refused, ValidationError):
                raise
            fields = [refusal(e["loc"], e["msg"], located=False) for e in refused.errors()]
            said = "; ".join(f"{field}: {message}" for field, message in fields)
            raise ToolError(f"Error executing tool {self.name}: {said}") from refused


def _make_strict(tool: Any) -> None:
    """The SDK's argument model ignores unknown keys and coerces types (`true` became
    session 1): a subclass that forbids both, and the schema clients see says so."""
    loose = tool.fn_metadata.arg_model
    config = ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True)
    strict: type[BaseModel] = type(
        loose.__name__, (loose,), {"model_config": config, "__module__": __name__}
    )
    tool.fn_metadata.arg_model = strict
    tool.parameters = strict.model_json_schema(by_alias=True)
    tool.__class__ = _PlainErrors  # the same fields; its `run` words refusals plainly


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
