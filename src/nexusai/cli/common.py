"""What the commands share: clean one-line errors, the data-dir option."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from nexusai.errors import ConfigError, NexusError

F = TypeVar("F", bound=Callable[..., Any])


def clean_errors(fn: F) -> F:
    """A domain error becomes one line on stderr and exit status 1, not a traceback; a
    setting that is wrong (`ConfigError`) exit status 2, as at `nexus serve`; a file that
    cannot be read or written one line naming it."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConfigError as exc:
            raise StartError(str(exc)) from None
        except NexusError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            raise click.ClickException(f"{exc.strerror or exc}{where}") from None

    return wrapper  # type: ignore[return-value]


DATA_DIR = click.option(
    "--data-dir", type=click.Path(path_type=Path), default=None, help="NEXUS_DATA_DIR"
)


class StartError(click.ClickException):
    """A configuration or connection problem found at start: one line, exit status 2."""

    exit_code = 2


def require_extra(module: str, extra: str, needed_by: str) -> None:
    """Refuses at once, before any work, when an optional package is missing."""
    if importlib.util.find_spec(module) is None:
        raise click.UsageError(f"{needed_by} needs {module}: pip install 'nexusai[{extra}]'")
