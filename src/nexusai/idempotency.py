"""Writes a client may send again: answered once, and the answer replayed to every retry.

A client that times out does not know whether its write landed, so it sends it again (the
openai SDK does by itself, and so do people). Each such write has a key: the request's
`Idempotency-Key` header, as Stripe's and OpenAI's clients send it, or else, for a chat
turn, a digest of the request itself. While the first request with a key runs, a retry
waits for it; after it answered, a retry gets the same answer without running again. A key
sent again with a different request is refused. Keys live in this process: a retry that
reaches another replica, or the service after a restart, is a new request.

A digest alone cannot tell a retry from a real new turn that says the same ("ok", then
"tell me more", then "ok"; "sure" twice): a request known by its digest is a retry while
the first still runs, and after it only when nothing was stored in the session since the
first began (the caller's `state`). A client that wants a replay after that sends a key.
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

import anyio.from_thread
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
    state: object = None  # what the caller's `state()` read before the work ran, or after


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
        self,
        key: str,
        fingerprint: str,
        keep: float,
        work: Callable[[], T],
        state: Callable[[], object] | None = None,
        since_answer: Callable[[], bool] = lambda: False,
    ) -> tuple[T, bool]:
        """`work()`'s answer and False, or a retry's replay of it and True. A first try that
        failed answered nothing: its retry runs the work again. With `state`, a request that
        comes after the first answered is its retry only while `state()` still reads what
        it read before the first ran (nothing was stored since), or, when `since_answer()`
        says so as the first answers, what it read then; one that came while the first ran
        is its retry always."""
        now = None if state is None else state()
        while True:
            entry, mine = self._claim(key, fingerprint, now)
            if mine:
                return self._run(key, entry, keep, work, state, since_answer), False
            arrived_running = not entry.done.is_set()
            if not entry.done.wait(self.wait_seconds):
                raise StillRunning("the same request is still running; retry later")
            if entry.answered and (arrived_running or state is None or now == entry.state):
                return entry.answer, True
            if entry.answered:  # something was stored since: this is a new request
                self._drop(key, entry)

    def _drop(self, key: str, entry: _Entry) -> None:
        with self._lock:
            if self._entries.get(key) is entry:
                del self._entries[key]

    def _claim(self, key: str, fingerprint: str, state: object) -> tuple[_Entry, bool]:
        with self._lock:
            now = self._clock()
            entry = self._entries.get(key)
            if entry is not None and entry.expires > now:
                if entry.fingerprint != fingerprint:
                    raise KeyReused(f"{HEADER} sent before with a different request")
                return entry, False
            entry = self._entries[key] = _Entry(fingerprint, state=state)
            self._entries.move_to_end(key)
            self._forget_oldest(now)
            return entry, True

    def _run(
        self,
        key: str,
        entry: _Entry,
        keep: float,
        work: Callable[[], T],
        state: Callable[[], object] | None,
        since_answer: Callable[[], bool],
    ) -> T:
        try:
            answer = work()
            if state is not None and since_answer():
                entry.state = state()
        except BaseException:
            self._drop(key, entry)
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
    digested: bool = False  # known by its digest, not by a key the client chose


def write_key(request: Request, body: Any, by_digest: bool) -> WriteKey | None:
    """The request's key, per caller: its `Idempotency-Key` (the same key on another route
    or session is another request, refused), or (`by_digest`) the digest of its body, route
    and the headers that pick its session; None when it has neither."""
    principal = principal_of(request)
    who = [principal.project_id, principal.key_id]
    fingerprint = digest(who, request.method, request.url.path, body, _session_headers(request))
    given = request.headers.get(HEADER)
    if given is not None:
        if not given.strip() or len(given) > MAX_KEY_CHARS:
            raise InvalidInput(f"{HEADER} must be 1 to {MAX_KEY_CHARS} characters")
        return WriteKey(digest(who, given), fingerprint, KEY_SECONDS)
    return WriteKey(fingerprint, fingerprint, DIGEST_SECONDS, True) if by_digest else None


def _session_headers(request: Request) -> list[str | None]:
    return [request.headers.get(name) for name in ("X-Nexus-Session", "X-Nexus-Project")]


def answered_once(
    request: Request,
    response: Response,
    body: Any,
    work: Callable[[], T],
    *,
    by_digest: Callable[[], object] | None = None,
    carries_answers: bool = False,
) -> T:
    """`work()`'s answer, or the answer it gave the first try of this request. A request
    without an `Idempotency-Key` is known by its digest only when `by_digest` is given: it
    reads what a retry must find unchanged since the first try began (what its session
    stored last), or only since the first answered when that answer never reached its
    client (it had gone: a timeout), or when the body carries the conversation with the
    answers the client was given (`carries_answers`: the same body again means it was
    not answered)."""

    def since_answer() -> bool:
        return carries_answers or client_gone(request)

    key = write_key(request, body, by_digest is not None)
    if key is None:
        return work()
    replays: Replays = request.app.state.replays
    state = by_digest if key.digested else None
    try:
        answer, replayed = replays.once(
            key.key, key.fingerprint, key.keep, work, state, since_answer
        )
    except KeyReused:
        raise KeyReused(
            f"{HEADER} {request.headers.get(HEADER)!r} was sent before with a different request"
            " (another body, route or session); use a new key for a new request"
        ) from None
    if replayed:
        response.headers[REPLAYED] = "true"
    return answer


def client_gone(request: Request) -> bool:
    """Whether the request's client has hung up, asked from the worker thread a sync route
    runs in (False where that cannot be asked)."""
    try:
        return bool(anyio.from_thread.run(request.is_disconnected))
    except RuntimeError:  # not in a thread anyio started: no event loop to ask
        return False
