"""Soak: 32 clients against one `nexus serve` for a long while (30 minutes for the README;
`NEXUS_SOAK_SECONDS`, default 5 minutes, `--quick` 1 minute), mixing chat, context, writes,
deletes and keyword searches, with the embedder failing for a minute in the middle.

The store is held at a steady size: each client deletes its oldest episode whenever it
holds more than `KEEP`, so that memory and latency over time show the service itself (a
leak, a pile-up), not a store that grows. Texts are the benchmarks' chat-like sentences.

The embedder and the LLM are a local OpenAI-compatible server (tests/openai_stub.py), so
that the fault is a real one on the wire: for the fault's minute every embedding request
gets a 500. Reported: requests and errors by status, acknowledged writes missing at the end
(must be 0) and deleted ones still there, p95 per route per window, and the server's RSS
and open file descriptors over time (flat after warm-up is the target)."""

from __future__ import annotations

import os
import random
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from tests.live_server import free_port, start_server
from tests.openai_stub import StubState, openai_stub

from benchmarks.common import Report, sentences
from nexusai.evaluation.metrics import percentile

CLIENTS = 32
KEEP = 60  # episodes each client holds at most: about 2,000 in the store in all


@dataclass
class Ledger:
    """What the clients saw, shared under one lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: list[tuple[float, str, int, float]] = field(default_factory=list)  # t, route, status, ms
    written: set[int] = field(default_factory=set)
    deleted: set[int] = field(default_factory=set)


def _one(
    client: httpx.Client, session: int, mine: list[int], rng: random.Random, words: str
) -> tuple[str, int, list[int], list[int]]:
    """One request: (route, status, ids written, ids deleted). A client over its share
    deletes its oldest episode; otherwise the kind is drawn."""
    kind = rng.choices(["chat", "context", "write", "search"], [1, 3, 3, 2])[0]
    if len(mine) > KEEP:
        victim = mine.pop(0)
        status = client.delete(f"/episodes/{victim}").status_code
        return "delete", status, [], [victim] if status == 204 else []
    if kind == "chat":
        answer = client.post("/chat", json={"sessionId": session, "message": f"about {words}"})
        body = answer.json() if answer.status_code in (200, 502) else {}
        ids = [body.get("userEpisodeId"), body.get("assistantEpisodeId")]
        return "chat", answer.status_code, [int(i) for i in ids if i], []
    if kind == "context":
        answer = client.post("/context", json={"sessionId": session, "message": words})
        return "context", answer.status_code, [], []
    if kind == "search":
        answer = client.get("/episodes/search", params={"q": words, "sessionIds": str(session)})
        return "search", answer.status_code, [], []
    batch = [{"speaker": "user", "content": f"{words} {n}"} for n in range(rng.randint(1, 3))]
    answer = client.post(f"/sessions/{session}/episodes", json={"episodes": batch})
    stored = [int(e["id"]) for e in answer.json()["episodes"]] if answer.status_code == 201 else []
    return "write", answer.status_code, stored, []


def _client(
    url: str, sessions: list[int], until: float, seed: int, ledger: Ledger, started: float
) -> None:
    rng = random.Random(seed)
    texts = sentences(10**7, seed=seed)
    mine: list[int] = []
    with httpx.Client(base_url=url, timeout=60) as client:
        while time.monotonic() < until:
            session = rng.choice(sessions)
            began = time.perf_counter()
            try:
                route, status, written, deleted = _one(client, session, mine, rng, next(texts))
            except httpx.HTTPError:
                route, status, written, deleted = "transport", 0, [], []
            elapsed = (time.perf_counter() - began) * 1000
            mine.extend(written)
            with ledger.lock:
                ledger.calls.append((time.monotonic() - started, route, status, elapsed))
                ledger.written.update(written)
                ledger.deleted.update(deleted)


def _fault(stub: StubState, start: float, seconds: float, stop: threading.Event) -> None:
    if stop.wait(start):
        return
    stub.embed_mode = "error"
    stop.wait(seconds)
    stub.embed_mode = "ok"


@dataclass(frozen=True)
class Sample:
    at: float
    rss: int  # MB, all of it
    anon: int  # MB the process allocated (heap, arenas): where a leak shows
    file: int  # MB of mapped files in memory (vector storage, libraries): the kernel may drop
    fds: int


def _sample(pid: int, started: float, samples: list[Sample], stop: threading.Event) -> None:
    """The server's memory and open descriptors, every 5 s."""
    while not stop.wait(5):
        try:
            status = dict(
                line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            )
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except (OSError, ValueError):
            return
        mb = {k: int(status[k].split()[0]) // 1024 for k in ("VmRSS", "RssAnon", "RssFile")}
        at = time.monotonic() - started
        samples.append(Sample(at, mb["VmRSS"], mb["RssAnon"], mb["RssFile"], fds))


def _mappings(pid: int, top: int = 6) -> list[tuple[str, int]]:
    """Where the server's resident memory is at the end (MB per mapping, files of one
    directory together), to tell a leak from a cache."""
    sizes: Counter[str] = Counter()
    name = "(anonymous)"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        first = line.split(maxsplit=5)
        if len(first) >= 5 and "-" in first[0] and ":" in first[3]:
            name = first[5] if len(first) > 5 else "(anonymous)"
            # Files of one directory together; "[heap]" and the like in parentheses.
            name = str(Path(name).parent) if name.startswith("/") else name.replace("[", "(")
            name = name.replace("]", ")")
        elif line.startswith("Rss:"):
            sizes[name] += int(line.split()[1])
    return [(n, kb // 1024) for n, kb in sizes.most_common(top)]


def _missing(url: str, ledger: Ledger) -> tuple[int, int]:
    """(acknowledged writes not found, acknowledged deletes still found)."""
    wanted = sorted(ledger.written - ledger.deleted)
    found: set[int] = set()
    with httpx.Client(base_url=url, timeout=60) as check:
        for start in range(0, len(wanted), 1000):
            chunk = ",".join(map(str, wanted[start : start + 1000]))
            found |= {e["id"] for e in check.get("/episodes", params={"ids": chunk}).json()}
        gone = sorted(ledger.deleted)
        still = 0
        for start in range(0, len(gone), 1000):
            chunk = ",".join(map(str, gone[start : start + 1000]))
            still += len(check.get("/episodes", params={"ids": chunk}).json())
    return len(set(wanted) - found), still


def run(quick: bool = False) -> None:
    seconds = 60.0 if quick else float(os.environ.get("NEXUS_SOAK_SECONDS", "300"))
    fault_seconds = min(60.0, seconds / 5)
    window = 300.0 if seconds >= 1800 else seconds / 5
    ledger, stop = Ledger(), threading.Event()
    samples: list[Sample] = []
    with tempfile.TemporaryDirectory() as tmp, openai_stub() as (stub_url, stub):
        env = {
            "NEXUS_EMBEDDER": "openai",
            "NEXUS_EMBEDDER_BASE_URL": stub_url,
            "NEXUS_EMBEDDER_MODEL": "stub",
            "NEXUS_EMBEDDER_DIMENSION": "8",
            "NEXUS_EMBEDDER_TIMEOUT": "2",
            "NEXUS_LLM_BASE_URL": stub_url,
            "NEXUS_LLM_MODEL": "stub",
        }
        port = free_port()
        process = start_server(Path(tmp), port, **env)
        url = f"http://127.0.0.1:{port}"
        try:
            with httpx.Client(base_url=url) as setup:
                setup.patch("/settings", json={"keywordWeight": 1.0})
                project = setup.post("/projects", json={"name": "soak"}).json()["id"]
                sessions = [
                    setup.post("/sessions", json={"projectId": project}).json()["id"]
                    for _ in range(8)
                ]
            started = time.monotonic()
            until = started + seconds
            helpers = [
                threading.Thread(
                    target=_fault, args=(stub, (seconds - fault_seconds) / 2, fault_seconds, stop)
                ),
                threading.Thread(target=_sample, args=(process.pid, started, samples, stop)),
            ]
            clients = [
                threading.Thread(target=_client, args=(url, sessions, until, n, ledger, started))
                for n in range(CLIENTS)
            ]
            for thread in helpers + clients:
                thread.start()
            for thread in clients:
                thread.join()
            stop.set()
            for thread in helpers:
                thread.join()
            missing, undeleted = _missing(url, ledger)
            where = _mappings(process.pid)
        finally:
            process.terminate()
            process.wait(timeout=60)
    _print(seconds, fault_seconds, window, ledger, samples, missing, undeleted)
    places = Report("where the server's memory is at the end", ["mapping", "MB"])
    for name, mb in where:
        places.add(name.replace(tmp, "<data dir>"), mb)
    places.print()


def _print(
    seconds: float,
    fault: float,
    window: float,
    ledger: Ledger,
    samples: list[Sample],
    missing: int,
    undeleted: int,
) -> None:
    statuses = Counter((route, status) for _, route, status, _ in ledger.calls)
    report = Report(
        f"Soak: {CLIENTS} clients for {seconds:.0f} s,"
        f" embedder failing for {fault:.0f} s in the middle",
        ["route", "requests", "by status"],
    )
    for route in sorted({r for r, _ in statuses}):
        by = ", ".join(f"{s}: {n}" for (r, s), n in sorted(statuses.items()) if r == route)
        report.add(route, sum(n for (r, _), n in statuses.items() if r == route), by)
    report.notes.append(
        f"{len(ledger.written)} acknowledged writes, {missing} missing at the end;"
        f" {len(ledger.deleted)} acknowledged deletes, {undeleted} still there"
    )
    report.print()
    latency = Report(
        f"p95 ms per route per {window:.0f} s window",
        ["route", *(_label(w, window) for w in _windows(seconds, window))],
    )
    by_route: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for t, route, _, ms in ledger.calls:
        by_route[route][min(int(t // window), len(_windows(seconds, window)) - 1)].append(ms)
    for route, buckets in sorted(by_route.items()):
        latency.add(
            route,
            *(percentile(buckets[w], 95) if buckets[w] else "-" for w in _windows(seconds, window)),
        )
    latency.print()
    memory = Report(
        "server memory and open file descriptors",
        ["at s", "RSS MB", "anonymous MB", "mapped files MB", "fds"],
    )
    step = max(1, len(samples) // 12)
    for sample in samples[::step] + samples[-1:]:
        memory.add(f"{sample.at:.0f}", sample.rss, sample.anon, sample.file, sample.fds)
    warm = next((sample for sample in samples if sample.at >= window), None)
    if warm and samples:
        end = samples[-1]
        memory.notes.append(
            f"after warm-up ({warm.at:.0f} s) to the end: RSS {warm.rss} -> {end.rss} MB"
            f" ({(end.rss - warm.rss) / warm.rss:+.0%}), anonymous {warm.anon} -> {end.anon} MB"
            f" ({(end.anon - warm.anon) / warm.anon:+.0%}), descriptors {warm.fds} -> {end.fds}"
        )
    memory.print()


def _windows(seconds: float, window: float) -> list[int]:
    return list(range(max(1, round(seconds / window))))


def _label(index: int, window: float) -> str:
    return f"{index * window:.0f}-{(index + 1) * window:.0f} s"
