"""Load: 32 concurrent clients against one `nexus serve` on loopback, mixing chat (against a
local OpenAI-compatible stub), context, episode writes and keyword searches, for a bounded
time. Reports requests/s, latency percentiles per endpoint, errors, and lost writes (rows
counted afterwards against the writes the service acknowledged)."""

from __future__ import annotations

import random
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import httpx
from tests.live_server import server_process
from tests.openai_stub import openai_stub

from benchmarks.common import Report
from nexusai.evaluation.metrics import percentile

CLIENTS = 32


def client_loop(
    url: str,
    sessions: list[int],
    until: float,
    seed: int,
    out: dict[str, list[float]],
    errors: dict[str, int],
    written: list[int],
    lock: threading.Lock,
) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=url, timeout=60) as client:
        while time.monotonic() < until:
            kind = rng.choice(["chat", "context", "write", "search"])
            session = rng.choice(sessions)
            started = time.perf_counter()
            try:
                ok, ids = request(client, kind, session, rng)
            except httpx.HTTPError:
                ok, ids = False, []
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                out[kind].append(elapsed)
                errors[kind] += not ok
                written.extend(ids)


def request(
    client: httpx.Client, kind: str, session: int, rng: random.Random
) -> tuple[bool, list[int]]:
    words = " ".join(
        rng.choice(["walrus", "garden", "train", "coffee", "deadline", "Lisbon"]) for _ in range(6)
    )
    if kind == "chat":
        response = client.post(
            "/chat", json={"sessionId": session, "message": f"tell me about {words}"}
        )
        body = response.json() if response.status_code == 200 else {}
        return response.status_code == 200, [
            i for i in (body.get("userEpisodeId"), body.get("assistantEpisodeId")) if i
        ]
    if kind == "context":
        response = client.post("/context", json={"sessionId": session, "message": words})
        return response.status_code == 200, []
    if kind == "write":
        batch = [{"speaker": "user", "content": f"{words} {i}"} for i in range(3)]
        response = client.post(f"/sessions/{session}/episodes", json={"episodes": batch})
        ids = [e["id"] for e in response.json()["episodes"]] if response.status_code == 201 else []
        return response.status_code == 201, ids
    response = client.get("/episodes/search", params={"q": words, "sessionIds": str(session)})
    return response.status_code == 200, []


def run(quick: bool = False) -> None:
    seconds = 10 if quick else 60
    out: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    written: list[int] = []
    lock = threading.Lock()
    with tempfile.TemporaryDirectory() as tmp, openai_stub() as (llm_url, _):
        env = {"NEXUS_LLM_BASE_URL": llm_url, "NEXUS_LLM_MODEL": "stub"}
        with server_process(Path(tmp), "all", **env) as url:
            with httpx.Client(base_url=url) as setup:
                setup.patch("/settings", json={"keywordWeight": 1.0})
                sessions = [setup.post("/sessions").json()["id"] for _ in range(8)]
            until = time.monotonic() + seconds
            threads = [
                threading.Thread(
                    target=client_loop, args=(url, sessions, until, i, out, errors, written, lock)
                )
                for i in range(CLIENTS)
            ]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - started
            with httpx.Client(base_url=url) as check:
                stored = {
                    e["id"]
                    for s in sessions
                    for e in check.get(
                        f"/sessions/{s}/episodes", params={"limit": 1000, "offset": 0}
                    ).json()
                }
                stored |= {
                    e["id"]
                    for s in sessions
                    for offset in range(1000, 20000, 1000)
                    for e in check.get(
                        f"/sessions/{s}/episodes", params={"limit": 1000, "offset": offset}
                    ).json()
                }
    total = sum(len(v) for v in out.values())
    report = Report(
        f"Load: {CLIENTS} clients for {seconds} s on loopback",
        ["endpoint", "requests", "errors", "p50 ms", "p95 ms", "p99 ms"],
    )
    for kind, samples in sorted(out.items()):
        report.add(
            kind,
            len(samples),
            errors[kind],
            percentile(samples, 50),
            percentile(samples, 95),
            percentile(samples, 99),
        )
    lost = len(set(written) - stored)
    report.notes.append(
        f"{total / elapsed:.1f} requests/s in all; {sum(errors.values())} errors; "
        f"{len(written)} acknowledged writes, {lost} lost."
    )
    report.print()
