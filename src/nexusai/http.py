"""HTTP plumbing shared by both services: camelCase models and error responses.

Every error reaches the client as JSON `{"detail": "<what to fix>"}` with a 4xx status;
an unexpected exception is logged here and answered with a 500 that carries no traceback.
"""

from __future__ import annotations

import errno
import json
import logging
from collections.abc import Callable, Coroutine
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from fastapi import FastAPI, HTTPException, Path, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.routing import APIRoute

from nexusai.errors import DISK_FULL, InvalidInput, NexusError
from nexusai.models import unstorable
from nexusai.refusals import field_path, refusal
from nexusai.schemas import MAX_ID, ErrorOut

log = logging.getLogger("nexusai.http")


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorOut, "description": description}


_ERRORS: dict[int, str] = {
    401: "Missing or wrong API key (when NEXUS_API_KEY is set)",
    403: "A project key may not do this (it is read-only, or this needs the admin key)",
    404: "An id that does not exist (or of a project the key does not see)",
    409: "Conflicts with what is stored",
    413: "Over a size limit (the message gives it)",
    415: "The body is not sent as application/json",
    422: "Invalid input (the message names the field)",
    502: "The LLM failed (the user's message is stored)",
    503: "A service this one needs is unavailable",
    507: "The disk is full: nothing of the request was stored",
}


# OpenAI's clients read `{"error": {...}}` with a string code: every answer under this
# prefix is shaped so, the door's and the validator's refusals included.
OPENAI_PREFIX = "/v1/"
OPENAI_CODES = {
    400: "unsupported_parameter",
    401: "invalid_api_key",
    403: "insufficient_permissions",
    404: "not_found",
    409: "conflict",
    413: "request_too_large",
    415: "invalid_content_type",
    422: "invalid_value",
    502: "upstream_error",
    503: "service_unavailable",
    507: "storage_full",
}


def openai_error(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error object: a string code, and the field at fault when there is one."""
    kind = "invalid_request_error" if status < 500 else "api_error"
    code = OPENAI_CODES.get(status, "error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_body(path: str, status: int, detail: str, param: str | None = None) -> dict[str, Any]:
    """An error's JSON in the shape the route's clients read."""
    if path.startswith(OPENAI_PREFIX):
        return openai_error(status, detail, param)
    return {"detail": detail}


def errors(*codes: int, open_route: bool = False) -> dict[int | str, dict[str, Any]]:
    """The error answers one operation can give, for its OpenAPI entry: the codes named,
    and 401 and 403 (keys) unless the route is open."""
    wanted = sorted({*codes, *(() if open_route else (401, 403))})
    return {code: _error(_ERRORS[code]) for code in wanted}


PathId = Annotated[int, Path(ge=1, le=MAX_ID, description="An id (1 to 2**63 - 1)")]


def parse_id_list(name: str, raw: str | None) -> list[int] | None:
    """`1,2,3` -> [1, 2, 3]; None when the parameter is absent; 422 on anything else."""
    if raw is None:
        return None
    parts = [part.strip() for part in raw.split(",")]
    bad = next((p for p in parts if not (p.isascii() and p.isdigit())), None)
    if bad is not None:
        raise InvalidInput(
            f"{name} must be a comma-separated list of integer ids such as 1,2,3; "
            f"{bad!r} is not an id"
        )
    ids = [int(part) for part in parts]
    if any(not 1 <= i <= MAX_ID for i in ids):
        raise InvalidInput(f"{name}: ids are from 1 to 2**63 - 1")
    return ids


def _describe(error: Any) -> dict[str, str]:
    if error["type"] == "json_invalid":
        reason = error.get("ctx", {}).get("error", "")
        where = error["loc"][-1]
        return {"field": "body", "message": f"not valid JSON: {reason} (character {where})"}
    if error["type"] == "string_unicode":  # JSON text with a lone surrogate: say which
        return {"field": field_path(error["loc"]), "message": unstorable("\ud800") or ""}
    field, message = refusal(error["loc"], error["msg"])
    return {"field": field, "message": message}


def _answer(
    request: Request, status: int, detail: str, param: str | None = None, **extra: Any
) -> JSONResponse:
    body = error_body(request.url.path, status, detail, param)
    if "detail" in body:
        body.update(extra)
    return JSONResponse(body, status_code=status)


async def _domain_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, NexusError)
    return _answer(request, exc.status_code, str(exc), getattr(exc, "param", None))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [_describe(e) for e in exc.errors()]
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return _answer(request, 422, detail, errors=errors)


async def _number_too_large(request: Request, exc: Exception) -> JSONResponse:
    # SQLite integers are 64-bit; a larger id or number cannot name anything stored.
    detail = "a number in the request is too large: ids and counts stop at 2**63 - 1"
    return _answer(request, 422, detail)


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        log.error("disk full on %s %s", request.method, request.url.path)
        return _answer(request, 507, DISK_FULL)
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return _answer(request, 500, "internal error; the server log has the details")


def known_query_keys(request: Request) -> None:
    """Query strings are as strict as bodies: a key the route does not take (a typo, a wrong
    case: `projectid`) is a 422 that names it, never silently ignored."""
    dependant = getattr(request.scope.get("route"), "dependant", None)
    if dependant is None:
        return
    taken = _query_params(dependant)
    # A parameter named `prefix.*` stands for every key that starts with `prefix.`.
    prefixes = tuple(name[:-1] for name in taken if name.endswith(".*"))
    unknown = sorted(
        key for key in set(request.query_params) - set(taken) if not key.startswith(prefixes)
    )
    if unknown:
        offer = f"it takes {', '.join(sorted(taken))}" if taken else "it takes none"
        raise InvalidInput(f"unknown query parameter {unknown[0]!r}: {offer}")
    for name, repeatable in taken.items():
        if not repeatable and len(request.query_params.getlist(name)) > 1:
            raise InvalidInput(f"query parameter {name!r} is given more than once; give it once")


def _query_params(dependant: Any) -> dict[str, bool]:
    """The query parameters a route and its dependencies declare, and whether each may
    be given more than once (a list)."""
    params = {
        param.alias: _is_list(param.field_info.annotation) for param in dependant.query_params
    }
    for inner in dependant.dependencies:
        params |= _query_params(inner)
    return params


def _is_list(annotation: Any) -> bool:
    """A list, or an optional one (`list[str] | None`)."""
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        return any(_is_list(arg) for arg in get_args(annotation))
    return origin in (list, tuple, set)


def endpoint_rows(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(`METHOD /path`, what it does) for every operation of an OpenAPI schema, in its
    order: what docs/api.md's table is generated from, so that it lists every route."""
    rows = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            said = operation.get("description") or operation["summary"]
            rows.append((f"{method.upper()} {path}", " ".join(said.split()).replace("|", "\\|")))
    return rows


class BodyUnreadable(HTTPException):
    """A JSON body that is no JSON a route can take, said precisely: FastAPI's own answer
    for these is "There was an error parsing the body"."""


class StrictJSONRequest(Request):
    """A request whose JSON body is read by `strict_json`."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = strict_json(await self.body())
        return self._json


class StrictJSONRoute(APIRoute):
    """Every route's JSON body read by `strict_json` (FastAPI's pattern for a custom
    request class); every router of both services is made with it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict


class _DuplicateKey(ValueError):
    pass


def strict_json(raw: bytes) -> Any:
    """JSON text as UTF-8, each object's keys once. Syntax errors stay FastAPI's (a 422
    with the position); what Python's parser refuses otherwise is a 400 that says what."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        said = f"body: not UTF-8 (byte {exc.start}); send JSON as UTF-8"
        raise BodyUnreadable(400, said) from None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError:
        raise
    except _DuplicateKey as exc:
        raise BodyUnreadable(422, f"body: {exc}") from None
    except RecursionError:
        raise BodyUnreadable(400, "body: nested too deeply to read; flatten it") from None
    except ValueError:  # an integer with more digits than Python reads (4,300)
        said = "body: a number has more digits than can be read; send so long a number as a string"
        raise BodyUnreadable(400, said) from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) == len(pairs):
        return found
    keys = [key for key, _ in pairs]
    twice = next(key for at, key in enumerate(keys) if key in keys[:at])
    raise _DuplicateKey(f"the key {twice!r} is given twice in one object; give it once")


async def _unreadable(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BodyUnreadable)
    return _answer(request, exc.status_code, str(exc.detail))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(BodyUnreadable, _unreadable)
    app.add_exception_handler(NexusError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(OverflowError, _number_too_large)
    app.add_exception_handler(Exception, _unexpected_error)


def install_offline_docs(app: FastAPI) -> None:
    """Swagger UI at /docs from the assets of an installed package (swagger-ui-bundle), so
    the docs work with no network, which is where nexusai runs."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles
    from swagger_ui_bundle import swagger_ui_path

    app.mount("/docs-assets", StaticFiles(directory=swagger_ui_path), name="docs-assets")

    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} - API docs",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon-32x32.png",
        )

    app.add_api_route("/docs", docs, include_in_schema=False)
