"""Entity precision on LoCoMo: what the write path stores as entities, sampled for labelling.

Imports the ten LoCoMo conversations through the real write path with spaCy extraction,
then writes a seeded random sample of the stored entities (name, type, mentions, a line of
context) to bench-results/entity-sample.tsv, outside git: LoCoMo is not ours to copy. Add a
last column y or n by hand and run again: it prints precision over the labelled rows that
are still stored (a filter that drops a wrong entity raises it; one that drops a right one
is counted as lost).
"""

from __future__ import annotations

import csv
import io
import random
import tempfile
from pathlib import Path

from benchmarks.common import Report
from nexusai.config import Config
from nexusai.embedders.minilm import LocalEmbedder
from nexusai.memory.extractors import SpacyExtractor
from nexusai.memory.importing import import_stream
from nexusai.memory.service import Memory

DATA = Path(__file__).parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
SAMPLE = Path("bench-results") / "entity-sample.tsv"
LABELS = Path("bench-results") / "entity-labels.tsv"


def stored_entities(memory: Memory) -> list[tuple[str, str, str, int, str]]:
    """(conversation, name, type, mentions, context) for every stored entity."""
    rows = []
    for project in memory.store.list_projects(limit=100):
        [first, *_] = memory.store.list_sessions(project.id, limit=1)
        scope = memory.store.scope_session_ids(first.id)
        for entity in memory.entities.by_prefix("", scope, 100_000):
            [episode] = memory.store.get_episodes(entity.latest_mention_ids[:1])
            context = episode.content.replace("\t", " ").replace("\n", " ")[:100]
            rows.append((project.name, entity.name, entity.type, entity.mention_count, context))
    return rows


def run(quick: bool = False) -> None:
    if not DATA.exists():
        print(f"no LoCoMo data at {DATA}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        config = Config.from_env({}, data_dir=Path(tmp), extractor="none")
        memory = Memory.open(config, LocalEmbedder(), extractor=SpacyExtractor())
        try:
            import_stream(memory, io.BytesIO(DATA.read_bytes()), "locomo")
            entities = stored_entities(memory)
        finally:
            memory.close()
    report = Report("Entities stored from LoCoMo (spaCy)", ["what", "count"])
    report.add("entities", f"{len(entities):,}")
    report.add("mentions", f"{sum(e[3] for e in entities):,}")
    SAMPLE.parent.mkdir(exist_ok=True)
    if not SAMPLE.exists():
        sample = random.Random(7).sample(entities, min(100, len(entities)))
        with SAMPLE.open("w", newline="") as out:
            csv.writer(out, delimiter="\t").writerows(sample)
    if LABELS.exists():
        _precision(report, {(e[0], e[1].casefold(), e[2]) for e in entities})
    report.print()


def _precision(report: Report, stored: set[tuple[str, str, str]]) -> None:
    """Labels are rows of the sample with a last column y (a real entity of that type) or
    n; a labelled row counts while the same conversation, name and type is stored."""
    with LABELS.open() as labels:
        rows = [row for row in csv.reader(labels, delimiter="\t") if row]
    kept = [row for row in rows if (row[0], row[1].casefold(), row[2]) in stored]
    right = sum(row[-1] == "y" for row in kept)
    lost = sum(row[-1] == "y" for row in rows) - right
    report.add("labelled sample", str(len(rows)))
    report.add("labelled entities still stored", str(len(kept)))
    report.add("precision over those", f"{right / max(len(kept), 1):.2f}")
    report.add("right entities no longer stored", str(lost))
