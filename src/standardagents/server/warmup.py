"""A worker process warms up before it serves: the project is loaded and what the first turn
would import on its way (the engine's lazily imported parts, each used provider's SDK and
HTTP client) is imported, so a worker's first request pays no start-up pause.

``serve --workers N`` builds each worker's app with :func:`warmed_app_from_env`: uvicorn calls
it in the worker before the lifespan runs and before the worker accepts a connection (the
listening socket is shared: until then the other workers take the requests).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import threading
import time
from typing import Any

from starlette.applications import Starlette

__all__ = ["FIRST_TURN_MODULES", "WARMED_FACTORY", "warm_first_turn", "warmed_app_from_env"]

log = logging.getLogger("uvicorn.error")

#: modules the first turn imports on its way (the step loop's parts, the providers' helpers)
FIRST_TURN_MODULES = ("..engine", "..engine.composition", "..providers.reasoning", "..providers.testmodel")

#: the app factory workers are started with (uvicorn's ``factory=True`` import string)
WARMED_FACTORY = "standardagents.server.warmup:warmed_app_from_env"


def _close(provider: Any) -> None:
    """Close a provider built only to warm up, on an event loop of its own (a factory may be
    called while the server's loop runs)."""
    thread = threading.Thread(target=lambda: asyncio.run(provider.aclose()), daemon=True)
    thread.start()
    thread.join()


def warm_first_turn(registry: Any) -> None:
    """Import now what the first turn would import on its way, and build (then close) the
    client of each provider the project's models use, so their SDK imports and set-up are
    done. A provider that cannot be built here (a missing extra or key) is left to report
    itself on first use."""
    from ..providers.factory import ProviderSpec, build_provider

    for module in FIRST_TURN_MODULES:
        importlib.import_module(module, __package__)
    kinds = {entry.value.provider for entry in registry.entries("models") if entry.value is not None}
    for kind in sorted(kinds):
        try:
            provider = build_provider(ProviderSpec(provider=kind, api_key="warm-up", max_retries=0))
            _close(provider)
        except Exception:  # warming is best effort: the first turn reports the problem
            continue


def warmed_app_from_env() -> Starlette:
    """The worker's app, as :func:`.app.factory_from_env` builds it from the
    ``STANDARDAGENTS_SERVER_*`` variables, after warming up: the project is loaded once, here,
    and the runtime is opened on that registry. A project that does not load here is left to
    :func:`.app.factory_from_env`, which reports it as it always does."""
    from ..engine.runtime import Runtime
    from ..observability import configure_from_env
    from ..project import load_project
    from .app import ENV_PREFIX, create_app, factory_from_env

    started = time.perf_counter()
    try:
        registry = load_project(os.environ.get(f"{ENV_PREFIX}PROJECT", "."))
    except Exception:
        return factory_from_env()
    warm_first_turn(registry)
    log.info("Worker [%s] warmed up in %.2fs", os.getpid(), time.perf_counter() - started)
    database_url = os.environ.get(f"{ENV_PREFIX}DATABASE_URL") or None
    configure_from_env()

    async def open_runtime() -> Runtime:
        return await Runtime.open(registry, database_url=database_url, take_over=False)

    return create_app(open_runtime, prefix=os.environ.get(f"{ENV_PREFIX}PREFIX", "/api"),
                      dev=os.environ.get(f"{ENV_PREFIX}DEV", "") == "1")
