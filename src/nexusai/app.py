"""Builds the ASGI app: both services' routers in one process, on one port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from nexusai import __version__
from nexusai.config import Config
from nexusai.http import install_error_handlers
from nexusai.memory import api as memory_api
from nexusai.memory.store import Store


def create_app(config: Config | None = None) -> FastAPI:
    config = config or Config.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = Store(config.db_path, max_content_bytes=config.max_content_bytes)
        app.state.store = store
        app.state.memory = store
        try:
            yield
        finally:
            store.close()

    app = FastAPI(
        title="nexusai",
        version=__version__,
        description="Long-term memory for chat assistants: episodes, hybrid retrieval, chat.",
        lifespan=lifespan,
    )
    app.state.config = config
    install_error_handlers(app)
    app.include_router(memory_api.router)
    return app
