"""``GET /healthz`` and ``GET /readyz``: probes for load balancers and Kubernetes.

Both are unauthenticated and reveal nothing about threads or users. ``/healthz`` says only
that the process answers (a liveness probe: restart the worker when it stops answering).
``/readyz`` says whether this worker should be sent new requests (a readiness probe): its
database answers within a short bound and it is not draining for a shutdown. A worker that
is not ready answers 503 with the reason, so a load balancer takes it out of rotation without
restarting it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .state import server_of

__all__ = ["DATABASE_TIMEOUT", "health_routes", "mark_draining_on_signals"]

#: seconds a readiness probe waits for the database before calling it unready
DATABASE_TIMEOUT = 2.0


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"}, headers={"Cache-Control": "no-store"})


async def readyz(request: Request) -> Response:
    state = server_of(request)
    checks: dict[str, str] = {}
    ready = True
    if state.draining:
        checks["worker"] = "draining"
        ready = False
    else:
        checks["worker"] = "ok"
    try:
        await asyncio.wait_for(state.runtime.store.ping(), DATABASE_TIMEOUT)
        checks["database"] = "ok"
    except TimeoutError:
        checks["database"] = f"no answer within {DATABASE_TIMEOUT:g} s"
        ready = False
    except Exception as exc:  # any failure means "not ready", said without the database's text
        checks["database"] = f"unavailable ({type(exc).__name__})"
        ready = False
    return JSONResponse({"status": "ready" if ready else "unready", "checks": checks},
                        status_code=200 if ready else 503, headers={"Cache-Control": "no-store"})


def health_routes() -> list[Route]:
    """The two probe routes, at the server's root (not under the API prefix)."""
    return [Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"])]


def health_openapi() -> dict[str, Any]:
    """The probes' entries of the OpenAPI document (no security: probes send no token)."""
    json_: dict[str, Any] = {"application/json": {}}
    return {
        "/healthz": {"get": {"summary": "Liveness: the process answers", "tags": ["meta"], "security": [],
                             "responses": {"200": {"description": "the process answers", "content": json_}}}},
        "/readyz": {"get": {
            "summary": "Readiness: the database answers and the worker is not draining", "tags": ["meta"],
            "security": [],
            "responses": {"200": {"description": "ready for new requests", "content": json_},
                          "503": {"description": "not ready: the body's checks say why", "content": json_}}}},
    }


@contextlib.contextmanager
def mark_draining_on_signals(on_signal: Any) -> Iterator[None]:
    """Call ``on_signal()`` when SIGTERM or SIGINT arrives, then the handler that was there
    before (the server's own, which begins its shutdown), so ``/readyz`` turns unready as soon
    as a shutdown is asked for. Outside the main thread (a server run on a test's thread)
    signals cannot be caught and nothing is installed."""
    previous: dict[signal.Signals, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        on_signal()
        before = previous.get(signal.Signals(signum))
        if callable(before):
            before(signum, frame)
        elif before == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.getsignal(sig)
            signal.signal(sig, handler)
    except ValueError:  # not the main thread
        previous.clear()
    try:
        yield
    finally:
        for sig, before in previous.items():
            with contextlib.suppress(ValueError, TypeError):
                if signal.getsignal(sig) is handler:
                    signal.signal(sig, before)
