"""The `nexus` command: thin wrappers over the library that turn domain errors into
clean messages."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from nexusai import client_cli
from nexusai.errors import NexusError

F = TypeVar("F", bound=Callable[..., Any])


def clean_errors(fn: F) -> F:
    """A domain error becomes one line on stderr and exit status 1, not a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except NexusError as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper  # type: ignore[return-value]


DATA_DIR = click.option(
    "--data-dir", type=click.Path(path_type=Path), default=None, help="NEXUS_DATA_DIR"
)


@click.group()
@click.version_option(package_name="nexusai")
def cli() -> None:
    """nexusai: long-term memory for chat assistants."""


@cli.command()
@click.option("--host", default=None, help="Address to bind (default 127.0.0.1, NEXUS_HOST)")
@click.option("--port", type=int, default=None, help="Port (default 4000, NEXUS_PORT)")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None, help="NEXUS_DATA_DIR")
@clean_errors
def serve(host: str | None, port: int | None, data_dir: Path | None) -> None:
    """Start the HTTP service (OpenAPI docs at /docs)."""
    import uvicorn

    from nexusai.app import create_app
    from nexusai.config import Config

    config = Config.from_env(host=host, port=port, data_dir=data_dir)
    click.echo(
        f"nexusai on http://{config.host}:{config.port} (docs at /docs), data in {config.data_dir}",
        err=True,
    )
    uvicorn.run(create_app(config), host=config.host, port=config.port, log_level="info")


@cli.command()
@DATA_DIR
@clean_errors
def reindex(data_dir: Path | None) -> None:
    """Rebuild every vector from SQLite with the configured embedder.

    Run it after changing NEXUS_EMBEDDER, or to repair the vector index. Stop the service
    first: the embedded vector index belongs to one process at a time.
    """
    from rich.progress import Progress

    from nexusai.config import Config
    from nexusai.memory.service import Memory

    config = Config.from_env(data_dir=data_dir)
    memory = Memory.open(config, check=False)
    try:
        total = memory.store.count_episodes()
        with Progress(transient=False) as bar:
            task = bar.add_task(f"embedding with {memory.embedder.name}", total=total)
            done = memory.reindex(progress=lambda n: bar.advance(task, n))
        left = memory.store.count_pending_vectors()
        click.echo("building the HNSW search index...", err=True)
        # Blocks the whole process for a while, so it never runs inside the service.
        memory.vectors.optimize()
    finally:
        memory.close()
    if left:
        raise click.ClickException(f"{left} episodes are still without vectors; run it again")
    click.echo(f"rebuilt {done} vectors")


cli.add_command(client_cli.settings)
cli.add_command(client_cli.context)
cli.add_command(client_cli.chat)


def main() -> None:
    cli(prog_name="nexus")


if __name__ == "__main__":
    main()
