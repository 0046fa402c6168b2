"""A refusal as every face words it: the field as the README writes it, and what to fix.
Shared by the services' HTTP answers and the Python client's own checks."""

from __future__ import annotations

import re
from typing import Any

# Where a body's shape is chosen (one episode or a batch): the choice names no field.
_UNION_TAGS = ("episode", "batch")


def field_path(loc: tuple[Any, ...], located: bool = True) -> str:
    """A field as the README writes it: `episodes[2].content`, `sessionIds`. `located`: the
    first part says where the request carried it (body, query string, path), and is left
    out; a field of that name further in (a tool's `query` argument) is kept."""
    parts = list(loc)
    if located and parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        parts = parts[1:]
    if parts and parts[0] in _UNION_TAGS:
        parts = parts[1:]
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".") or "body"


def refusal(loc: tuple[Any, ...], message: str, located: bool = True) -> tuple[str, str]:
    """One of pydantic's errors as every face words it: (the field, what to fix), without
    pydantic's "Value error, " prefix. A check of a whole model names the field it refused
    in its message (`speaker: ...`): that field, not `body`."""
    field, said = field_path(loc, located), str(message).removeprefix("Value error, ")
    named = re.match(r"([\w.\[\]]+): (.+)", said, re.DOTALL)
    if named and field == "body":
        return named[1], named[2]
    return field, said
