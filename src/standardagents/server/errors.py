"""JSON errors for every failure the server reports, the guards that keep a bad request or
a crashing handler from ever reaching a client as a traceback, and the one JSON body reader
every route uses.

Every error body is ``{"error": {"code": ..., "message": ...}}`` so clients parse one shape.
A database's own error text never reaches a client: it is logged, and the client gets a
generic message (or a 400 naming the field, for a value no database may hold).
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse as _StarletteJSONResponse
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..exceptions import (
    AccessDenied,
    AuthenticationFailed,
    DefinitionError,
    NotFoundError,
    QuotaExceeded,
    ShuttingDownError,
    StandardAgentsError,
    StoreError,
    ThreadBusyError,
    UnstorableValueError,
)
from ..store.checks import MAX_JSON_DEPTH, json_problem

__all__ = [
    "ApiError",
    "BodyLimitMiddleware",
    "ErrorMiddleware",
    "JSONResponse",
    "StrictJSONRequest",
    "error_body",
    "error_of",
    "error_response",
    "http_exception_handler",
    "parse_json",
    "read_json",
]

log = logging.getLogger("standardagents.server")

_CODES = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 409: "conflict", 413: "payload_too_large",
    415: "unsupported_media_type", 422: "invalid_request", 500: "internal_error",
}


class ApiError(HTTPException):
    """An error answered as JSON with a status, a stable code and a message a user can act on."""

    def __init__(self, status: int, message: str, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(status_code=status, detail=message, headers=headers)
        self.code = code or _CODES.get(status, "error")
        self.message = message


class _BodyTooLarge(Exception):
    pass


def error_body(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code or _CODES.get(status, "error"), "message": message}}


def error_response(status: int, message: str, code: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, code), status_code=status, headers=headers)


_DB_FAILURE = "the database failed while handling this request; see the server log"


def _from_database(exc: BaseException) -> bool:
    """Whether a database error is anywhere in the exception's chain."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 20:
        if isinstance(current, StoreError):
            return True
        module = type(current).__module__
        if module.startswith(("sqlalchemy", "asyncpg", "sqlite3", "psycopg")):
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False


def error_of(exc: BaseException) -> tuple[int, str, str]:
    """(status, code, message) the API answers ``exc`` with."""
    if isinstance(exc, ApiError):
        return exc.status_code, exc.code, exc.message
    if isinstance(exc, HTTPException):
        default = {404: "no such route", 405: "method not allowed for this route"}
        detail = exc.detail if isinstance(exc.detail, str) and exc.detail not in ("Not Found", "Method Not Allowed") else None
        return exc.status_code, _CODES.get(exc.status_code, "error"), detail or default.get(exc.status_code, "request failed")
    if isinstance(exc, _BodyTooLarge):
        return 413, "payload_too_large", str(exc)
    if isinstance(exc, UnstorableValueError):
        return 400, "bad_request", str(exc)
    if _from_database(exc):
        return 500, "internal_error", _DB_FAILURE
    if isinstance(exc, NotFoundError):
        return 404, "not_found", str(exc)
    if isinstance(exc, AuthenticationFailed):
        return 401, "unauthorized", str(exc)
    if isinstance(exc, AccessDenied):
        return 403, "forbidden", str(exc)
    if isinstance(exc, DefinitionError):
        return 422, "invalid_request", str(exc)
    if isinstance(exc, ThreadBusyError):
        return 409, "thread_busy", str(exc)
    if isinstance(exc, ShuttingDownError):
        return 503, "shutting_down", str(exc)
    if isinstance(exc, QuotaExceeded):
        return 429, "quota_exceeded", str(exc)
    if isinstance(exc, StandardAgentsError):
        return 500, "runtime_error", str(exc)
    return 500, "internal_error", "the server failed while handling this request; see the server log"


async def http_exception_handler(request: Request, exc: Exception) -> Response:
    status, code, message = error_of(exc)
    headers = getattr(exc, "headers", None)
    return error_response(status, message, code, headers=headers)


class ErrorMiddleware:
    """Turns any exception a route raises into a JSON error (logged, never sent as a traceback)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            status, code, message = error_of(exc)
            if status >= 500 and not isinstance(exc, ShuttingDownError):
                log.exception("request %s %s failed", scope.get("method"), scope.get("path"))
            if started:
                return
            response = error_response(status, message, code,
                                      headers=dict(exc.headers or {})
                                      if isinstance(exc, ShuttingDownError | ApiError | QuotaExceeded) else None)
            await response(scope, receive, send)


def _nul_in_url(scope: Scope) -> bool:
    """A NUL character in the path or the query (``%00``): never a valid name or value."""
    if "\x00" in scope.get("path", ""):
        return True
    query = scope.get("query_string", b"")
    return b"%00" in query or b"\x00" in query


class BodyLimitMiddleware:
    """Refuses bodies over ``max_body`` bytes with 413, whether declared or streamed, and any
    URL carrying a NUL character with 400."""

    def __init__(self, app: ASGIApp, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body
        if _nul_in_url(scope):
            await error_response(400, "the URL contains a NUL character (%00)")(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await error_response(400, "Content-Length is not a number")(scope, receive, send)
                    return
                if declared > limit:
                    await error_response(413, f"the request body is {declared} bytes; the limit is {limit}")(scope, receive, send)
                    return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _BodyTooLarge(f"the request body exceeds the limit of {limit} bytes")
            return message

        await self.app(scope, limited_receive, send)


class _NotFinite(ValueError):
    pass


def _constant(name: str) -> Any:
    raise _NotFinite(f"{name} is not a JSON number: send finite numbers only")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(f"{text} is out of range for a number: send finite numbers only")
    return value


def parse_json(body: bytes | str, *, allow_nul: bool = False) -> Any:
    """Parse a request body strictly, or raise a 400 naming the problem: malformed JSON, NaN or
    an infinity (``NaN``, ``Infinity``, ``1e999``), nesting deeper than the limit, text that is
    not valid Unicode (an unpaired surrogate) or, unless ``allow_nul``, a NUL character."""
    try:
        data = json.loads(body, parse_constant=_constant, parse_float=_float)
    except _NotFinite as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ApiError(400, f"the body nests more than {MAX_JSON_DEPTH} levels deep") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}") from exc
    problem = json_problem(data, allow_nul=allow_nul, where="the body")
    if problem:
        raise ApiError(400, f"{problem}; nothing was stored")
    return data


async def read_json(request: Request, *, required: bool = True) -> dict[str, Any]:
    """The request's JSON object body; 415 for another media type, 400 when malformed (see
    :func:`parse_json`), 422 when it is not an object. An empty body reads as ``{}`` unless
    ``required``."""
    body = await request.body()
    if not body.strip():
        if required:
            raise ApiError(400, "the request needs a JSON object body")
        return {}
    ctype = request.headers.get("content-type", "")
    if ctype and "json" not in ctype.split(";")[0].strip().lower():
        raise ApiError(415, f"send the body as application/json (got {ctype.split(';')[0]})")
    data = parse_json(body)
    if not isinstance(data, dict):
        raise ApiError(422, "the body must be a JSON object")
    return data


class StrictJSONRequest(Request):
    """The request a project's endpoint receives: ``await req.json()`` refuses what the built-in
    routes refuse (NaN, infinities, deep nesting, invalid Unicode) with a 400 before the
    handler sees it. NUL characters are left to the handler."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json(await self.body(), allow_nul=True)
        return self._json


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as ``null`` (rows stored before the reader refused them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class JSONResponse(_StarletteJSONResponse):
    """Strict JSON (no NaN on the wire); a value holding NaN or an infinity, which only rows
    written before the reader refused them can, is sent with ``null`` in their place."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except ValueError:
            return super().render(_finite(content))
