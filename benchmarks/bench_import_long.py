"""Importing long user-assistant chats: characters per second through the write path,
against the embedder's own rate on the same texts, and the share entity extraction takes.

The messages are BEAM's (read from ../shared/data/beam, never copied), so their lengths
are those of real long chats: about 2,300 characters on average, some over 100,000.
NEXUS_IMPORT_LONG_DATA names another folder in BEAM's format (the 500K tier's,
../shared/data/beam500k) and NEXUS_IMPORT_LONG_CHATS which of its chats (`1,2`, or `all`).
NEXUS_IMPORT_LONG_PLAIN=0 leaves out the import without extraction: the whole 500K tier
then takes about an hour on 2 cores instead of an hour and a half.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.common import Report, embedder_seconds
from nexusai.config import Config
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.evaluation.datasets import load_beam
from nexusai.memory.extractors import SpacyExtractor
from nexusai.memory.importing import SourceConversation
from nexusai.memory.service import Memory
from nexusai.models import Episode

DATA = Path(__file__).parents[2] / "shared" / "data" / "beam"


def run(quick: bool = False) -> None:
    data = Path(os.environ.get("NEXUS_IMPORT_LONG_DATA", DATA))
    if not data.exists():
        print(f"no BEAM data at {data}")
        return
    chats = os.environ.get("NEXUS_IMPORT_LONG_CHATS", "1" if quick else "1,2,3")
    picked = None if chats == "all" else chats.split(",")
    conversations = [c.conversation for c in load_beam(data, picked).conversations]
    messages = sum(len(s.episodes) for c in conversations for s in c.sessions)
    chars = sum(
        len(e.episode.content) for c in conversations for s in c.sessions for e in s.episodes
    )
    embedder = LocalEmbedder()
    report = Report(
        f"Importing long chats: {messages:,} messages of {data.name} (chats {chats}),"
        f" {chars:,} characters",
        ["what", "seconds", "characters/s", "vs the embedder"],
    )
    plain = os.environ.get("NEXUS_IMPORT_LONG_PLAIN", "1") != "0"
    for what, seconds, ratio in timed_imports(conversations, embedder, plain):
        report.add(what, f"{seconds:.1f}", f"{chars / seconds:,.0f}", f"{ratio:.2f}")
    report.notes.append(
        "The import returns when its episodes are stored and embedded; a thread extracts"
        " their entities behind it, sharing the machine's cores with the embedder"
        " (GET /health counts what waits: entitiesPending)."
    )
    report.notes.append("Target: the write path at 0.8 of the embedder or better.")
    report.print()


def timed_imports(
    conversations: list[SourceConversation], embedder: LocalEmbedder, plain: bool = True
) -> list[tuple[str, float, float]]:
    """(what, seconds, the embedder's time over those seconds): the embedder alone on the
    texts the write path embeds, then the write path without extraction (unless not
    `plain`) and with spaCy extracting behind it, until it returns and until the last
    entity is extracted."""
    written, extracted, episodes = _import(conversations, embedder, SpacyExtractor())
    raw = embedder_seconds(embedder, episodes)
    rows = [("embedder alone, on the texts the write path embeds", raw)]
    if plain:
        rows.append(("write path, no extraction", _import(conversations, embedder, None)[0]))
    rows += [
        ("write path, spaCy extracting behind it (as the service runs)", written),
        ("... until the last entity is extracted", extracted),
    ]
    return [(what, seconds, raw / seconds) for what, seconds in rows]


def _import(
    conversations: list[SourceConversation],
    embedder: LocalEmbedder,
    extractor: SpacyExtractor | None,
) -> tuple[float, float, list[Episode]]:
    """(seconds until the import returned, seconds until its entities were all extracted,
    the episodes stored), with extraction behind the writes as `nexus serve` runs it."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Config.from_env({}, data_dir=Path(tmp), extractor="none")
        memory = Memory.open(config, embedder, extractor=extractor)
        behind = threading.Thread(target=memory.extract_behind, daemon=True)
        try:
            started = time.perf_counter()
            behind.start()
            for conversation in conversations:
                project = memory.store.projects.ensure(conversation.key)
                memory.import_conversation(conversation.sessions, project)
            written = time.perf_counter() - started
            while memory.entities_pending():
                time.sleep(0.05)
            extracted = time.perf_counter() - started
            episodes = memory.store.episodes.get_many(memory.store.episodes.ids())
        finally:
            memory.stop()  # as the service stops: the thread first, then the store
            behind.join()
            memory.close()
    return written, extracted, episodes
