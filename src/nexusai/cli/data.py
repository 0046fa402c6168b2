"""Commands on the data directory: they open the store (and the embedded vector index)
themselves, so the ones that write refuse a directory a running service holds."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from nexusai.cli.common import DATA_DIR, StartError, clean_errors, require_extra
from nexusai.errors import ConfigError, InvalidInput, NexusError
from nexusai.memory.importing import ImportSummary

if TYPE_CHECKING:
    from fastapi import FastAPI

    from nexusai.config import Config
    from nexusai.memory.service import Memory

log = logging.getLogger("nexusai.serve")


# With --url: the key of the service a command speaks to instead of the data directory.
URL_API_KEY = click.option(
    "--api-key",
    envvar="NEXUS_API_KEY",
    default=None,
    show_envvar=True,
    help="With --url: the service's API key, when it has one",
)


@click.command()
@click.option("--host", default=None, help="Address to bind (default 127.0.0.1, NEXUS_HOST)")
@click.option("--port", type=int, default=None, help="Port (default 4000, NEXUS_PORT)")
@DATA_DIR
@click.option(
    "--role",
    type=click.Choice(["all", "memory", "orchestration"]),
    default="all",
    show_default=True,
    help="Both services in one process, or one of them (orchestration needs NEXUS_MEMORY_URL)",
)
def serve(host: str | None, port: int | None, data_dir: Path | None, role: str) -> None:
    """Start the HTTP service (OpenAPI docs at /docs).

    Everything that can be wrong at start (a setting, the port, the embedder, a server it
    needs) is checked before it binds, and said in one line with exit status 2.
    """
    import uvicorn

    from nexusai.config import Config
    from nexusai.observability import configure_logging
    from nexusai.warmup import long_lived

    try:
        config = Config.from_env(host=host, port=port, data_dir=data_dir)
        configure_logging(config.log_format)
        _warn_if_open(config)
        _check_port_free(config.host, config.port)
        with long_lived():  # what loads now is never scanned by the collector again
            app = _prepared_app(config, role)
    except NexusError as exc:
        raise StartError(str(exc)) from None
    where = f"http://{config.host}:{config.port}"
    log.info("nexusai (%s) on %s (docs at /docs), %s", role, where, _data_in(config))
    # log_config None: uvicorn's lines go through configure_logging's one format.
    uvicorn.run(app, host=config.host, port=config.port, log_level="info", log_config=None)


def _warn_if_open(config: Config) -> None:
    if config.host not in ("127.0.0.1", "localhost", "::1") and not config.api_keys:
        log.warning(
            "listening on %s with no NEXUS_API_KEY: anyone who can reach this address can"
            " read and change every stored conversation.",
            config.host,
        )


def _check_port_free(host: str, port: int) -> None:
    """Before the models load: a busy port should fail at once, not after."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except socket.gaierror as exc:  # a name no resolver knows, or a malformed address
            raise ConfigError(
                f"cannot listen on {host!r} ({exc.strerror}): give an address of this machine"
                " (127.0.0.1, 0.0.0.0, ::1) or a name it resolves (--host or NEXUS_HOST)"
            ) from None
        except OSError as exc:
            if exc.errno == errno.EADDRNOTAVAIL:
                raise ConfigError(
                    f"cannot listen on {host}:{port} ({exc.strerror}): {host} is no address of"
                    " this machine; give one of its own (--host or NEXUS_HOST)"
                ) from None
            raise ConfigError(
                f"cannot listen on {host}:{port} ({exc.strerror}): another program holds it;"
                " stop it or choose another port (--port or NEXUS_PORT)"
            ) from None


def _prepared_app(config: Config, role: str) -> FastAPI:
    """The app with its embedder and memory opened now, so their errors come before the
    banner, not from inside the server's start-up."""
    from nexusai.app import Role, create_app, load_ranker
    from nexusai.embedders import create_embedder
    from nexusai.memory.service import Memory

    ranker = None if role == "memory" else load_ranker(config)  # before anything is opened
    embedder = create_embedder(config)
    memory = None if role == "orchestration" else Memory.open(config, embedder)
    return create_app(config, embedder, role=cast("Role", role), memory=memory, ranker=ranker)


def _data_in(config: Config) -> str:
    if config.database_url:
        from nexusai.memory.postgres.store import redacted

        return f"store in {redacted(config.database_url)}, files in {config.data_dir}"
    return f"data in {config.data_dir}"


@click.command()
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

    config = _existing_store(Config.from_env(data_dir=data_dir))
    memory = Memory.open(config, check=False)
    try:
        total = memory.store.episodes.count()
        with Progress(transient=False) as bar:
            task = bar.add_task(f"embedding with {memory.embedder.name}", total=total)
            done = memory.reindex(progress=lambda n: bar.advance(task, n))
        left = memory.count_pending_vectors()
        click.echo("building the HNSW search index...", err=True)
        # Blocks the whole process for a while, so it never runs inside the service.
        memory.vectors.optimize()
    finally:
        memory.close()
    if left:
        raise click.ClickException(f"{left} episodes are still without vectors; run it again")
    click.echo(f"rebuilt {done} vectors")


def _existing_store(config: Config) -> Config:
    """Commands that check or rebuild a store refuse a data directory that holds none (a
    typo would otherwise make an empty store and find it healthy)."""
    if not config.database_url and not config.db_path.exists():
        raise InvalidInput(
            f"there is no nexusai store in {config.data_dir} (no {config.db_path.name});"
            " check --data-dir or NEXUS_DATA_DIR"
        )
    return config


@click.command()
@click.option("--repair", is_flag=True, help="Fix what it finds")
@DATA_DIR
@clean_errors
def doctor(repair: bool, data_dir: Path | None) -> None:
    """Check that SQLite, the FTS5 index and the vector index agree (service stopped)."""
    from nexusai.config import Config
    from nexusai.memory import upkeep
    from nexusai.memory.service import Memory

    # Opened without reconciling: the report says what it found, before anything changes.
    memory = Memory.open(_existing_store(Config.from_env(data_dir=data_dir)), reconcile=False)
    try:
        found = upkeep.check(memory)
        for line in found.lines():
            click.echo(line)
        if repair and not found.healthy:
            upkeep.repair(memory, found)
            click.echo(
                "repaired: " + ("healthy" if upkeep.check(memory).healthy else "NOT healthy")
            )
    finally:
        memory.close()
    if not found.healthy and not repair:
        raise click.ClickException("drift found; run `nexus doctor --repair` to fix it")


@click.command()
@click.argument("destination", type=click.Path(path_type=Path))
@DATA_DIR
@clean_errors
def backup(destination: Path, data_dir: Path | None) -> None:
    """A consistent copy of the store, safe while the service runs (vectors are rebuilt on
    restore)."""
    from nexusai.config import Config
    from nexusai.memory import upkeep

    size = upkeep.backup(Config.from_env(data_dir=data_dir), destination)
    click.echo(f"backed up to {destination} ({size:,} bytes)")


@click.command()
@click.argument("source", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@DATA_DIR
@clean_errors
def restore(source: Path, data_dir: Path | None) -> None:
    """Restore a backup into an empty data directory and rebuild its vectors."""
    from rich.progress import Progress

    from nexusai.config import Config
    from nexusai.memory import upkeep

    with Progress() as bar:
        task = bar.add_task("rebuilding vectors", total=None)
        count = upkeep.restore(
            Config.from_env(data_dir=data_dir), source, lambda n: bar.advance(task, n)
        )
    click.echo(f"restored {count} episodes")


@click.command()
@click.option("--to", "url", required=True, help="postgresql://user:password@host:port/dbname")
@click.option("--no-vectors", is_flag=True, help="Leave the vectors to the service's start")
@DATA_DIR
@clean_errors
def migrate(url: str, no_vectors: bool, data_dir: Path | None) -> None:
    """Copy the SQLite store into PostgreSQL, then rebuild its vectors there (pgvector).

    Resumable: run it again after a stop. Stop the service first. Counts every table on
    both sides at the end.
    """
    require_extra("psycopg", "postgresql", "nexus migrate --to")
    from rich.progress import Progress

    from nexusai.config import Config
    from nexusai.memory.postgres import transfer
    from nexusai.memory.postgres.store import PgStore
    from nexusai.memory.service import Memory
    from nexusai.memory.sqlite.store import SqliteStore

    source_config = Config.from_env(data_dir=data_dir)
    target_config = Config.from_env(data_dir=data_dir, database_url=url)
    if not source_config.db_path.exists():
        raise click.ClickException(f"there is no SQLite store at {source_config.db_path}")
    with SqliteStore(source_config.db_path) as source, PgStore(url) as target:
        with Progress() as bar:
            tasks = {
                name: bar.add_task(f"copying {name}", total=rows)
                for name, rows in transfer.plan(source).items()
            }
            transfer.copy_store(source, target, lambda name, n: bar.advance(tasks[name], n))
        counts = transfer.compare_counts(source, target)
        where = target.describe()
    for name, there, here in counts:
        click.echo(f"{name:16} {there:>10,} {here:>10,} {'ok' if there == here else 'DIFFERS'}")
    if any(there != here for _, there, here in counts):
        raise click.ClickException("the counts differ; run the command again to resume")
    if not no_vectors:
        memory = Memory.open(target_config)
        try:
            with Progress() as bar:
                task = bar.add_task("making vectors", total=memory.count_pending_vectors())
                memory.sync_pending(progress=lambda n: bar.advance(task, n))
            memory.entities.sync()
        finally:
            memory.close()
    click.echo(f"migrated to {where}" + (" (vectors left pending)" if no_vectors else ""))


@click.group()
def keys() -> None:
    """Project API keys: each sees one project (NEXUS_API_KEY stays the admin key)."""


@contextmanager
def _key_store(data_dir: Path | None) -> Iterator[Any]:
    from nexusai.config import Config
    from nexusai.memory.keys import KeyStore
    from nexusai.memory.service import open_store

    with open_store(Config.from_env(data_dir=data_dir)) as store:
        yield KeyStore(store)


@keys.command(name="create")
@click.option("--project", required=True, help="The project's name (it must exist)")
@click.option("--read-only", is_flag=True, help="Reads only: no writes of any kind")
@click.option("--name", "label", default=None, help="A label to know it by in `keys list`")
@click.option(
    "--force",
    is_flag=True,
    help="Make it without NEXUS_API_KEY set: then no key sees settings, metrics or other projects",
)
@DATA_DIR
@clean_errors
def keys_create(
    project: str, read_only: bool, label: str | None, force: bool, data_dir: Path | None
) -> None:
    """Make a key and print it, once: only its hash is stored. From then on every request
    needs a key, so an admin key (NEXUS_API_KEY) must be set first."""
    from nexusai.config import Config

    if not Config.from_env(data_dir=data_dir).api_keys and not force:
        raise click.UsageError(
            "NEXUS_API_KEY is not set: once a project key exists, every request needs a key,"
            " and without an admin key nobody could change settings, read metrics or reach"
            " other projects. Set NEXUS_API_KEY (for this command and the service), or pass"
            " --force"
        )
    with _key_store(data_dir) as store:
        key = store.create(project, read_only, label)
    click.echo(key)


@keys.command(name="list")
@DATA_DIR
@clean_errors
def keys_list(data_dir: Path | None) -> None:
    """Every key: id, project, access, label, when made, when revoked (never the key)."""
    with _key_store(data_dir) as store:
        made = store.list()
    if not made:
        click.echo("no keys: nexus keys create --project NAME", err=True)
    for key in made:
        access = "read-only" if key.read_only else "read-write"
        state = f"revoked {key.revoked_at}" if key.revoked_at else "active"
        label = key.name or "-"
        click.echo(f"{key.id}\t{key.project_name}\t{access}\t{label}\t{key.created_at}\t{state}")


@keys.command(name="revoke")
@click.argument("key_id", type=int)
@DATA_DIR
@clean_errors
def keys_revoke(key_id: int, data_dir: Path | None) -> None:
    """Revoke a key by its id (`keys list`): refused from the next request on."""
    with _key_store(data_dir) as store:
        store.revoke(key_id)
    click.echo(f"revoked key {key_id}")


@click.command(name="import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["locomo", "chatgpt", "jsonl"]),
    default=None,
    help="What the file holds (default: jsonl for .jsonl, else told by its first record)",
)
@click.option("--project", default=None, help="Put the imported sessions in this project")
@click.option(
    "--entities",
    type=click.Choice(["later", "wait"]),
    default="later",
    show_default=True,
    help="Extract entities when the service runs, leaving every core to the embedding"
    " (later), or here, behind the import, waiting for the last one (wait)",
)
@click.option(
    "--url",
    default=None,
    help="Send the file to the service running there (POST /import) instead of writing the"
    " data directory: for a directory a running service holds",
)
@URL_API_KEY
@DATA_DIR
@clean_errors
def import_command(
    file: Path,
    fmt: str | None,
    project: str | None,
    entities: str,
    url: str | None,
    api_key: str | None,
    data_dir: Path | None,
) -> None:
    """Import conversations from a file: into the data directory (service stopped), or,
    with --url, through the running service.

    Formats: a LoCoMo JSON file, a ChatGPT export (conversations.json), or JSONL of one
    episode a line. The file is read through once before anything is written, so a bad
    record stops the import with nothing stored. The episodes are searchable when the
    import says so; their entities are extracted by the service (later) or behind the
    import, which then waits for them (wait; a service extracts behind itself).
    """
    from nexusai.memory.importing import detect_format

    if fmt is None:
        with file.open("rb") as peek:
            fmt = detect_format(file.name, peek)
    if url is not None:
        _import_over_http(file, fmt, project, url, api_key)
    else:
        _import_here(file, fmt, project, entities, data_dir)


def _import_over_http(
    file: Path, fmt: str, project: str | None, url: str, api_key: str | None
) -> None:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

    from nexusai.cli.remote import Service

    columns = (TextColumn("sending"), BarColumn(), DownloadColumn())
    with Service(url, api_key) as service, file.open("rb") as stream, Progress(*columns) as bar:
        task = bar.add_task("sending", total=file.stat().st_size)
        with service.errors():
            summary = service.client.import_file(
                stream, fmt, project, lambda sent: bar.update(task, completed=sent)
            )
    click.echo(
        f"{summary.conversations} conversations, {summary.sessions} new sessions,"
        f" {summary.episodes} episodes, {summary.skipped} skipped, in {summary.seconds:.1f} s;"
        " the service extracts their entities behind itself"
    )


def _import_here(
    file: Path, fmt: str, project: str | None, entities: str, data_dir: Path | None
) -> None:
    import threading

    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

    from nexusai.config import Config
    from nexusai.memory.importing import import_stream
    from nexusai.memory.service import Memory

    memory = Memory.open(Config.from_env(data_dir=data_dir))
    # Extraction behind the import, niced as it is, still took a tenth of the embedding's
    # rate on two cores (benchmarks import-short), so only a command that waits for the
    # entities anyway runs it.
    behind = threading.Thread(target=memory.extract_behind, daemon=True)  # as the service
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn())
    try:
        if entities == "wait":
            behind.start()  # an unstarted thread is never alive: the join below skips it
        with file.open("rb") as stream, Progress(*columns) as bar:
            task = bar.add_task("importing", total=file.stat().st_size)

            def advance(summary: ImportSummary) -> None:
                label = f"{summary.conversations} conversations, {summary.episodes} episodes"
                bar.update(task, completed=stream.tell(), description=label)

            summary = import_stream(memory, stream, fmt, project, advance)
            bar.update(task, completed=file.stat().st_size)
        rate = summary.episodes / summary.seconds if summary.seconds else 0.0
        click.echo(
            f"{summary.conversations} conversations, {summary.sessions} new sessions,"
            f" {summary.episodes} episodes, {summary.skipped} skipped: searchable after"
            f" {summary.seconds:.1f} s ({rate:,.0f} episodes/s)"
        )
        if entities == "wait":
            _extract_entities(memory)
    finally:
        memory.stop()  # the extraction behind ends after its batch
        if behind.is_alive():
            behind.join()
        left = memory.entities_pending()
        memory.close()
    if left:
        click.echo(
            f"{left} episodes wait for entity extraction: the service extracts them when it"
            " runs (nexus serve), or import with --entities wait"
        )


def _extract_entities(memory: Memory) -> None:
    """Waits, with a bar, for the extraction behind the import to finish what is left."""
    import time

    from rich.progress import Progress

    waiting = memory.entities_pending()
    if waiting:
        with Progress() as bar:
            task = bar.add_task("extracting entities", total=waiting)
            while left := memory.entities_pending():
                bar.update(task, completed=waiting - left)
                memory.extraction_due.set()
                time.sleep(0.2)
            bar.update(task, completed=waiting)


@click.command(name="export")
@click.option("--project", required=True, help="The project's name")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write here (default: standard output)",
)
@click.option(
    "--url",
    default=None,
    help="Export from the service running there (GET /projects/ID/export) instead of"
    " reading the data directory: a service on another machine, or on PostgreSQL",
)
@URL_API_KEY
@DATA_DIR
@clean_errors
def export_command(
    project: str, out: Path | None, url: str | None, api_key: str | None, data_dir: Path | None
) -> None:
    """Write a project's episodes as JSONL, in the format `nexus import` reads: the
    project's name and retention, then ids, sessions, speakers, dates, metadata, captions,
    pins and expiry. The service may keep running."""
    from nexusai.config import Config
    from nexusai.memory.export import named_project, project_lines
    from nexusai.memory.service import open_store

    if out is not None and not out.resolve().parent.is_dir():
        raise click.BadParameter(f"the folder {out.parent} does not exist", param_hint="--out")
    if url is not None:
        return _export_over_http(project, out, url, api_key)
    config = _existing_store(Config.from_env(data_dir=data_dir))
    with open_store(config) as store:
        lines = project_lines(store, named_project(store, project))
        count = _write_lines(lines, sys.stdout) if out is None else _write_file(lines, out)
    click.echo(f"{count} episodes of project {project!r} exported", err=True)


def _export_over_http(project: str, out: Path | None, url: str, api_key: str | None) -> None:
    """The export the running service gives, written as a local export is."""
    import json

    from nexusai.cli.remote import Service, project_id_of
    from nexusai.client import Endpoints

    with Service(url, api_key) as service:
        text = service(Endpoints.export_project(project_id_of(service, project)))
    lines = (json.loads(line) for line in text.splitlines() if line.strip())
    count = _write_lines(lines, sys.stdout) if out is None else _write_file(lines, out)
    click.echo(f"{count} episodes of project {project!r} exported from {url}", err=True)


def _write_file(lines: Iterator[dict[str, Any]], out: Path) -> int:
    """Written whole or not at all, for its owner alone; a device or FIFO in place."""
    from nexusai.files import written_whole

    with written_whole(out) as stream:
        return _write_lines(lines, stream)


def _write_lines(lines: Iterator[dict[str, Any]], stream: Any) -> int:
    """Writes the lines; returns how many were episodes."""
    from nexusai.memory.export import as_jsonl

    count = 0
    for line in lines:
        stream.write(as_jsonl(line))
        count += "content" in line
    return count
