"""What the service answered when it refused or failed a call, as exceptions that carry
its message; and what no answer at all is."""

from __future__ import annotations

from typing import Any

import httpx


class NexusAPIError(Exception):
    """The service refused or failed a call; `detail` is its message."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail


class UnauthorizedError(NexusAPIError): ...


class ForbiddenError(NexusAPIError):
    """The key is valid but may not do this (read-only, or it needs the admin key)."""


class NotFoundError(NexusAPIError): ...


class ConflictError(NexusAPIError): ...


class TooLargeError(NexusAPIError): ...


class InvalidInputError(NexusAPIError): ...


class LLMFailedError(NexusAPIError): ...


class StorageFullError(NexusAPIError):
    """The service's disk is full: nothing of the write was kept; send it again later."""


class UnavailableError(NexusAPIError):
    """The service (or one it needs) is down or does not answer; status 0 when no
    connection could be made at all, `timed_out` when one was made and nothing came."""

    timed_out = False
    reason = ""  # the transport's error, when no answer came at all


_ERRORS: dict[int, type[NexusAPIError]] = {
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: TooLargeError,
    415: InvalidInputError,
    422: InvalidInputError,
    502: LLMFailedError,
    503: UnavailableError,
    507: StorageFullError,
}


def checked(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            detail = str(response.json()["detail"])
        except (ValueError, KeyError, TypeError):
            detail = response.text[:300]
        raise _ERRORS.get(response.status_code, NexusAPIError)(response.status_code, detail)
    if response.headers.get("content-type", "").startswith("application/x-ndjson"):
        return response.text  # an export: JSON lines, given as they came
    return response.json() if response.content else None


def unreachable(url: str, exc: Exception) -> UnavailableError:
    reason = type(exc).__name__
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        detail = f"no nexusai service answers at {url} ({reason})"
    elif isinstance(exc, httpx.TimeoutException):
        detail = (
            f"the request to {url} timed out ({reason}): the service may have applied it."
            " Chat turns and episode batches are answered once, so sending the same call"
            " again is safe; raise the client's timeout for long LLM answers"
        )
    else:
        detail = f"the connection to {url} failed ({reason}): the request may have been applied"
    error = UnavailableError(0, detail)
    error.timed_out = isinstance(exc, httpx.TimeoutException)
    error.reason = type(exc).__name__
    return error
