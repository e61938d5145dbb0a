"""The ASGI application: the REST API, live streams, the project's endpoints, the
OpenAI-compatible door and the web chat, assembled on Starlette and served by uvicorn.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ..engine.runtime import Runtime
from ..eventlog import event_log_from_env
from ..forget import listen_for_forgets
from ..observability import configure_from_env, metrics
from ..observability.http import ObservabilityMiddleware
from ..relay import relay_for_store
from ..sandbox.thread import prewarm_sandbox
from .api import WorkerHeaderMiddleware, api_routes
from .doors import door_routes, doors_running
from .endpoints import EndpointTable, dispatch_controller, dispatch_thread_endpoint
from .errors import BodyLimitMiddleware, ErrorMiddleware, http_exception_handler
from .health import health_routes, mark_draining_on_signals
from .metrics import metrics_endpoint
from .openai_door import openai_routes
from .state import ServerState
from .user_endpoints import user_endpoint_route, user_endpoints_of
from .users import UserHub, user_routes

__all__ = ["ENV_PREFIX", "GC_YOUNG_THRESHOLD", "create_app", "factory_from_env", "run_server", "settle_garbage_collector"]

UI_DIR = Path(__file__).resolve().parent.parent / "ui"
#: environment variables an app factory reads (used for ``workers > 1`` and ``reload``)
ENV_PREFIX = "STANDARDAGENTS_SERVER_"
#: seconds running turns get to finish after SIGTERM before they are handed over
DEFAULT_GRACEFUL_TIMEOUT = 30.0

log = logging.getLogger("standardagents.server")

RuntimeSource = Runtime | Callable[[], Awaitable[Runtime]]


#: the web app runs only its own files: even markup that got past its sanitizer could load or
#: run nothing (no inline script, no other origin, no plugins, no framing by other sites)
UI_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
             "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def _ui_routes(prefix: str) -> list[BaseRoute]:
    page = (UI_DIR / "index.html").read_text(encoding="utf-8").replace("{{API_PREFIX}}", prefix)

    async def index(request: Any) -> Response:
        return HTMLResponse(page, headers={"Content-Security-Policy": UI_POLICY,
                                           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"})

    return [Route("/", index, methods=["GET"]), Mount("/ui", app=StaticFiles(directory=UI_DIR), name="ui")]


def _state(runtime: Runtime, prefix: str, dev: bool, max_body: int, builtins: list[BaseRoute]) -> ServerState:
    state = ServerState(runtime=runtime, prefix=prefix, dev=dev, max_body=max_body, hub=UserHub(runtime),
                        endpoints=EndpointTable(runtime.registry, prefix))
    state.extra["builtins"] = builtins
    user_endpoints_of(state)  # route collisions of the user endpoints are logged now
    return state


def create_app(runtime: RuntimeSource, *, prefix: str = "/api", dev: bool = False, max_body: int = 1_000_000,
               close_runtime: bool = True) -> Starlette:
    """The server app for a runtime (or an async factory opening one at start-up).

    The lifespan starts the effect scheduler (and, on a PostgreSQL store, the event relay that
    carries live events between workers) and, at shutdown, stops them and closes the runtime
    (unless ``close_runtime`` is false). Route collisions among the project's endpoints are
    logged at start-up and listed on ``app.state.server.endpoints.collisions``.
    """
    from ..engine.effects import EffectScheduler

    prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
    metrics.enable()
    from .evals_api import eval_routes
    from .identity_routes import identity_routes
    from .memory_api import announce_memory, memory_routes
    from .schedules_api import schedule_routes
    from .webhooks_api import webhook_routes

    builtins = [*api_routes(prefix), *user_routes(prefix), *schedule_routes(prefix), *webhook_routes(prefix),
                *eval_routes(prefix), *memory_routes(prefix), *identity_routes(prefix)]
    routes: list[BaseRoute] = [
        *builtins,
        Route("/metrics", metrics_endpoint, methods=["GET"]),
        *health_routes(),
        Route(f"{prefix}/threads/{{thread_id}}/{{path:path}}", dispatch_thread_endpoint,
              methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]),
        *openai_routes(),
        *door_routes(),
        *_ui_routes(prefix),
        user_endpoint_route(prefix),
        Route(f"{prefix}/{{path:path}}", dispatch_controller,
              methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        rt = runtime if isinstance(runtime, Runtime) else await runtime()
        if not hasattr(app.state, "server"):
            app.state.server = _state(rt, prefix, dev, max_body, builtins)
        scheduler = EffectScheduler(rt)
        scheduler.start()
        # a project with the run_code tool gets its sandbox warmed now, not at the first call
        prewarm_sandbox(rt)
        await announce_memory(rt)  # which vector search memory uses, said now (a fallback as a warning)
        watcher = None
        if os.environ.get(f"{ENV_PREFIX}WATCH") == "1" and rt.registry.root is not None:
            # a changed agent, prompt or tool file is used from the next step on
            watcher = asyncio.get_running_loop().create_task(rt.watch_project())
        # PostgreSQL: other workers' live events reach this worker's streams (SQLite: none)
        relay = relay_for_store(rt.bus, rt.store)
        server = app.state.server
        # recent events are kept so a client that reconnects gets what it missed
        event_log = event_log_from_env(rt.bus, rt.store)

        loop = asyncio.get_running_loop()
        grace = _graceful_timeout()
        stopping: asyncio.Task[list[str]] | None = None

        def begin_stop() -> None:
            nonlocal stopping
            if stopping is None:
                # streams end now (their clients reconnect to a worker that stays, with
                # Last-Event-ID); running turns get the grace period, then are handed over
                server.end_streams()
                stopping = loop.create_task(rt.stop_gracefully(grace))

        def draining() -> None:
            server.draining = True
            rt.draining = True  # no new turns from now on
            loop.call_soon_threadsafe(begin_stop)

        signals = mark_draining_on_signals(draining)
        signals.__enter__()
        try:
            if relay is not None:
                await relay.start()
                app.state.server.extra["relay"] = relay
                # a stop asked on another worker reaches the turn running here
                rt.bus.add_listener(rt.on_bus_event)
            if event_log is not None:
                event_log.start()
                server.event_log = server.hub.event_log = event_log
            if relay is not None:
                # a user forgotten on another worker: their events kept here are dropped too
                listen_for_forgets(relay, event_log, rt.store)
            # the turns of gone processes resume only now: their events reach other workers
            # and the event log (for a runtime opened with take_over=True a second, harmless look)
            await rt.take_over()
            from ..service import start_services

            # schedules, the webhook sender, quotas and the shared rate limit
            services = await start_services(rt)
            from ..evals.online import start_online

            online = start_online(rt)  # the scorers of evals/online.yaml, after a sample of turns
            if os.environ.get(f"{ENV_PREFIX}TUNE_GC") == "1":
                settle_garbage_collector()
            try:
                async with doors_running(app.state.server):
                    yield
            finally:
                await services.stop()
                if online is not None:
                    await online.detach()
        finally:
            server.draining = True
            signals.__exit__(None, None, None)
            if stopping is not None:
                try:
                    await stopping
                except Exception:
                    log.exception("could not hand the running turns over")
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            if relay is not None:
                rt.bus.remove_listener(rt.on_bus_event)
                await relay.aclose()
            await scheduler.stop()
            if event_log is not None:
                await event_log.aclose()
            metrics.process_exit()
            for task in list(app.state.server.extra.get("tasks", ())):
                task.cancel()
            if close_runtime:
                await rt.aclose()

    app = Starlette(
        routes=routes,
        middleware=[Middleware(ObservabilityMiddleware), Middleware(WorkerHeaderMiddleware), Middleware(ErrorMiddleware),
                    Middleware(BodyLimitMiddleware, max_body=max_body)],
        exception_handlers={HTTPException: http_exception_handler},
        lifespan=lifespan,
    )
    if isinstance(runtime, Runtime):
        app.state.server = _state(runtime, prefix, dev, max_body, builtins)
    return app


#: young objects allocated before the collector runs (CPython's default is 700): a turn makes
#: a few thousand short-lived containers, and each collection also walks what survived
GC_YOUNG_THRESHOLD = 7000


def settle_garbage_collector() -> None:
    """Once a served process has started: what it holds from then on (modules, the project,
    the app) moves out of the collector's generations, so no collection walks it again, and
    young collections run ten times less often. ``serve`` does this in each worker; an app
    embedded in another process leaves that process's collector alone."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


def _graceful_timeout() -> float:
    """Seconds running turns get to finish after SIGTERM before they are handed over
    (``STANDARDAGENTS_SERVER_GRACEFUL_TIMEOUT``, set by ``serve --graceful-timeout``)."""
    raw = os.environ.get(f"{ENV_PREFIX}GRACEFUL_TIMEOUT")
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_GRACEFUL_TIMEOUT
    except ValueError:
        return DEFAULT_GRACEFUL_TIMEOUT


def factory_from_env() -> Starlette:
    """An app built from ``STANDARDAGENTS_SERVER_*`` variables (for uvicorn's ``--factory``)."""
    project = os.environ.get(f"{ENV_PREFIX}PROJECT", ".")
    database_url = os.environ.get(f"{ENV_PREFIX}DATABASE_URL") or None
    dev = os.environ.get(f"{ENV_PREFIX}DEV", "") == "1"
    prefix = os.environ.get(f"{ENV_PREFIX}PREFIX", "/api")
    configure_from_env()

    async def open_runtime() -> Runtime:
        return await Runtime.open(project, database_url=database_url, take_over=False)

    return create_app(open_runtime, prefix=prefix, dev=dev)


def _report_project_reloads() -> None:
    """Show the project's reloads on the console, one line each: which version is served and,
    when a changed file is broken, which file and line (the previous version stays)."""
    import logging

    log = logging.getLogger("standardagents.runtime")
    if not any(getattr(h, "_standardagents", False) for h in log.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        handler._standardagents = True  # type: ignore[attr-defined]
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def run_server(project: str | Path, *, host: str = "127.0.0.1", port: int = 8000, workers: int = 1,
               reload: bool = False, database_url: str | None = None, dev: bool = False,
               prefix: str = "/api", log_level: str = "info", watch: bool = False,
               log_format: str = "text", graceful_timeout: float = 30.0) -> None:
    """Serve a project with uvicorn until interrupted.

    On SIGTERM (or Ctrl-C) a worker stops taking turns, ends its streams, gives running turns
    ``graceful_timeout`` seconds to finish and hands the rest over to a live worker.

    ``watch`` reloads the project's definitions in place when its files change (loaded off
    the event loop; off by default in production). ``reload`` restarts the whole process
    on a change instead (``standardagents dev``).

    With several workers or reload, each process builds its own app from environment
    variables (``factory_from_env``); otherwise the app is built here. Several workers share
    live events only on PostgreSQL (``standardagents.relay``); on SQLite each worker's streams
    show only the executions that worker runs.
    """
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    from ..observability.logs import uvicorn_log_config

    log_config = uvicorn_log_config(log_format)
    os.environ[f"{ENV_PREFIX}GRACEFUL_TIMEOUT"] = str(graceful_timeout)
    os.environ[f"{ENV_PREFIX}WATCH"] = "1" if watch and not reload else "0"
    os.environ[f"{ENV_PREFIX}TUNE_GC"] = "1"  # a process of its own: each worker settles its collector
    if log_config is None:
        _report_project_reloads()
    if workers <= 1 and not reload:
        configure_from_env()
    if workers > 1 or reload:
        os.environ[f"{ENV_PREFIX}PROJECT"] = str(Path(project).resolve())
        os.environ[f"{ENV_PREFIX}DEV"] = "1" if dev else "0"
        os.environ[f"{ENV_PREFIX}PREFIX"] = prefix
        os.environ[f"{ENV_PREFIX}WORKERS"] = str(workers if not reload else 1)
        if database_url:
            os.environ[f"{ENV_PREFIX}DATABASE_URL"] = database_url
        if workers > 1 and not reload:
            from .supervisor import run_workers

            samples = metrics.prepare_multiprocess_dir()  # /metrics sums every worker's samples
            try:
                run_workers(uvicorn.Config("standardagents.server.app:factory_from_env", factory=True, host=host,
                                           port=port, workers=workers, log_level=log_level,
                                           log_config=log_config or LOGGING_CONFIG))
            finally:
                metrics.remove_multiprocess_dir(samples)
            return
        uvicorn.run("standardagents.server.app:factory_from_env", factory=True, host=host, port=port,
                    workers=workers if not reload else 1, reload=reload,
                    reload_dirs=[str(Path(project).resolve())] if reload else None, log_level=log_level,
                    log_config=log_config or LOGGING_CONFIG)
        return

    async def open_runtime() -> Runtime:
        return await Runtime.open(project, database_url=database_url, take_over=False)

    uvicorn.run(create_app(open_runtime, prefix=prefix, dev=dev), host=host, port=port, log_level=log_level,
                log_config=log_config or LOGGING_CONFIG)
