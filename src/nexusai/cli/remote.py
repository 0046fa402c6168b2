"""CLI commands that talk to a running service over HTTP (the embedded vector index belongs
to one process, the service's, so these never open the data directory themselves)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from nexusai.client import (
    Call,
    ChatEvent,
    Client,
    Endpoints,
    NexusAPIError,
    UnavailableError,
    default_url,
)
from nexusai.models import parse_time
from nexusai.refusals import refusal
from nexusai.schemas import FilterIn

console = Console()

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def service_options(fn: F) -> F:
    """--url and --api-key, read from NEXUS_URL and NEXUS_API_KEY when not given."""
    fn = click.option(
        "--api-key",
        envvar="NEXUS_API_KEY",
        default=None,
        show_envvar=True,
        help="The service's API key, when it has one (the first, if the variable lists several)",
    )(fn)
    return click.option(
        "--url",
        envvar="NEXUS_URL",
        default=default_url,
        show_default="http://127.0.0.1:4000, or the port NEXUS_PORT names",
        show_envvar=True,
        help="Where the nexusai service listens",
    )(fn)


class Service:
    """The typed client (`nexusai.client`), with its errors turned into one-line CLI
    messages."""

    def __init__(self, url: str, api_key: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.client = Client(self.url, api_key, timeout=120)

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def __call__(self, call: Call[T]) -> T:
        with self.errors():
            return self.client.send(call)

    def events(self, session_id: int, message: str) -> Iterator[ChatEvent]:
        with self.errors():
            yield from self.client.chat_stream(session_id, message)

    @contextmanager
    def errors(self) -> Iterator[None]:
        """The client's errors as one-line CLI messages."""
        try:
            yield
        except UnavailableError as exc:
            if exc.status:
                raise click.ClickException(f"{exc.status}: {exc.detail}") from None
            raise click.ClickException(
                f"no nexusai service answers at {self.url}; start one with `nexus serve`,"
                " or point --url (NEXUS_URL) at it"
            ) from None
        except NexusAPIError as exc:
            raise click.ClickException(f"{exc.status}: {exc.detail}") from None


def _json(value: Any) -> Any:
    """An answer as the API wrote it (camelCase), for printing or --json."""
    if isinstance(value, list):
        return [_json(v) for v in value]
    return value.model_dump(mode="json", by_alias=True) if hasattr(value, "model_dump") else value


@click.group()
def settings() -> None:
    """Read or change the runtime retrieval settings."""


@settings.command("get")
@service_options
def settings_get(url: str, api_key: str | None) -> None:
    """Print the settings."""
    with Service(url, api_key) as service:
        values = service(Endpoints.get_settings())
    _echo_settings(values)


def _echo_settings(values: dict[str, int | float | str]) -> None:
    for name, value in values.items():
        click.echo(f"{name} = {value if isinstance(value, str) else format(value, 'g')}")


@settings.command("set")
@click.argument("assignments", nargs=-1, required=True, metavar="NAME=VALUE...")
@service_options
def settings_set(assignments: tuple[str, ...], url: str, api_key: str | None) -> None:
    """Change settings, e.g. `nexus settings set keywordWeight=1 fusion=learned`."""
    changes: dict[str, float | str] = {}
    for item in assignments:
        name, equals, raw = item.partition("=")
        if not equals or not name.strip():
            raise click.BadParameter(f"{item!r}: write NAME=VALUE, e.g. keywordWeight=1")
        try:
            changes[name.strip()] = json.loads(raw)
        except ValueError:  # a word, such as fusion=learned: the service checks it
            changes[name.strip()] = raw.strip()
    with Service(url, api_key) as service:
        values = service(Endpoints.update_settings(**changes))
    _echo_settings(values)


def filter_options(fn: F) -> F:
    """--after, --before, --speaker and --metadata: a filter, as every face takes it."""
    for option in reversed(
        [
            click.option("--after", default=None, help="Said at or after this time (ISO 8601)"),
            click.option("--before", default=None, help="Said before this time (ISO 8601)"),
            click.option(
                "--speaker",
                "speakers",
                multiple=True,
                help="Said by this speaker (repeat for one of several)",
            ),
            click.option(
                "--metadata",
                "pairs",
                multiple=True,
                help="KEY=VALUE: with this metadata value (repeat)",
            ),
        ]
    ):
        fn = option(fn)
    return fn


def filter_of(
    after: str | None, before: str | None, speakers: tuple[str, ...], pairs: tuple[str, ...]
) -> FilterIn | None:
    """The options' filter, checked here (a UsageError naming the option), or None."""
    metadata: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--metadata {pair!r}: write KEY=VALUE, e.g. topic=travel")
        metadata.setdefault(key, []).append(value)
    rule = {"after": after, "before": before, "speaker": list(speakers) or None}
    if not any(rule.values()) and not metadata:
        return None
    try:
        return FilterIn.model_validate({**rule, "metadata": metadata or None})
    except ValueError as exc:  # a date that is none, or a window that ends before it starts
        raise click.UsageError(_first_line(exc)) from None


@click.command()
@click.option("--session", "session_id", type=int, required=True, help="Session id")
@click.option("--explain", is_flag=True, help="Show fused score and both ranks")
@click.option(
    "--budget",
    type=click.IntRange(0, 32_000),
    default=None,
    help="Tokens the memories may cost in all (contextBudget for this turn)",
)
@click.option(
    "--now", default=None, help="The turn's own time (ISO 8601), for a time the message names"
)
@click.option(
    "--prompt",
    "as_prompt",
    is_flag=True,
    help="Print the memories as the chat prompt gives them to the LLM, and nothing else",
)
@filter_options
@click.argument("message")
@service_options
def context(
    session_id: int,
    explain: bool,
    budget: int | None,
    now: str | None,
    as_prompt: bool,
    message: str,
    url: str,
    api_key: str | None,
    **rule: Any,
) -> None:
    """Show the memories a message would bring into the prompt; a budget, a filter and the
    turn's time as POST /context takes them."""
    try:
        when = None if now is None else parse_time(now)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--now") from None
    asked = Endpoints.context(
        session_id, message, explain, budget=budget, filter=filter_of(**rule), now=when
    )
    with Service(url, api_key) as service:
        result = _json(service(asked))
    if as_prompt:
        click.echo(result["prompt"])
        return
    learned = any(memory.get("placedBy") for memory in result["memories"])
    console.print(_memories_table(message, result["memories"], explain, learned))
    if learned:
        console.print(
            "score: the learned ranker's chance that a memory answers the message; every"
            " third place goes to RRF (1, 1)'s best ('placed by rrf'), so scores need not fall"
        )
    for kept in result.get("standing") or []:
        why = "pinned" if kept["pinned"] else kept["standing"]
        console.print(f"standing ({why}): {kept['speaker']}: {kept['content']}")
    console.print(f"{len(result['recent'])} recent turns, {len(result['entities'])} entities")
    if result.get("budget"):
        console.print(f"{result['tokens']} of {result['budget']} tokens used")
    for warning in result["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}")


def _memories_table(
    message: str, memories: list[dict[str, Any]], explain: bool, learned: bool
) -> Table:
    table = Table(title=f"memories for: {message}", title_justify="left")
    columns = (
        ["#", "score", "semantic", "keyword", "date", "text"] if explain else ["#", "date", "text"]
    )
    columns += ["placed by", "moved most (effect in log-odds)"] if learned else []
    for column in columns:
        table.add_column(column, overflow="fold")
    for rank, memory in enumerate(memories, start=1):
        said = escape(f"{memory['speaker']}: {_shown(memory)}")  # a "[...]" in it is text
        cells = [str(rank), memory["occurredAt"][:10], said]
        if explain:
            ranks = [_rank(memory.get("semanticRank")), _rank(memory.get("keywordRank"))]
            cells = [str(rank), _score(memory), *ranks, *cells[1:]]
        if learned:
            moved = memory.get("features") or []
            cells.append(memory.get("placedBy") or "")
            cells.append(", ".join(f"{m['feature']} {m['effect']:+.2f}" for m in moved))
        table.add_row(*cells)
    return table


def _shown(memory: dict[str, Any]) -> str:
    """A memory's text, an excerpt marked as one: where it was cut, and of how much."""
    cut = memory.get("excerpt")
    if not cut:
        return str(memory["content"])
    opens = "… " if cut["start"] > 0 else ""
    closes = " …" if cut["end"] < cut["length"] else ""
    where = f"[excerpt: characters {cut['start']}-{cut['end']} of {cut['length']}]"
    return f"{opens}{memory['content']}{closes} {where}"


def _score(memory: dict[str, Any]) -> str:
    """A learned turn's probability as a percentage, or RRF's fused score."""
    if memory.get("probability") is not None:
        return f"{memory['probability']:.0%}"
    return f"{memory['score']:.4f}"


def _rank(rank: int | None) -> str:
    return "-" if rank is None else str(rank)


@click.command()
@click.option("--session", "session_id", type=int, required=True, help="Session id")
@service_options
def chat(session_id: int, url: str, api_key: str | None) -> None:
    """Chat in the terminal; an empty line or Ctrl-D ends it."""
    with Service(url, api_key) as service:
        service(Endpoints.get_session(session_id))  # an unknown session fails before input
        failed = _chat_loop(service, session_id)
    if failed:
        raise click.ClickException(f"{failed} turns failed (the LLM); your messages are stored")


def _chat_loop(service: Service, session_id: int) -> int:
    """Turns until an empty line or the end of input; returns how many failed."""
    failed = 0
    while True:
        try:
            message = click.prompt("you", prompt_suffix="> ", default="", show_default=False)
        except (EOFError, click.Abort):
            break
        if not message.strip():
            break
        click.echo("assistant> ", nl=False)
        for turn in service.events(session_id, message):
            if turn.event == "delta":
                click.echo(turn.data["text"], nl=False)
            elif turn.event == "error":
                failed += 1
                click.echo(f"\n[error] {turn.data['detail']}", err=True)
        click.echo()
    return failed


@click.command()
@click.option("--session", "session_id", type=int, required=True, help="Whose scope to search")
@click.option("--q", "query", default=None, help="Search by meaning")
@click.option("--prefix", default=None, help="Names starting with this")
@click.option("--limit", type=int, default=20, show_default=True)
@service_options
def entities(
    session_id: int,
    query: str | None,
    prefix: str | None,
    limit: int,
    url: str,
    api_key: str | None,
) -> None:
    """The people, places and things a session's memory knows, most mentioned first."""
    with Service(url, api_key) as service:
        found = _json(service(Endpoints.entities(session_id, query, prefix, limit)))
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


def _print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


JSON = click.option("--json", "as_json", is_flag=True, help="Print the service's JSON")


@click.group()
def projects() -> None:
    """List or create projects (a project's sessions share their memories)."""


@projects.command("list")
@JSON
@service_options
def projects_list(as_json: bool, url: str, api_key: str | None) -> None:
    """Every project: its id, name and retention."""
    with Service(url, api_key) as service:
        found = _json(service(Endpoints.list_projects(limit=1000)))
    if as_json:
        return _print_json(found)
    for project in found:
        days = project.get("retentionDays")
        click.echo(f"{project['id']}\t{project['name']}" + (f"\tkept {days} days" if days else ""))
    if not found:
        click.echo("no projects yet: nexus projects create NAME", err=True)


RETENTION = click.option(
    "--retention-days",
    type=click.IntRange(1, 36_500),
    default=None,
    help="Keep each episode this many days after it was said, then forget it",
)


@projects.command("create")
@click.argument("name")
@RETENTION
@JSON
@service_options
def projects_create(
    name: str, retention_days: int | None, as_json: bool, url: str, api_key: str | None
) -> None:
    """Make a project named NAME (names are unique)."""
    with Service(url, api_key) as service:
        project = _json(service(Endpoints.create_project(name, retention_days)))
    _print_json(project) if as_json else click.echo(f"project {project['id']}: {name}")


@projects.command("retention")
@click.argument("project")
@click.argument("days", type=click.IntRange(1, 36_500), required=False)
@JSON
@service_options
def projects_retention(
    project: str, days: int | None, as_json: bool, url: str, api_key: str | None
) -> None:
    """Keep PROJECT's episodes (its name or id) DAYS days after they were said (no DAYS:
    keep them until their own expiry). Applies at once to the episodes stored already."""
    with Service(url, api_key) as service:
        project_id = project_id_of(service, project)
        changed = _json(service(Endpoints.set_retention(project_id, days)))
    if as_json:
        return _print_json(changed)
    kept = f"kept {days} days after they were said" if days else "kept until their own expiry"
    click.echo(f"project {changed['name']!r} (id {project_id}): its episodes are {kept}")


def project_id_of(service: Service, project: str) -> int:
    """A project given by its name or, when no project has that name, by its id."""
    offset = 0
    while page := service(Endpoints.list_projects(100, offset)):
        found = next((p.id for p in page if p.name == project), None)
        if found is not None:
            return found
        offset += len(page)
    if project.isascii() and project.isdigit():
        return int(project)
    raise click.ClickException(f"there is no project named {project!r} (nexus projects list)")


@click.group()
def sessions() -> None:
    """List or create sessions (conversations)."""


@sessions.command("list")
@click.option("--project", default=None, help="Only this project's (its name or id)")
@JSON
@service_options
def sessions_list(project: str | None, as_json: bool, url: str, api_key: str | None) -> None:
    """Every session (or a project's): id, project, title."""
    with Service(url, api_key) as service:
        project_id = None if project is None else project_id_of(service, project)
        found = _json(service(Endpoints.list_sessions(project_id, limit=1000)))
        names = {p["id"]: p["name"] for p in _json(service(Endpoints.list_projects(limit=1000)))}
    if as_json:
        return _print_json(found)
    for session in found:
        project = names.get(session["projectId"], "-")
        click.echo(f"{session['id']}\t{project}\t{session['title'] or ''}")
    if not found:
        click.echo("no sessions yet: nexus sessions create", err=True)


@sessions.command("create")
@click.option("--project", default=None, help="In this project (its name or id)")
@click.option("--title", default=None, help="A name to know it by")
@JSON
@service_options
def sessions_create(
    project: str | None, title: str | None, as_json: bool, url: str, api_key: str | None
) -> None:
    """Make a session (a conversation), in a project or in none."""
    with Service(url, api_key) as service:
        project_id = None if project is None else project_id_of(service, project)
        session = _json(service(Endpoints.create_session(project_id, title)))
    _print_json(session) if as_json else click.echo(f"session {session['id']}")


@click.command()
@click.option("--session", "session_id", type=int, required=True, help="Session id")
@click.option("--speaker", default="user", show_default=True)
@click.argument("text")
@JSON
@service_options
def add(
    session_id: int, speaker: str, text: str, as_json: bool, url: str, api_key: str | None
) -> None:
    """Store one message as an episode (TEXT - reads it from standard input)."""
    # A shell's `echo` or a file ends with a newline that is not part of the message.
    content = sys.stdin.read().removesuffix("\n") if text == "-" else text
    if not speaker.strip():
        raise click.BadParameter(
            "name who said it (user, assistant or a name)", param_hint="--speaker"
        )
    body = {"speaker": speaker, "content": content}
    with Service(url, api_key) as service:
        [episode] = _json(service(Endpoints.add_episodes(session_id, [body])))
    _print_json(episode) if as_json else click.echo(f"episode {episode['id']}")


@click.command()
@click.argument("episode_id", type=click.IntRange(min=1))
@click.option("--off", is_flag=True, help="Unpin it")
@service_options
def pin(episode_id: int, off: bool, url: str, api_key: str | None) -> None:
    """Pin an episode: every turn of its project (or session) then carries it, under
    standing, whatever the message. --off unpins it."""
    with Service(url, api_key) as service:
        service(Endpoints.update_episode(episode_id, {"pinned": not off}))
    click.echo(f"episode {episode_id} {'unpinned' if off else 'pinned'}")


@click.command()
@click.option(
    "--session",
    "session_ids",
    type=click.IntRange(min=1),
    multiple=True,
    help="In this session (repeat for several)",
)
@filter_options
@click.option("--dry-run", is_flag=True, help="Only count what would be deleted")
@click.option("--yes", is_flag=True, help="Delete without asking first")
@service_options
def forget(
    session_ids: tuple[int, ...],
    dry_run: bool,
    yes: bool,
    url: str,
    api_key: str | None,
    **rule: Any,
) -> None:
    """Delete the episodes a filter keeps (in the sessions given, or all the key sees), from
    the store, its indexes and the entity links. It counts them and asks first, unless
    --yes; --dry-run only counts them."""
    sessions, kept = list(session_ids) or None, filter_of(**rule)
    with Service(url, api_key) as service:
        counted = service(Endpoints.forget(sessions, kept, dry_run=True)).episodes
        if dry_run:
            return click.echo(f"{_episodes(counted)} would be forgotten (dry run)")
        if not counted:
            return click.echo("no episode matches: nothing forgotten")
        if not yes:
            click.confirm(f"Forget {_episodes(counted)}? This cannot be undone", abort=True)
        done = service(Endpoints.forget(sessions, kept))
    click.echo(f"{_episodes(done.episodes)} forgotten")


def _episodes(count: int) -> str:
    return f"{count} episode" if count == 1 else f"{count} episodes"


def _first_line(exc: ValueError) -> str:
    """A refused filter in one line: the option and what to fix, as the API words it."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        field, message = refusal(first["loc"], first["msg"], located=False)
        return message if field == "body" else f"--{field}: {message}"
    return str(exc)
