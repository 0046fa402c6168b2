"""`nexus mcp`: the MCP tools over stdio, against a running service or the embedded store
(the whole app in this process, behind an ASGI transport)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import click

from nexusai.client import AsyncClient
from nexusai.errors import NexusError


@click.command()
@click.option(
    "--url",
    envvar="NEXUS_URL",
    default=None,
    help="A running service to speak to (NEXUS_URL); without it, the embedded store",
)
@click.option("--api-key", envvar="NEXUS_API_KEY", default=None, help="NEXUS_API_KEY")
def mcp(url: str | None, api_key: str | None) -> None:
    """Serve the MCP tools over stdio (for assistants that launch it): against the service at
    --url when given, else against the embedded store in this process."""
    import asyncio

    from nexusai.config import Config
    from nexusai.observability import configure_logging

    # stdout is the protocol; stderr has the log, in the service's one format.
    configure_logging(Config.from_env().log_format)
    try:
        asyncio.run(_serve_mcp(url, api_key))
    except NexusError as exc:
        hint = "" if url else "; or point it at the running service: nexus mcp --url URL"
        raise click.ClickException(f"{exc}{hint}") from None


async def _serve_mcp(url: str | None, api_key: str | None) -> None:
    from contextlib import AsyncExitStack

    from nexusai.client import AsyncClient
    from nexusai.mcp.tools import build_server

    async with AsyncExitStack() as stack:
        if url:
            client = await stack.enter_async_context(AsyncClient(url, api_key))
        else:
            client = await stack.enter_async_context(embedded_client())
        await build_server(lambda _call: client).run_stdio_async()


@asynccontextmanager
async def embedded_client() -> AsyncIterator[AsyncClient]:
    """The whole service in this process (no server, no port), for `nexus mcp` when no
    NEXUS_URL is set: its app behind an ASGI transport, its start-up and shutdown run."""
    import httpx

    from nexusai.app import create_app
    from nexusai.config import Config
    from nexusai.memory.service import Memory
    from nexusai.warmup import long_lived

    config = Config.from_env()
    # Opened here, so a store another process holds is one clear error before any serving.
    with long_lived():
        app = create_app(config, memory=Memory.open(config))
    async with app.router.lifespan_context(app):
        key = next(iter(config.api_keys), None)
        transport = httpx.ASGITransport(app=app)
        async with AsyncClient("http://nexusai", key, transport=transport) as client:
            yield client
