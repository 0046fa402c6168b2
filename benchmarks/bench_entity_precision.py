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
    for project in memory.store.projects.page(limit=100):
        [first, *_] = memory.store.sessions.page(project.id, limit=1)
        scope = memory.store.sessions.scope(first.id).session_ids
        for entity in memory.entities.by_prefix("", scope, 100_000):
            [episode] = memory.store.episodes.get_many(entity.latest_mention_ids[:1])
            context = episode.content.replace("\t", " ").replace("\n", " ")[:100]
            rows.append((project.name, entity.name, entity.type, entity.mention_count, context))
    return rows


# A support chat of our own writing, labelled by hand: each line and the entities (name,
# type) a reader finds in it. Names of people, places, hotels, streets and products, beside
# codes and words a small model takes for names.
SUPPORT_CHAT: list[tuple[str, set[tuple[str, str]]]] = [
    ("Hi, I need to change my booking for next week", set()),
    ("My sister Ana is flying in from Porto on Friday", {("Ana", "person"), ("Porto", "place")}),
    ("Ana wants a room near the river", {("Ana", "person")}),
    ("We booked the Memmo Alfama hotel for two nights", {("Memmo Alfama", "place")}),
    ("I stayed at Memmo Alfama last year and loved it", {("Memmo Alfama", "place")}),
    (
        "The address is Rua Vítor Cordon 10, in Chiado",
        {("Rua Vítor Cordon", "place"), ("Chiado", "place")},
    ),
    ("The app shows FAIL500 please help", set()),
    ("Error E42 again when I pay with Visa", {("Visa", "organization")}),
    ("Can Ana pick up the keys at the Lisbon office?", {("Ana", "person"), ("Lisbon", "place")}),
    (
        "My colleague Tiago Mendes booked through Booking.com",
        {("Tiago Mendes", "person"), ("Booking.com", "organization")},
    ),
    ("Thanks! Bye Tiago", {("Tiago", "person")}),
    ("Is the Time Out Market open on Sundays?", {("Time Out Market", "place")}),
    ("We flew TAP from Berlin", {("TAP", "organization"), ("Berlin", "place")}),
    ("Nah, the Uber was fine", {("Uber", "organization")}),
    (
        "Please send the invoice to Joana at Siemens",
        {("Joana", "person"), ("Siemens", "organization")},
    ),
    ("My phone is an iPhone 15 and the app crashes", {("iPhone 15", "product")}),
    ("Ok great, see you in Sintra", {("Sintra", "place")}),
    ("Wanna add breakfast for Ana and me?", {("Ana", "person")}),
]


def support_chat(report: Report) -> None:
    """Precision and recall of (name, type) on the labelled support chat, extracted as one
    batch (a conversation, as an import extracts it)."""
    texts = [text for text, _ in SUPPORT_CHAT]
    found = SpacyExtractor().extract(texts)
    right = said = wanted = 0
    for (_, expected), mentions in zip(SUPPORT_CHAT, found, strict=True):
        got = {(m.name, m.type) for m in mentions}
        right += len(got & expected)
        said += len(got)
        wanted += len(expected)
    report.add("support chat: lines / labelled entities", f"{len(texts)} / {wanted}")
    report.add("support chat: precision", f"{right / max(said, 1):.2f} ({right} of {said})")
    report.add("support chat: recall", f"{right / max(wanted, 1):.2f} ({right} of {wanted})")


def run(quick: bool = False) -> None:
    labelled = Report(
        "Entities on a labelled support chat (spaCy and nexusai's rules)", ["what", "value"]
    )
    support_chat(labelled)
    labelled.print()
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
