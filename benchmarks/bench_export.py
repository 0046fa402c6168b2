"""Export and import again: `nexus import` of a JSONL file of short turns into one store,
`nexus export` of its project, `nexus import` of the export into an empty store; the time
of each, each as a user runs it (the command, in a process of its own, entity extraction
off), and whether anything was lost: the episodes counted and a checksum of what each says
(session, speaker, content, time, metadata), compared.

`NEXUS_EXPORT_SIZE` sets how many turns (20,000 by default), 20 to a session.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_project import _common
from benchmarks.common import Report

PER_SESSION = 20


def run(quick: bool = False) -> None:
    count = 1_000 if quick else int(os.environ.get("NEXUS_EXPORT_SIZE", "20000"))
    report = Report(
        f"Export and import again: {count:,} short turns, {PER_SESSION} to a session",
        ["step", "seconds", "episodes/s"],
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        plain = root / "plain.jsonl"
        _write_turns(plain, count)
        imported = _nexus(root / "first", "import", str(plain), "--project", "home")
        exported_file = root / "export.jsonl"
        exported = _nexus(
            root / "first", "export", "--project", "home", "--out", str(exported_file)
        )
        again = _nexus(root / "second", "import", str(exported_file))
        for step, seconds in (
            ("nexus import (the turns)", imported),
            ("nexus export", exported),
            ("nexus import (the export, into an empty store)", again),
        ):
            report.add(step, f"{seconds:.1f}", f"{count / seconds:,.0f}")
        first, second = _said(root / "first"), _said(root / "second")
        report.notes.append(
            f"episodes: {first[0]:,} then {second[0]:,}; checksums"
            f" {'equal' if first == second else 'DIFFER'} ({first[1][:12]})"
        )
        report.notes.append(f"the import of the export took {again / imported:.2f} of the first")
    report.notes.append("Target: nothing lost; the import of an export no slower than the first.")
    report.print()


def _write_turns(path: Path, count: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for n, text in enumerate(_common(count)):
            line = {
                "session": f"chat {n // PER_SESSION}",
                "speaker": "user" if n % 2 == 0 else "assistant",
                "content": text,
                "occurredAt": f"2026-01-01T00:00:{n % 60:02d}Z",
                "metadata": {"n": n},
            }
            out.write(json.dumps(line) + "\n")


def _nexus(data_dir: Path, *args: str) -> float:
    env = {**os.environ, "NEXUS_DATA_DIR": str(data_dir), "NEXUS_EXTRACTOR": "none"}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "nexusai.cli", *args], env=env, check=True, capture_output=True
    )
    return time.perf_counter() - started


def _said(data_dir: Path) -> tuple[int, str]:
    """How many episodes the store holds, and a checksum of what they say, in an order
    that does not depend on ids."""
    from nexusai.memory.sqlite.store import SqliteStore

    with SqliteStore(data_dir / "nexus.db") as store:
        rows = store.connection().execute(
            "SELECT s.title, e.speaker, e.content, e.occurred_at, e.metadata FROM episodes e"
            " JOIN sessions s ON s.id = e.session_id"
        )
        said = sorted(json.dumps(list(row)) for row in rows)
    return len(said), hashlib.sha256("\n".join(said).encode()).hexdigest()
