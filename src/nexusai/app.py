"""Builds the ASGI app. Role `all` (the default) runs both services in one process with
in-process calls; `memory` and `orchestration` run one each, orchestration reaching memory
over HTTP at NEXUS_MEMORY_URL."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Literal

from fastapi import Depends, FastAPI, Request, Response
from pydantic import Field

from nexusai import __version__
from nexusai.config import Config
from nexusai.embedders import Embedder, create_embedder
from nexusai.errors import ConfigError, InvalidInput, NotReady
from nexusai.guard import Guard
from nexusai.http import errors, install_error_handlers, install_offline_docs, known_query_keys
from nexusai.idempotency import Replays
from nexusai.inspector import install_inspector
from nexusai.llm import OpenAIChat, create_llm
from nexusai.memory import api as memory_api
from nexusai.memory.keys import KeyStore
from nexusai.memory.service import Memory
from nexusai.observability import (
    AUTH_REFUSED,
    ENTITIES_PENDING,
    EPISODES,
    PENDING,
    RequestMetrics,
    render,
)
from nexusai.orchestration import api as orchestration_api
from nexusai.orchestration import openai_api
from nexusai.orchestration.http_memory import HttpMemoryClient
from nexusai.orchestration.service import Orchestration
from nexusai.orchestration.settings import SettingsStore
from nexusai.orchestration.warm import WARM_CHARS, WARM_TURNS, SessionMessage, warm_turns
from nexusai.ranking.model import Ranker, configured
from nexusai.schemas import CamelModel
from nexusai.warmup import Warmup

log = logging.getLogger("nexusai.app")
ORCHESTRATION_FILE = "orchestration.db"  # role orchestration's settings: its only state

Role = Literal["all", "memory", "orchestration"]
ROLES: tuple[Role, ...] = ("all", "memory", "orchestration")


def create_app(
    config: Config | None = None,
    embedder: Embedder | None = None,
    llm: OpenAIChat | None = None,
    role: Role = "all",
    memory: Memory | None = None,
    ranker: Ranker | None = None,
) -> FastAPI:
    """The app. `embedder` lets callers share one loaded model between apps (tests do);
    `llm` overrides the one NEXUS_LLM_* configures; `memory`, opened already (`nexus serve`
    opens it before it binds, to fail early), is owned and closed by the app; `ranker`,
    loaded already (`load_ranker`), saves loading it again."""
    config = config or Config.from_env()
    if role == "orchestration" and not config.memory_url:
        raise ConfigError("--role orchestration needs NEXUS_MEMORY_URL (the memory service)")
    ranker = ranker or (None if role == "memory" else load_ranker(config))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if role == "orchestration":
            assert ranker is not None
            async with _orchestration_only(app, config, embedder, llm, ranker):
                yield
            return
        async with (
            _with_memory(app, config, memory or Memory.open(config, embedder), llm, role, ranker),
            _mcp_sessions(app),
        ):
            yield

    app = FastAPI(
        title="nexusai" if role == "all" else f"nexusai {role} service",
        version=__version__,
        description="Long-term memory for chat assistants: episodes, hybrid retrieval, chat.",
        lifespan=lifespan,
        docs_url=None,  # served from local assets below, never from a CDN
        redoc_url=None,
        dependencies=[Depends(known_query_keys)],
    )
    app.state.config = config
    app.state.replays = Replays()  # the answers of writes a client may send again
    app.add_middleware(
        Guard,
        api_keys=config.api_keys,
        max_body_bytes=config.max_body_bytes,
        project_keys=lambda: getattr(app.state, "keys", None),
        on_refused=_refused,
    )
    app.add_middleware(RequestMetrics)  # outermost: refused requests count too
    install_error_handlers(app)
    install_offline_docs(app)
    app.add_api_route("/metrics", _metrics, tags=["service"], responses=errors())
    app.add_api_route("/ready", _ready, tags=["service"], responses=errors(503, open_route=True))
    if role in ("all", "memory"):
        app.include_router(memory_api.router)
    if role in ("all", "orchestration"):
        app.include_router(orchestration_api.router)
        app.include_router(openai_api.router)
    if role == "all":
        _mount_mcp(app, config)
        install_inspector(app)  # the page browses memory and asks orchestration: both here
    if role == "orchestration":
        app.add_api_route(
            "/health", _orchestration_health, tags=["service"], responses=errors(open_route=True)
        )
    return app


@asynccontextmanager
async def _mcp_sessions(app: FastAPI) -> AsyncIterator[None]:
    """The MCP transport's session manager runs while the app does."""
    server = getattr(app.state, "mcp", None)
    if server is None:
        yield
        return
    async with server.session_manager.run():
        yield


def _mount_mcp(app: FastAPI, config: Config) -> None:
    """MCP's streamable HTTP transport at /mcp: the MCP tools, speaking to this very app
    through an in-process ASGI transport with the caller's key (the same routes, the same
    key rule)."""
    import httpx

    from nexusai.client import AsyncClient
    from nexusai.mcp.tools import build_server, per_caller

    transport = httpx.ASGITransport(app=app)
    server = build_server(
        per_caller(lambda key: AsyncClient("http://nexusai", key, transport=transport))
    )
    app.mount("/mcp", server.streamable_http_app(streamable_http_path="/", host="0.0.0.0"))
    app.state.mcp = server


def _refused(reason: str, path: str) -> None:
    AUTH_REFUSED.labels(reason=reason).inc()
    log.warning("refused a request to %s: %s", path, reason)  # never the key


def _metrics(request: Request) -> Response:
    """Prometheus text: requests and latency per route, retrieval latency per leg,
    embedding latency, episodes stored, vectors pending, entity extraction's backlog."""
    memory: Memory | None = getattr(request.app.state, "memory", None)
    if memory is not None:
        EPISODES.set(memory.store.episodes.count())
        PENDING.set(memory.count_pending_vectors())
        ENTITIES_PENDING.set(memory.entities_pending())
    return Response(render(), media_type="text/plain; version=0.0.4")


def _orchestration_health() -> dict[str, str]:
    """Liveness: this process answers. Whether it can serve a turn is `/ready`."""
    return {"status": "ok", "role": "orchestration"}


class Readiness(CamelModel):
    status: Literal["ready"]
    embedder: str
    memory: str = Field(description="in-process, or the memory service's URL")
    pending_vectors: int | None = Field(description="Episodes waiting for vectors (memory)")


def _ready(request: Request) -> Readiness:
    """Readiness: the embedder is loaded and memory answers (503 naming what is not)."""
    state = request.app.state
    warmup: Warmup | None = getattr(state, "warmup", None)
    if warmup is not None and warmup.warming():
        raise NotReady(
            "reading the keyword index and the standing memories' vectors ahead of the"
            " turns (at most NEXUS_WARM_SECONDS); turns are served meanwhile, the first"
            " ones slower"
        )
    memory: Memory | None = getattr(state, "memory", None)
    if memory is not None:
        pending = memory.count_pending_vectors()
        return Readiness(
            status="ready",
            embedder=memory.embedder.name,
            memory="in-process",
            pending_vectors=pending,
        )
    orchestration: Orchestration = state.orchestration
    client = orchestration.memory
    assert isinstance(client, HttpMemoryClient)
    client.ping()  # MemoryUnavailable (503) when it does not answer
    return Readiness(
        status="ready",
        embedder=orchestration.embedder.name,
        memory=client.url,
        pending_vectors=None,
    )


def load_ranker(config: Config) -> Ranker:
    """The ranker NEXUS_RANKER names (or the shipped one); a ConfigError naming the file's
    fault, so that a bad NEXUS_RANKER stops the service before it opens anything."""
    try:
        return configured(config.ranker)
    except InvalidInput as exc:
        raise ConfigError(f"NEXUS_RANKER: {exc}") from None


def _settings_path(config: Config) -> Path:
    """In one process, orchestration keeps its settings in the SQLite store's file, as
    always; beside a PostgreSQL store, in a file of its own, as in role `orchestration`."""
    return config.data_dir / ORCHESTRATION_FILE if config.database_url else config.db_path


def _newest_messages(memory: Memory) -> list[SessionMessage]:
    """The newest session's newest messages, each cut to a message's usual length: what
    the warm turns ask (none in an empty store)."""
    sessions = memory.store.sessions.count()
    if not sessions:
        return []
    [newest] = memory.store.sessions.page(limit=1, offset=sessions - 1)
    recent = memory.recent_episodes(newest.id, WARM_TURNS)
    return [(newest.id, episode.content[:WARM_CHARS]) for episode in recent]


@asynccontextmanager
async def _with_memory(
    app: FastAPI,
    config: Config,
    memory: Memory,
    llm: OpenAIChat | None,
    role: Role,
    ranker: Ranker | None,
) -> AsyncIterator[None]:
    app.state.memory = memory
    app.state.keys = KeyStore(memory.store)
    settings = SettingsStore(_settings_path(config)) if role == "all" else None
    if settings is not None:
        assert ranker is not None
        app.state.orchestration = Orchestration(
            memory,
            memory.embedder,
            settings,
            llm or create_llm(config),
            ranker,
            config.llm_context_tokens,
        )
    memory.start()
    warmup = app.state.warmup = Warmup(config.warm_seconds)
    warmup.run("the keyword index", memory.store.warm)
    if settings is not None:
        warmup.run("the standing memories' vectors", app.state.orchestration.warm)
        asked = _newest_messages(memory)
        warmup.run("a turn's path", partial(warm_turns, app.state.orchestration, asked))
    try:
        yield
    finally:
        warmup.stop()
        memory.close()
        if settings is not None:
            settings.close()


@asynccontextmanager
async def _orchestration_only(
    app: FastAPI,
    config: Config,
    embedder: Embedder | None,
    llm: OpenAIChat | None,
    ranker: Ranker,
) -> AsyncIterator[None]:
    assert config.memory_url is not None
    # The memory service's key: its own setting, or the key this service accepts.
    key = config.memory_api_key or next(iter(config.api_keys), None)
    client = HttpMemoryClient(config.memory_url, key, config.memory_timeout)
    # Orchestration keeps only its settings (and the LLM): a small SQLite file of its own.
    settings = SettingsStore(config.data_dir / ORCHESTRATION_FILE)
    app.state.orchestration = Orchestration(
        client,
        embedder or create_embedder(config),
        settings,
        llm or create_llm(config),
        ranker,
        config.llm_context_tokens,
    )
    try:
        yield
    finally:
        client.close()
        settings.close()
