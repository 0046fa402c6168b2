"""Builds the ASGI app: both services' routers in one process, on one port."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from nexusai import __version__
from nexusai.config import Config
from nexusai.embedders import Embedder
from nexusai.http import install_error_handlers
from nexusai.memory import api as memory_api
from nexusai.memory.service import Memory
from nexusai.orchestration import api as orchestration_api
from nexusai.orchestration.llm import OpenAIChat, create_llm
from nexusai.orchestration.service import Orchestration
from nexusai.orchestration.settings import SettingsStore

log = logging.getLogger("nexusai.app")


def create_app(
    config: Config | None = None,
    embedder: Embedder | None = None,
    llm: OpenAIChat | None = None,
) -> FastAPI:
    """The app. `embedder` lets callers share one loaded model between apps (tests do);
    `llm` overrides the one NEXUS_LLM_* configures."""
    config = config or Config.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        memory = Memory.open(config, embedder)
        app.state.memory = memory
        app.state.store = memory.store
        app.state.orchestration = Orchestration(
            memory, memory.embedder, SettingsStore(memory.store), llm or create_llm(config)
        )
        # Episodes stored before a crash or an embedder outage get their vectors now,
        # without holding up start-up.
        repair = threading.Thread(target=_repair_vectors, args=(memory,), daemon=True)
        repair.start()
        try:
            yield
        finally:
            memory.stopping.set()
            repair.join()
            memory.close()

    app = FastAPI(
        title="nexusai",
        version=__version__,
        description="Long-term memory for chat assistants: episodes, hybrid retrieval, chat.",
        lifespan=lifespan,
    )
    app.state.config = config
    install_error_handlers(app)
    app.include_router(memory_api.router)
    app.include_router(orchestration_api.router)
    return app


def _repair_vectors(memory: Memory) -> None:
    indexed = memory.sync_pending()
    if indexed:
        log.info("indexed %d episodes that were waiting for vectors", indexed)
