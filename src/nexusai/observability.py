"""Metrics (Prometheus text at GET /metrics), request ids and structured logs.

One registry per process: every app in it reports into the same counters, as a scraper
would expect from one process.
"""

from __future__ import annotations

import contextvars
import json
import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from nexusai.types import ASGIApp, Message, Receive, Scope, Send

REGISTRY = CollectorRegistry()
REQUESTS = Counter(
    "nexus_requests", "HTTP requests", ["method", "route", "status"], registry=REGISTRY
)
REQUEST_SECONDS = Histogram(
    "nexus_request_seconds", "HTTP request latency", ["method", "route"], registry=REGISTRY
)
RETRIEVAL_SECONDS = Histogram(
    "nexus_retrieval_seconds",
    "Retrieval latency per leg",
    ["leg"],
    registry=REGISTRY,
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)
EMBED_SECONDS = Histogram(
    "nexus_embedding_seconds",
    "Latency of one embedding call",
    registry=REGISTRY,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0),
)
AUTH_REFUSED = Counter(
    "nexus_auth_refused",
    "Requests refused at the door: no or a wrong key (unauthorized), or a key that may not",
    ["reason"],
    registry=REGISTRY,
)
EPISODES = Gauge("nexus_episodes_stored", "Episodes in the store", registry=REGISTRY)
FORGOTTEN = Counter(
    "nexus_episodes_forgotten",
    "Episodes deleted: one at a time, with their session or project, or by a filter",
    ["how"],
    registry=REGISTRY,
)
PENDING = Gauge("nexus_vectors_pending", "Episodes waiting for a vector", registry=REGISTRY)
ENTITIES_PENDING = Gauge(
    "nexus_entities_pending",
    "Episodes waiting for entity extraction, and entities waiting for a vector",
    registry=REGISTRY,
)

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


@contextmanager
def timed(histogram: Histogram, **labels: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        (histogram.labels(**labels) if labels else histogram).observe(time.perf_counter() - started)


@contextmanager
def stopwatch(timings: dict[str, float], name: str) -> Iterator[None]:
    """Adds the block's duration (ms) to `timings` under `name`: a turn's steps, for its
    Server-Timing header."""
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = (time.perf_counter() - started) * 1000


def render() -> bytes:
    return generate_latest(REGISTRY)


class RequestMetrics:
    """Counts and times every request by its route template (not its raw path, which
    would make one series per id), and gives each request an id for the logs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")[:64]
        token = request_id.set(given or uuid.uuid4().hex[:16])
        status = 500
        started = time.perf_counter()

        async def tagged_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"],
                    (b"x-request-id", request_id.get().encode()),
                ]
            await send(message)

        try:
            await self.app(scope, receive, tagged_send)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"]
            REQUESTS.labels(method, route, str(status)).inc()
            REQUEST_SECONDS.labels(method, route).observe(time.perf_counter() - started)
            request_id.reset(token)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "requestId": request_id.get(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        return True


def configure_logging(fmt: str) -> None:
    """Every log line of the process in one format, `json` (NEXUS_LOG_FORMAT=json) or plain
    text, both with the request id: nexusai's own, uvicorn's (its access lines too) and the
    MCP SDK's, which would otherwise each bring a format of their own. Set before the app
    is built, so the MCP SDK finds logging configured and adds no handler of its own."""
    handler = logging.StreamHandler()
    handler.addFilter(RequestIdFilter())
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")
        )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    for name in ("nexusai", "uvicorn", "uvicorn.error", "uvicorn.access", "mcp"):
        own = logging.getLogger(name)
        own.handlers = []  # theirs would print the line again, in their format
        own.propagate = True
    for chatty in ("httpx", "httpcore"):  # a line per internal request says nothing
        logging.getLogger(chatty).setLevel(logging.WARNING)
