"""Long messages written through HTTP, as a client writes them: BEAM's 500K tier (read from
../shared/data/beam500k, never copied; about 2,100 characters a message, assistant answers
with code), 50 messages a `POST /sessions/{id}/episodes`, against `nexus serve` with
spaCy's extraction on (it runs behind the writes). Beside it, the embedder alone on the
texts the write path embeds for the same messages, in the same run: the write path's
rate as a share of the embedder's. Last, a message of 1 MB written twice (how long each
write takes; its entities are extracted behind it).
`NEXUS_LONG_WRITES` sets how many messages are written (default 400; `--quick` 100).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.common import Report, embedder_seconds, sentences, served
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.evaluation.datasets import load_beam
from nexusai.memory.sqlite.store import SqliteStore
from nexusai.models import NewEpisode

DATA = Path(__file__).parents[2] / "shared" / "data" / "beam500k"
BATCH = 50
MEGABYTE = 1_000_000


def run(quick: bool = False) -> None:
    if not DATA.exists():
        print(f"no BEAM 500K data at {DATA}")
        return
    count = 100 if quick else int(os.environ.get("NEXUS_LONG_WRITES", "400"))
    messages = _messages(count)
    chars = sum(len(m.content) for m in messages)
    report = Report(
        f"Long messages through HTTP: {len(messages):,} of BEAM 500K, {chars:,} characters",
        ["what", "seconds", "messages/s", "vs the embedder"],
    )
    embedder = LocalEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        with served(data, NEXUS_EXTRACTOR="spacy") as (http, _):
            session, written = _written(http, messages)
            megabyte = _megabyte(http)
        alone = _embedded(embedder, data, session)
    report.add(
        "embedder alone, the same texts", f"{alone:.1f}", f"{len(messages) / alone:.1f}", "1.00"
    )
    report.add(
        f"written through HTTP, {BATCH} a request",
        f"{written:.1f}",
        f"{len(messages) / written:.1f}",
        f"{alone / written:.2f}",
    )
    for n, seconds in enumerate(megabyte, start=1):
        report.add(f"a 1 MB message, write {n}", f"{seconds:.2f}", "", "")
    report.notes.append("Targets: at least 0.85 of the embedder; a 1 MB message in under 3 s.")
    report.print()


def _messages(count: int) -> list[NewEpisode]:
    chat = load_beam(DATA, ["1"]).conversations[0].conversation
    return [e.episode for s in chat.sessions for e in s.episodes][:count]


def _written(http: httpx.Client, messages: list[NewEpisode]) -> tuple[int, float]:
    """The session written to, and the seconds the writes took."""
    session: int = http.post("/sessions", json={}).json()["id"]
    started = time.perf_counter()
    for start in range(0, len(messages), BATCH):
        batch = messages[start : start + BATCH]
        body = {"episodes": [{"speaker": m.speaker, "content": m.content} for m in batch]}
        http.post(f"/sessions/{session}/episodes", json=body, timeout=600).raise_for_status()
    return session, time.perf_counter() - started


def _megabyte(http: httpx.Client) -> list[float]:
    session = http.post("/sessions", json={}).json()["id"]
    text = " ".join(sentences(20_000))[: MEGABYTE - 10]
    spent = []
    for n in range(2):
        started = time.perf_counter()
        body = {"speaker": "user", "content": f"{text} {n}"}
        http.post(f"/sessions/{session}/episodes", json=body, timeout=600).raise_for_status()
        spent.append(time.perf_counter() - started)
    return spent


def _embedded(embedder: LocalEmbedder, data: Path, session: int) -> float:
    """The embedder alone on what the write path embedded for the session's messages, read
    back from the store the service wrote."""
    with SqliteStore(data / "nexus.db") as store:
        episodes = store.episodes.page(session, limit=1_000_000)
    return embedder_seconds(embedder, episodes)
