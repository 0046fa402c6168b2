"""The door of the service: API keys and the request body limit, before any route runs.

A pure ASGI middleware, so that an oversized body is refused as it streams in, not after
it has been read into memory. Keys are compared in constant time and never echoed.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Sequence
from typing import Protocol

import anyio.to_thread
from starlette.exceptions import HTTPException

from nexusai.access import ADMIN, Principal, refusal
from nexusai.errors import NexusError
from nexusai.http import error_body
from nexusai.types import ASGIApp, Message, Receive, Scope, Send

# Liveness, readiness, the API's own description and the inspector's static page hold no
# stored data: a browser or a probe opens them without a key (the page then asks for one).
OPEN_PATHS = frozenset({"/health", "/ready", "/docs", "/openapi.json", "/ui"})
OPEN_PREFIXES = ("/docs-assets/", "/ui/")
STREAMED_PATHS = frozenset({"/import"})  # spooled to disk, so no body limit
JSON_METHODS = frozenset({"POST", "PUT", "PATCH"})


class ProjectKeys(Protocol):
    def verify(self, presented: str) -> Principal | None: ...

    def any_active(self) -> bool: ...


class BodyTooLarge(HTTPException):
    """Raised from inside the body read: FastAPI passes HTTP exceptions through as they are,
    so the client gets this 413 and its message."""


class Guard:
    def __init__(
        self,
        app: ASGIApp,
        api_keys: Sequence[str],
        max_body_bytes: int,
        project_keys: Callable[[], ProjectKeys | None] = lambda: None,
        on_refused: Callable[[str, str], None] = lambda reason, path: None,
    ) -> None:
        self.app = app
        self.keys = [key.encode() for key in api_keys]
        self.max_body_bytes = max_body_bytes
        self.project_keys = project_keys  # None until the store is open
        self.on_refused = on_refused  # (reason, path): counted and logged, never the key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not is_open(scope["path"]) and not await self._admitted(scope, send):
            return
        if scope["path"] in STREAMED_PATHS:
            await self.app(scope, receive, send)
            return
        if _json_body_without_json_type(scope):
            detail = (
                "the request body must be JSON: send it with Content-Type: application/json"
                " (curl: -H 'Content-Type: application/json', or --json)"
            )
            await _reply(scope, send, 415, detail)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await _reply(scope, send, 413, self._too_large())
            return
        await self._limited(scope, receive, send)

    async def _admitted(self, scope: Scope, send: Send) -> bool:
        """Who is asking (kept in the request's state) and whether they may; refuses
        with 401 or 403 and returns False when not."""
        try:
            principal = await self._principal(_bearer(scope))
        except NexusError as exc:  # the store could not be asked (503): say so
            await _reply(scope, send, exc.status_code, str(exc))
            return False
        if principal is None:
            self.on_refused("unauthorized", scope["path"])
            detail = "missing or wrong API key: send Authorization: Bearer <key>"
            await _reply(scope, send, 401, detail, [(b"www-authenticate", b"Bearer")])
            return False
        scope.setdefault("state", {})["principal"] = principal
        query = scope.get("query_string", b"").decode("latin-1")
        reason = refusal(principal, scope["method"], scope["path"], query)
        if reason is not None:
            self.on_refused("forbidden", scope["path"])
            await _reply(scope, send, 403, reason)
            return False
        return True

    async def _principal(self, given: bytes | None) -> Principal | None:
        matched = False
        for key in self.keys:  # every key is compared, so timing says nothing about which
            matched |= hmac.compare_digest(given or b"", key)
        if matched:
            return ADMIN
        project_keys = self.project_keys()
        if project_keys is None or (given is None and self.keys):
            return None if self.keys else ADMIN  # nothing the store could change
        # The store is asked off the event loop: a database that is slow to answer must
        # not hold up every other request meanwhile.
        return await anyio.to_thread.run_sync(self._by_project_key, project_keys, given)

    def _by_project_key(self, project_keys: ProjectKeys, given: bytes | None) -> Principal | None:
        if given:
            found = project_keys.verify(given.decode("utf-8", "replace"))
            if found is not None:
                return found
        # A service with no key of either kind is open, as on a developer's machine.
        return None if self.keys or project_keys.any_active() else ADMIN

    async def _limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body_bytes:
                raise BodyTooLarge(413, self._too_large())
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await _reply(scope, send, 413, self._too_large())

    def _too_large(self) -> str:
        return (
            f"the request body is over the limit of {self.max_body_bytes} bytes "
            "(NEXUS_MAX_BODY_BYTES); send large files to POST /import"
        )


def _bearer(scope: Scope) -> bytes | None:
    header = dict(scope["headers"]).get(b"authorization", b"")
    scheme, _, given = header.partition(b" ")
    return given.strip() if scheme.lower() == b"bearer" and given.strip() else None


def is_open(path: str) -> bool:
    """Paths anyone may ask for, with or without a key (liveness, docs, the page)."""
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


def _json_body_without_json_type(scope: Scope) -> bool:
    """A write that carries a body (or may: chunked) but does not say it is JSON."""
    if scope["method"] not in JSON_METHODS:
        return False
    headers = dict(scope["headers"])
    chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
    if not chunked and not _content_length(scope):
        return False  # no body: routes whose body is optional take none
    kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    return not (kind == b"application/json" or kind.endswith(b"+json"))


def _content_length(scope: Scope) -> int | None:
    raw = dict(scope["headers"]).get(b"content-length")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


async def _reply(
    scope: Scope,
    send: Send,
    status: int,
    detail: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = json.dumps(error_body(scope["path"], status, detail)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": body})
