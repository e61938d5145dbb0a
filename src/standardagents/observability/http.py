"""The server's side of observability: incoming trace context and HTTP request counts.

An incoming ``traceparent`` (REST, streams, the OpenAI door: every route) becomes the
current context for the request, so an execution the request starts is its child.
"""

from __future__ import annotations

import time
from typing import Any

from . import metrics, tracing

__all__ = ["ObservabilityMiddleware"]


class ObservabilityMiddleware:
    """Pure ASGI middleware (streaming responses pass through untouched)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        token = None
        if tracing.tracer() is not None:
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())
                       if k in (b"traceparent", b"tracestate", b"baggage")}
            ctx = tracing.extract_context(headers)
            if ctx is not None:
                from opentelemetry import context

                token = context.attach(ctx)
        meter = metrics.active()
        try:
            if meter is None or scope["type"] != "http":
                await self.app(scope, receive, send)
                return
            status = 500
            started = time.perf_counter()

            async def send_status(message: Any) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            try:
                await self.app(scope, receive, send_status)
            finally:
                meter.http_request(scope["method"], _route(scope), status, time.perf_counter() - started)
        finally:
            if token is not None:
                from opentelemetry import context

                context.detach(token)


def _route(scope: Any) -> str:
    """The matched route's template (``/api/threads/{thread_id}``), never the raw path, so
    the label's values stay few."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    return "unmatched"
