"""Entity extraction: its own throughput and what it costs the write path.

The write path with and without extraction takes turns on the same chunks of text, so
noise from the machine falls on both alike."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.common import Report, sentences
from nexusai.config import Config
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.memory.extractors import SpacyExtractor
from nexusai.memory.service import Memory
from nexusai.models import NewEpisode

PEOPLE = ["Maria Lopez", "John Smith", "Aiko Tanaka", "Google", "London", "Paris", "Microsoft"]


def messages(count: int) -> list[str]:
    """Chat-like text with names in it, so that the recognizer has work to do."""
    return [f"{text} {PEOPLE[i % len(PEOPLE)]} said so." for i, text in enumerate(sentences(count))]


def write(memory: Memory, texts: list[str]) -> float:
    session_id = memory.store.sessions.create().id
    started = time.perf_counter()
    for i in range(0, len(texts), 100):
        memory.add_episodes(session_id, [NewEpisode("user", t) for t in texts[i : i + 100]])
    return time.perf_counter() - started


def run(quick: bool = False) -> None:
    count = 1000 if quick else 4000
    texts = messages(count)
    embedder = LocalEmbedder()
    extractor = SpacyExtractor()
    started = time.perf_counter()
    extractor.extract(texts)
    alone = count / (time.perf_counter() - started)
    plain_s = with_s = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        config = Config.from_env({}, data_dir=Path(tmp) / "a", extractor="none")
        plain = Memory.open(config, embedder)
        config = Config.from_env({}, data_dir=Path(tmp) / "b", extractor="none")
        extracting = Memory.open(config, embedder, extractor=extractor)
        for start in range(0, count, 500):
            chunk = texts[start : start + 500]
            plain_s += write(plain, chunk)
            with_s += write(extracting, chunk)
        entities = extracting.entities.count()
        plain.close()
        extracting.close()
    report = Report(
        f"Entity extraction, {count:,} messages", ["what", "episodes/s", "vs write path"]
    )
    plain_rate, with_rate = count / plain_s, count / with_s
    report.add("write path without extraction", f"{plain_rate:,.0f}", "1.00")
    report.add(
        "write path with extraction (spaCy sm, NER only)",
        f"{with_rate:,.0f}",
        f"{with_rate / plain_rate:.2f}",
    )
    report.add("extraction alone", f"{alone:,.0f}", "")
    report.notes.append(f"{entities} entities stored. Target: with extraction >= 0.60 of without.")
    report.print()
