"""spaCy on long messages: BEAM's 500K tier (assistant answers with code, about 2,100
characters each), read whole and as `extractors.prose` reads them (fenced code left out).
A seeded sample of messages, each way twice in turn, in batches of two (a turn and its
reply); the time of each and the mentions each finds."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from benchmarks.common import Report
from nexusai.memory.extractors import Mention, SpacyExtractor

DATA = Path(__file__).parents[2] / "shared" / "data" / "beam500k"


def messages() -> list[str]:
    found = []
    for chat in sorted(p for p in DATA.iterdir() if p.is_dir()):
        for batch in json.loads((chat / "chat.json").read_text(encoding="utf-8")):
            for turn in batch["turns"]:
                found += [m["content"] for m in (turn if isinstance(turn, list) else [turn])]
    return found


def run(quick: bool = False) -> None:
    sample = messages()
    random.Random(5).shuffle(sample)
    sample = sample[: 60 if quick else 300]
    extractor, whole_reader = SpacyExtractor(), SpacyExtractor(read_code=True)
    extractor.extract(sample[:4])  # loaded and warm
    whole_reader.extract(sample[:4])
    times: dict[str, list[float]] = {"fenced code left out": [], "read whole": []}
    found: dict[str, set[tuple[int, str, str]]] = {}
    for _ in range(2):
        for way, reader in (("fenced code left out", extractor), ("read whole", whole_reader)):
            started = time.perf_counter()
            mentions: list[list[Mention]] = []
            for start in range(0, len(sample), 2):
                mentions += reader.extract(sample[start : start + 2])
            times[way].append(time.perf_counter() - started)
            found[way] = {(i, m.name, m.type) for i, ms in enumerate(mentions) for m in ms}
    report = Report(
        f"spaCy on {len(sample)} BEAM 500K messages"
        f" ({sum(map(len, sample)) // len(sample):,} characters on average,"
        f" {sum('```' in t for t in sample)} with fenced code)",
        ["read", "seconds (best of 2)", "vs whole", "mentions", "of whole's"],
    )
    whole = found["read whole"]
    for way in ("read whole", "fenced code left out"):
        best = min(times[way])
        kept = len(found[way] & whole)
        report.add(
            way, f"{best:.1f}", f"{best / min(times['read whole']):.2f}", len(found[way]), kept
        )
    left = sorted(whole - found["fenced code left out"])
    random.Random(1).shuffle(left)
    report.notes.append("left out, a sample: " + ", ".join(f"{n} ({t})" for _, n, t in left[:20]))
    report.print()
