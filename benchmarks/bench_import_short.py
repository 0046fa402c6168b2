"""Importing short turns: episodes per second through the write path (SQLite, FTS, embed,
upsert), against the embedder's own rate on the same texts, with entity extraction off and
behind it as the service runs it.

The turns are the project benchmark's common words (14 words of 44), 20 to a session, one
session a conversation, as `nexus import` of a JSONL file of many short chats writes them.
`NEXUS_IMPORT_SHORT` sets how many (20,000 by default).
"""

from __future__ import annotations

import os

from benchmarks.bench_import_long import timed_imports
from benchmarks.bench_project import _common
from benchmarks.common import Report
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.memory.importing import SourceConversation, SourceEpisode, SourceSession
from nexusai.models import NewEpisode

PER_SESSION = 20


def run(quick: bool = False) -> None:
    count = 2_000 if quick else int(os.environ.get("NEXUS_IMPORT_SHORT", "20000"))
    conversations = _conversations(count)
    embedder = LocalEmbedder()
    report = Report(
        f"Importing {count:,} short turns, {PER_SESSION} to a session",
        ["what", "seconds", "episodes/s", "vs the embedder"],
    )
    for what, seconds, ratio in timed_imports(conversations, embedder):
        report.add(what, seconds, count / seconds, ratio)
    report.notes.append("Target: 150 episodes/s or more through the write path.")
    report.print()


def _conversations(count: int) -> list[SourceConversation]:
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
