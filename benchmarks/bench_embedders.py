"""What each local embedder costs here: a query's time (p50 / p95 over real-length
questions) and the rate of short and long texts, embedded in batches as the write path
does. Embedders whose extra is not installed are left out, with a note."""

from __future__ import annotations

import itertools
import time

from benchmarks.common import Report, sentences, time_ms
from nexusai.config import Config
from nexusai.embedders import Embedder, create_embedder
from nexusai.errors import ConfigError
from nexusai.evaluation.metrics import percentile

NAMES = ("local", "e5-int8", "mpnet")
QUERIES = 100


def run(quick: bool = False) -> None:
    queries = list(sentences(QUERIES, seed=21))
    short = list(sentences(16 if quick else 128, seed=22))
    # ~1,100 characters each: a long assistant answer, as much as a vector reads of it
    long = [
        " ".join(itertools.islice(sentences(14, seed=n), 14)) for n in range(8 if quick else 32)
    ]
    report = Report(
        "Embedders: a query, and texts a second (2 cores)",
        ["embedder", "query p50 / p95 ms", "short texts / s", "long texts / s"],
    )
    for name in NAMES:
        try:
            embedder = create_embedder(Config.from_env({"NEXUS_EMBEDDER": name}))
        except ConfigError as exc:
            report.notes.append(f"{name}: not measured ({exc})")
            continue
        query = _query_ms(embedder, queries)
        report.add(
            name,
            f"{percentile(query, 50):.1f} / {percentile(query, 95):.1f}",
            _rate(embedder, short),
            _rate(embedder, long),
        )
    report.print()


def _query_ms(embedder: Embedder, queries: list[str]) -> list[float]:
    asked = itertools.cycle(queries)
    return time_ms(lambda: embedder.embed_query(next(asked)), QUERIES, warmup=5)


def _rate(embedder: Embedder, texts: list[str]) -> float:
    embedder.embed(texts[:4])
    started = time.perf_counter()
    embedder.embed(texts)
    return len(texts) / (time.perf_counter() - started)
