"""Importing short turns: episodes per second through the write path (SQLite, FTS, embed,
upsert), against the embedder's own rate on the same texts, with entity extraction off and
behind it as the service runs it; then `nexus import` of the same turns as a JSONL file,
end to end in a process of its own with spaCy's extraction, both ways the command offers:
done when the episodes are searchable and the rest left to the service (`--entities
later`), and waiting for the last entity (`--entities wait`).

The turns are the project benchmark's common words (14 words of 44), 20 to a session, one
session a conversation, as `nexus import` of a JSONL file of many short chats writes them;
the command also imports the same lines in time order, sessions interleaved, as a message
log holds them.
`NEXUS_IMPORT_SHORT` sets how many (20,000 by default).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_import_long import timed_imports
from benchmarks.bench_project import _common
from benchmarks.common import Report
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.memory.importing import SourceConversation, SourceEpisode, SourceSession
from nexusai.models import NewEpisode

PER_SESSION = 20


def run(quick: bool = False) -> None:
    count = 2_000 if quick else int(os.environ.get("NEXUS_IMPORT_SHORT", "20000"))
    conversations = conversations_of(count)
    embedder = LocalEmbedder()
    report = Report(
        f"Importing {count:,} short turns, {PER_SESSION} to a session",
        ["what", "seconds", "episodes/s", "vs the embedder"],
    )
    rows = timed_imports(conversations, embedder)
    alone = rows[0][1]
    for entities, interleaved in (("later", False), ("later", True), ("wait", False)):
        seconds, searchable = _cli_import(conversations, entities, interleaved)
        command = f"nexus import --entities {entities}"
        command += ", lines in time order (sessions interleaved)" if interleaved else ""
        for what, took in (
            (f"{command}: its 'searchable' line", searchable),
            (f"{command} (the command, end to end)", seconds),
        ):
            rows.append((what, took, alone / took))
    for what, seconds, ratio in rows:
        report.add(what, seconds, count / seconds, ratio)
    report.notes.append("Targets: 150 episodes/s or more end to end, and 0.85 of the embedder.")
    report.print()


def _cli_import(
    conversations: list[SourceConversation], entities: str, interleaved: bool = False
) -> tuple[float, float]:
    """`nexus import` of the turns as JSONL into an empty data directory, in a process of
    its own with spaCy's extraction: its wall time, and the seconds its "searchable after"
    line gives (from the first conversation written to the last one searchable)."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "turns.jsonl"
        write_jsonl(conversations, data, interleaved)
        return cli_import(data, Path(tmp) / "d", entities)


def write_jsonl(conversations: list[SourceConversation], path: Path, interleaved: bool) -> None:
    """The turns as the JSONL `nexus import` reads. With `interleaved`, the lines are in
    time order across sessions, as a message log is: each session's n-th turn, for every
    session, before any session's (n+1)-th."""
    lines = [
        [
            {"session": session.key, "speaker": e.episode.speaker, "content": e.episode.content}
            for e in session.episodes
        ]
        for conversation in conversations
        for session in conversation.sessions
    ]
    ordered = (
        [line for turn in itertools.zip_longest(*lines) for line in turn if line]
        if interleaved
        else [line for session in lines for line in session]
    )
    with path.open("w", encoding="utf-8") as out:
        out.writelines(json.dumps(line) + "\n" for line in ordered)


def cli_import(jsonl: Path, data_dir: Path, entities: str) -> tuple[float, float]:
    """`nexus import FILE --entities ENTITIES` into `data_dir`, with spaCy's extraction:
    its wall time and the seconds of its "searchable after" line."""
    env = {**os.environ, "NEXUS_DATA_DIR": str(data_dir), "NEXUS_EXTRACTOR": "spacy"}
    command = [sys.executable, "-m", "nexusai.cli", "import", str(jsonl), "--entities", entities]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    reported = re.search(r"searchable after ([0-9.]+) s", done.stdout)
    if reported is None:
        raise RuntimeError(f"nexus import did not say when it was searchable: {done.stdout}")
    return seconds, float(reported.group(1))


def conversations_of(count: int) -> list[SourceConversation]:
    turns = list(_common(count))
    found = []
    for start in range(0, count, PER_SESSION):
        key = f"short:{start // PER_SESSION}"
        episodes = [
            SourceEpisode(f"{key}:{i}", NewEpisode("user" if i % 2 == 0 else "assistant", text))
            for i, text in enumerate(turns[start : start + PER_SESSION])
        ]
        found.append(SourceConversation(key, None, [SourceSession(key, key, episodes)]))
    return found
