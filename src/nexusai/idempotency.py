"""Writes a client may send again: answered once, and the answer replayed to every retry.

A client that times out does not know whether its write landed, so it sends it again (the
openai SDK does by itself, and so do people). Each such write has a key: the request's
`Idempotency-Key` header, as Stripe's and OpenAI's clients send it, or else, for a chat
turn, a digest of the request itself. While the first request with a key runs, a retry
waits for it; after it answered, a retry gets the same answer without running again. A key
sent again with a different request is refused. Keys live in this process: a retry that
reaches another replica, or the service after a restart, is a new request.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from nexusai.access import principal_of
from nexusai.errors import InvalidInput, NexusError

T = TypeVar("T")

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"  # set on an answer given again, as Stripe's API does
KEY_SECONDS = 24 * 3600.0  # how long an answer to a key the client chose is kept
# A request without a key is known by its digest, for a short time only: the same message
# sent again minutes later is a new turn, and a client that retries does so at once.
DIGEST_SECONDS = 120.0
MAX_KEY_CHARS = 255


class KeyReused(InvalidInput):
    """The same key with a different request: the client's bug, never replayed."""


class StillRunning(NexusError):
    status_code = 409


@dataclass
class _Entry:
    fingerprint: str
    done: threading.Event = field(default_factory=threading.Event)
    answered: bool = False
    answer: Any = None
    expires: float = float("inf")  # set when it answers


class Replays:
    """The keys of this process's recent writes and their answers (at most `capacity`,
    the oldest forgotten first)."""

    def __init__(
        self,
        wait_seconds: float = 600.0,
        capacity: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.wait_seconds = wait_seconds
        self.capacity = capacity
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def once(
        self, key: str, fingerprint: str, keep: float, work: Callable[[], T]
    ) -> tuple[T, bool]:
        """`work()`'s answer and False, or a retry's replay of it and True. A first try that
        failed answered nothing: its retry runs the work again."""
        while True:
            entry, mine = self._claim(key, fingerprint)
            if mine:
                return self._run(key, entry, keep, work), False
            if not entry.done.wait(self.wait_seconds):
                raise StillRunning(f"a request with this {HEADER} is still running; retry later")
            if entry.answered:
                return entry.answer, True

    def _claim(self, key: str, fingerprint: str) -> tuple[_Entry, bool]:
        with self._lock:
            now = self._clock()
            entry = self._entries.get(key)
            if entry is not None and entry.expires > now:
                if entry.fingerprint != fingerprint:
                    raise KeyReused(
                        f"{HEADER} {key!r} was sent before with a different request; use a"
                        " new key for a new request"
                    )
                return entry, False
            entry = self._entries[key] = _Entry(fingerprint)
            self._entries.move_to_end(key)
            self._forget_oldest(now)
            return entry, True

    def _run(self, key: str, entry: _Entry, keep: float, work: Callable[[], T]) -> T:
        try:
            answer = work()
        except BaseException:
            with self._lock:
                if self._entries.get(key) is entry:
                    del self._entries[key]
            entry.done.set()
            raise
        entry.answer, entry.answered = answer, True
        entry.expires = self._clock() + keep
        entry.done.set()
        return answer

    def _forget_oldest(self, now: float) -> None:
        while len(self._entries) > self.capacity:
            oldest_key, oldest = next(iter(self._entries.items()))
            if not oldest.done.is_set() and oldest.expires > now:
                break  # a running request's key is never dropped from under its retries
            del self._entries[oldest_key]


def digest(*parts: Any) -> str:
    """A stable digest of JSON-able parts (dict keys in any order give the same one)."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class WriteKey:
    """Which earlier request a write repeats: its key, what it must match, how long kept."""

    key: str
    fingerprint: str
    keep: float


def write_key(request: Request, body: Any, by_digest: bool) -> WriteKey | None:
    """The request's key, per caller and route: its `Idempotency-Key`, or (`by_digest`) the
    digest of its body and the headers that pick its session; None when it has neither."""
    principal = principal_of(request)
    who = [principal.project_id, principal.key_id, request.method, request.url.path]
    fingerprint = digest(who, body, _session_headers(request))
    given = request.headers.get(HEADER)
    if given is not None:
        if not given.strip() or len(given) > MAX_KEY_CHARS:
            raise InvalidInput(f"{HEADER} must be 1 to {MAX_KEY_CHARS} characters")
        return WriteKey(digest(who, given), fingerprint, KEY_SECONDS)
    return WriteKey(fingerprint, fingerprint, DIGEST_SECONDS) if by_digest else None


def _session_headers(request: Request) -> list[str | None]:
    return [request.headers.get(name) for name in ("X-Nexus-Session", "X-Nexus-Project")]


def answered_once(
    request: Request, response: Response, body: Any, by_digest: bool, work: Callable[[], T]
) -> T:
    """`work()`'s answer, or the answer it gave the first try of this request."""
    key = write_key(request, body, by_digest)
    if key is None:
        return work()
    replays: Replays = request.app.state.replays
    answer, replayed = replays.once(key.key, key.fingerprint, key.keep, work)
    if replayed:
        response.headers[REPLAYED] = "true"
    return answer
