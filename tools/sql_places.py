"""Lint: SQL is written only where docs/ARCHITECTURE.md says it may be. A string that
starts as an SQL statement anywhere else in src/nexusai fails `make lint`, naming the
file and line.

Run: `python tools/sql_places.py` (from the project root).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src" / "nexusai"
# Where SQL may be written, and why there.
ALLOWED: dict[str, str] = {
    "memory/repositories/": "the store's aggregates, written once over an engine's dialect",
    "memory/sqlite/": "SQLite's engine: connections, FTS5 and its migrations",
    "memory/postgres/": "PostgreSQL's engine: connections, its keyword index and migrations",
    "memory/vectors/pgvector.py": "the pgvector index's own tables (derived, never the truth)",
    "orchestration/settings.py": "orchestration's own settings file, never the episode store",
    "evaluation/vectors.py": "the evaluation's cache of vectors, a file of its own",
}
STATEMENT = re.compile(
    r"^\s*(SELECT\s|INSERT\s+(OR\s+\w+\s+)?INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s"
    r"|CREATE\s|ALTER\s|DROP\s|PRAGMA\s|WITH\s+\w+\s+AS\b)"
)  # as our SQL is written: key words in capitals


def strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, text) of each string literal, the literal parts of f-strings included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def misplaced(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        place = path.relative_to(root).as_posix()
        if any(place.startswith(allowed) for allowed in ALLOWED):
            continue
        for line, text in strings(ast.parse(path.read_text(), str(path))):
            if STATEMENT.match(text):
                found.append(f"{path}:{line}: SQL outside the repositories: {text[:60]!r}")
    return found


if __name__ == "__main__":
    problems = misplaced()
    print("\n".join(problems) or "SQL is only where docs/ARCHITECTURE.md allows it.")
    sys.exit(1 if problems else 0)
