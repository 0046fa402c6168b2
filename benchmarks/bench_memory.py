"""Where a serving process's memory goes: a store that has been served (its search graph
built) is opened in a fresh process, step by step as `nexus serve` opens it, and the
process's resident memory is read after each step (VmRSS, and its anonymous part: what
is not a mapped file the kernel can drop), with the peak so far (VmHWM):

1. Python, nexusai's imports and the embedding model, which embeds one message;
2. `Memory.open`: SQLite and the Qdrant Edge shard (vectors, search graph, payloads);
3. the keyword index's copy read into memory (what the start reads ahead: each row's
   length and the commonest words' postings), with its own size in bytes;
4. 200 turns' searches, both legs, over every session (SQLite's page caches fill).

Each store is measured with its vectors in each layout (NEXUS_VECTOR_MEMORY), in one run:
built in `ram` and served until its graph is built, measured; then served with `compact`
until converted, measured again. Beside the steps, the service itself: its peak RSS over
a start and 360 warm `/context` turns at (1, 1), and those turns' latency.

Sizes: NEXUS_MEMORY_SIZES (default 100000), realistic text (the project benchmark's).
With NEXUS_BENCH_STORES set, the store is kept there for `start` (see `store_dir`).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks.bench_project import ROWS, _corpora
from benchmarks.bench_start import _served_once
from benchmarks.bench_vectors import SESSIONS, build_store
from benchmarks.common import (
    Report,
    base_vectors,
    mark_built,
    peak_rss,
    served,
    sizes,
    store_dir,
    timed_context,
)
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.evaluation.metrics import percentile

STEPS = ("model loaded", "Memory.open", "keyword copy read", "after 200 turns")
# The layout the store is built in (the before row), then the one it is converted to.
LAYOUTS = ("ram", "compact")


def run(quick: bool = False) -> None:
    sized = sizes(quick, "NEXUS_MEMORY_SIZES", "100000")
    texts, queries = _corpora()["realistic"]
    embedder = LocalEmbedder()
    base = base_vectors(embedder)
    report = Report(
        "Resident memory of a serving process, step by step (MB)",
        ["episodes", "vectors", "step", "RSS", "of which anonymous", "peak so far"],
    )
    service = Report(
        "The service: peak memory and warm turns, by vector layout",
        ["episodes", "vectors", "peak RSS, MB", "warm /context p50 / p95 ms", "to /ready, s"],
    )
    for size in sized:
        with store_dir(f"project-realistic-{size}") as (data, built):
            if not built:
                build_store(data, embedder, base, size, SESSIONS, texts=texts(size), layout="ram")
                mark_built(data)
            for layout in LAYOUTS:
                env = {"NEXUS_VECTOR_MEMORY": layout}
                started = time.monotonic()
                _served_once(data, **env)
                report.notes.append(
                    f"{size:,}, {layout}: served until its graph was built (or the index"
                    f" converted) in {time.monotonic() - started:.0f} s"
                )
                found = _measure(data, queries, env)
                for step in STEPS:
                    report.add(f"{size:,}", layout, step, *found[step])
                report.notes.append(
                    f"{size:,}, {layout}: the keyword copy holds {found['copy MB']:.0f} MB; on"
                    f" disk: vectors {found['vectors MB']:.0f} MB, SQLite"
                    f" {found['sqlite MB']:.0f} MB"
                )
                service.add(f"{size:,}", layout, *_warm(data, queries, env))
    report.print()
    service.notes.append("Target at 1,000,000: peak RSS at most 2 GB, warm p95 within 10%.")
    service.print()


def _warm(data_dir: Path, queries: list[str], env: dict[str, str]) -> list[str]:
    """A start, every message asked once (what they read is read), then three times more:
    those turns' p50 / p95, the service's peak RSS, and its time to `/ready`."""
    rng = random.Random(3)
    with served(data_dir, **env) as (http, ready):
        http.patch("/settings", json=ROWS["(1, 1)"]).raise_for_status()
        for message in queries:
            timed_context(http, rng.randint(1, SESSIONS), message)
        turns = [timed_context(http, rng.randint(1, SESSIONS), q)[0] for q in queries * 3]
        rss = peak_rss(_service_pid())
    p50, p95 = percentile(turns, 50), percentile(turns, 95)
    return [f"{rss:,}", f"{p50:.1f} / {p95:.1f}", f"{ready:.1f}"]


def _service_pid() -> int:
    """The `nexus serve` this process started (`served` keeps its handle to itself)."""
    for child in psutil.Process().children():
        if "serve" in child.cmdline():
            return int(child.pid)
    raise RuntimeError("no `nexus serve` is running under this benchmark")


def _measure(data_dir: Path, queries: list[str], env: dict[str, str]) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(data_dir), json.dumps(queries)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "NEXUS_EXTRACTOR": "none", **env},
    )
    found: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


_CHILD = r"""
import json, sys
from pathlib import Path

def status():
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = int(value.split()[0]) // 1024 if value.strip().endswith("kB") else 0
    return [fields["VmRSS"], fields["RssAnon"], fields["VmHWM"]]

data_dir, queries = Path(sys.argv[1]), json.loads(sys.argv[2])
found = {}
from nexusai.config import Config
from nexusai.embedders.registry import create_embedder
from nexusai.memory.service import Memory
config = Config.from_env(data_dir=data_dir)
embedder = create_embedder(config)
embedder.embed(["hello"])
found["model loaded"] = status()
memory = Memory.open(config, embedder)
found["Memory.open"] = status()
memory.store.warm(lambda: True)
found["keyword copy read"] = status()
copy = memory.store._bm25._copy
found["copy MB"] = (copy.entries * 8 + copy.sizes.nbytes) / 2**20 if copy else 0.0
for message in (queries * 2)[:200]:
    memory.search_keyword(message, 40, None)
    memory.search_vectors(embedder.embed([message])[0], None, (), 40)
found["after 200 turns"] = status()
size = lambda path: sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20
found["vectors MB"] = size(config.vectors_path)
found["sqlite MB"] = sum(p.stat().st_size for p in data_dir.glob("nexus.db*")) / 2**20
memory.close()
print(json.dumps(found))
"""
