"""CLI commands that talk to a running service over HTTP (the embedded vector index belongs
to one process, the service's, so these never open the data directory themselves)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import click
import httpx
from rich.console import Console
from rich.table import Table

from nexusai.httpclient import bearer_client

console = Console()

URL = click.option(
    "--url",
    default=lambda: os.environ.get("NEXUS_URL", "http://127.0.0.1:4000"),
    show_default="NEXUS_URL or http://127.0.0.1:4000",
    help="Where the nexusai service listens",
)


class Service:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        key = os.environ.get("NEXUS_API_KEY", "").split(",")[0].strip()
        self.client = bearer_client(self.url, key or None, 120)

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def call(self, method: str, path: str, body: Any = None, params: Any = None) -> Any:
        try:
            response = self.client.request(method, path, json=body, params=params)
        except httpx.TransportError:
            raise click.ClickException(
                f"no nexusai service answers at {self.url}; start one with `nexus serve`"
            ) from None
        if response.status_code >= 400:
            raise click.ClickException(_detail(response))
        return response.json()

    def events(self, path: str, body: Any) -> Iterator[tuple[str, Any]]:
        try:
            with self.client.stream("POST", path, json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    raise click.ClickException(_detail(response))
                event = ""
                for line in response.iter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: "):
                        yield event, json.loads(line[6:])
        except httpx.TransportError:
            raise click.ClickException(f"lost the nexusai service at {self.url}") from None


def _detail(response: httpx.Response) -> str:
    try:
        return f"{response.status_code}: {response.json()['detail']}"
    except (ValueError, KeyError, TypeError):
        return f"{response.status_code}: {response.text[:200]}"


@click.group()
def settings() -> None:
    """Read or change the runtime retrieval settings."""


@settings.command("get")
@URL
def settings_get(url: str) -> None:
    """Print the settings."""
    with Service(url) as service:
        values = service.call("GET", "/settings")
    for name, value in values.items():
        click.echo(f"{name} = {value:g}")


@settings.command("set")
@click.argument("assignments", nargs=-1, required=True, metavar="NAME=VALUE...")
@URL
def settings_set(assignments: tuple[str, ...], url: str) -> None:
    """Change settings, e.g. `nexus settings set keywordWeight=1 semanticWeight=0.5`."""
    changes: dict[str, float] = {}
    for item in assignments:
        name, _, raw = item.partition("=")
        try:
            changes[name.strip()] = json.loads(raw)
        except ValueError:
            raise click.BadParameter(f"{item!r}: the value must be a number") from None
    with Service(url) as service:
        values = service.call("PATCH", "/settings", changes)
    for name, value in values.items():
        click.echo(f"{name} = {value:g}")


@click.command()
@click.option("--session", "session_id", type=int, required=True, help="Session id")
@click.option("--explain", is_flag=True, help="Show fused score and both ranks")
@click.argument("message")
@URL
def context(session_id: int, explain: bool, message: str, url: str) -> None:
    """Show the memories a message would bring into the prompt."""
    body = {"sessionId": session_id, "message": message, "explain": explain}
    with Service(url) as service:
        result = service.call("POST", "/context", body)
    table = Table(title=f"memories for: {message}", title_justify="left")
    for column in (
        ["#", "score", "semantic", "keyword", "date", "text"] if explain else ["#", "date", "text"]
    ):
        table.add_column(column, overflow="fold")
    for rank, memory in enumerate(result["memories"], start=1):
        text = f"{memory['speaker']}: {memory['content']}"
        cells = [str(rank), memory["occurredAt"][:10], text]
        if explain:
            ranks = [_rank(memory.get("semanticRank")), _rank(memory.get("keywordRank"))]
            cells = [str(rank), f"{memory['score']:.4f}", *ranks, *cells[1:]]
        table.add_row(*cells)
    console.print(table)
    console.print(f"{len(result['recent'])} recent turns, {len(result['entities'])} entities")
    for warning in result["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}")


def _rank(rank: int | None) -> str:
    return "-" if rank is None else str(rank)


@click.command()
@click.option("--session", "session_id", type=int, required=True, help="Session id")
@URL
def chat(session_id: int, url: str) -> None:
    """Chat in the terminal; an empty line or Ctrl-D ends it."""
    with Service(url) as service:
        _chat_loop(service, session_id)


def _chat_loop(service: Service, session_id: int) -> None:
    while True:
        try:
            message = click.prompt("you", prompt_suffix="> ", default="", show_default=False)
        except (EOFError, click.Abort):
            break
        if not message.strip():
            break
        click.echo("assistant> ", nl=False)
        for event, data in service.events(
            "/chat", {"sessionId": session_id, "message": message, "stream": True}
        ):
            if event == "delta":
                click.echo(data["text"], nl=False)
            elif event == "error":
                click.echo(f"\n[error] {data['detail']}", err=True)
            elif event == "done" and data.get("notice"):
                click.echo(data["notice"], nl=False)
        click.echo()


@click.command()
@click.option("--session", "session_id", type=int, required=True, help="Whose scope to search")
@click.option("--q", "query", default=None, help="Search by meaning")
@click.option("--prefix", default=None, help="Names starting with this")
@click.option("--limit", type=int, default=20, show_default=True)
@URL
def entities(session_id: int, query: str | None, prefix: str | None, limit: int, url: str) -> None:
    """The people, places and things a session's memory knows, most mentioned first."""
    params: dict[str, Any] = {"sessionId": session_id, "limit": limit}
    if query:
        params["q"] = query
    if prefix:
        params["prefix"] = prefix
    with Service(url) as service:
        found = service.call("GET", "/entities", params=params)
    table = Table(title=f"entities seen by session {session_id}", title_justify="left")
    for column in ["id", "name", "type", "mentions", "first seen", "last seen"]:
        table.add_column(column)
    for e in found:
        table.add_row(
            str(e["id"]),
            e["name"],
            e["type"],
            str(e["mentionCount"]),
            e["firstSeen"][:10],
            e["lastSeen"][:10],
        )
    console.print(table)
