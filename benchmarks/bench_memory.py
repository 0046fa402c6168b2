"""Where a serving process's memory goes: a store that has been served (its search graph
built) is opened in a fresh process, step by step as `nexus serve` opens it, and the
process's resident memory is read after each step (VmRSS, and its anonymous part: what
is not a mapped file the kernel can drop), with the peak so far (VmHWM):

1. Python, nexusai's imports and the embedding model, which embeds one message;
2. `Memory.open`: SQLite and the Qdrant Edge shard (vectors, search graph, payloads);
3. the keyword index's copy read into memory (what the start reads ahead: each row's
   length and the commonest words' postings), with its own size in bytes;
4. 200 turns' searches, both legs, over every session (SQLite's page caches fill).

Sizes: NEXUS_MEMORY_SIZES (default 100000), realistic text (the project benchmark's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.bench_project import _corpora
from benchmarks.bench_start import _served_once
from benchmarks.bench_vectors import SESSIONS, build_store
from benchmarks.common import Report, base_vectors, sizes
from nexusai.embedders.minilm import LocalEmbedder

STEPS = ("model loaded", "Memory.open", "keyword copy read", "after 200 turns")


def run(quick: bool = False) -> None:
    sized = sizes(quick, "NEXUS_MEMORY_SIZES", "100000")
    texts, queries = _corpora()["realistic"]
    embedder = LocalEmbedder()
    base = base_vectors(embedder)
    report = Report(
        "Resident memory of a serving process, step by step (MB)",
        ["episodes", "step", "RSS", "of which anonymous", "peak so far"],
    )
    for size in sized:
        with tempfile.TemporaryDirectory() as tmp:
            build_store(Path(tmp), embedder, base, size, SESSIONS, texts=texts(size))
            _served_once(Path(tmp))
            found = _measure(Path(tmp), queries)
            for step in STEPS:
                rss, anonymous, peak = found[step]
                report.add(f"{size:,}", step, rss, anonymous, peak)
            vectors, sqlite = found["vectors MB"], found["sqlite MB"]
            report.notes.append(
                f"{size:,}: the keyword copy holds {found['copy MB']:.0f} MB;"
                f" on disk: vectors {vectors:.0f} MB, SQLite {sqlite:.0f} MB"
            )
    report.print()


def _measure(data_dir: Path, queries: list[str]) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(data_dir), json.dumps(queries)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "NEXUS_EXTRACTOR": "none"},
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
