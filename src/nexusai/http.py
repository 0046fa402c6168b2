"""HTTP plumbing shared by both services: camelCase models and error responses.

Every error reaches the client as JSON `{"detail": "<what to fix>"}` with a 4xx status;
an unexpected exception is logged here and answered with a 500 that carries no traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from nexusai.errors import InvalidInput, NexusError
from nexusai.schemas import ErrorOut

log = logging.getLogger("nexusai.http")


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorOut, "description": description}


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: _error("Missing or wrong API key (when NEXUS_API_KEY is set)"),
    404: _error("An id that does not exist"),
    409: _error("Conflicts with what is stored"),
    413: _error("Over a size limit (the message gives it)"),
    422: _error("Invalid input (the message names the field)"),
    502: _error("The LLM failed"),
    503: _error("A service this one needs is unavailable"),
}


def parse_id_list(name: str, raw: str | None) -> list[int] | None:
    """`1,2,3` -> [1, 2, 3]; None when the parameter is absent; 422 on anything else."""
    if raw is None:
        return None
    parts = [part.strip() for part in raw.split(",")]
    if not all(part.isascii() and part.isdigit() for part in parts):
        bad = next(p for p in parts if not (p.isascii() and p.isdigit()))
        raise InvalidInput(
            f"{name} must be a comma-separated list of integer ids such as 1,2,3; "
            f"{bad!r} is not an id"
        )
    return [int(part) for part in parts]


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path")]
    return ".".join(parts) or "body"


def _describe(error: Any) -> dict[str, str]:
    if error["type"] == "json_invalid":
        reason = error.get("ctx", {}).get("error", "")
        where = error["loc"][-1]
        return {"field": "body", "message": f"not valid JSON: {reason} (character {where})"}
    return {"field": _field(error["loc"]), "message": error["msg"]}


async def _domain_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, NexusError)
    return JSONResponse({"detail": str(exc)}, status_code=exc.status_code)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [_describe(e) for e in exc.errors()]
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return JSONResponse({"detail": detail, "errors": errors}, status_code=422)


async def _number_too_large(_: Request, exc: Exception) -> JSONResponse:
    # SQLite integers are 64-bit; a larger id or number cannot name anything stored.
    detail = "a number in the request is too large: ids and counts stop at 2**63 - 1"
    return JSONResponse({"detail": detail}, status_code=422)


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"detail": "internal error; the server log has the details"}, 500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(NexusError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(OverflowError, _number_too_large)
    app.add_exception_handler(Exception, _unexpected_error)
