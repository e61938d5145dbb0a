"""Starting the services with a server (or any long-running runtime) and stopping them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..definitions.webhook import WebhookDefinition
from ..events import Event
from .quotas import Quotas, policy_from_env
from .ratelimit import SharedRateLimiter, limits_from_env
from .scheduler import Scheduler
from .webhooks import WebhookSender, create_webhook, enqueue, on_turn_end

if TYPE_CHECKING:
    from ..engine.runtime import Runtime

__all__ = ["SCHEDULER_ENV", "Services", "start_services"]

log = logging.getLogger("standardagents.service")

#: ``0`` keeps this process from running schedules (another process runs them)
SCHEDULER_ENV = "STANDARDAGENTS_SCHEDULER"


@dataclass
class Services:
    """What :func:`start_services` started on a runtime; :meth:`stop` undoes it."""

    rt: Runtime
    scheduler: Scheduler | None = None
    sender: WebhookSender | None = None
    quotas: Quotas | None = None
    limiter: SharedRateLimiter | None = None
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    def _on_event(self, event: Event) -> None:
        """Bus listener: an approval asked on this worker becomes an ``approval.requested`` event."""
        if event.type != "approval.request" or not getattr(event, "local", True):
            return
        data = {k: v for k, v in event.data.items() if k not in ("token", "approvalToken", "stateToken")}
        data["threadId"] = event.thread_id
        key = f"{data.get('executionId', '')}:{data.get('id', '')}"
        execution = data.get("executionId")
        task = asyncio.get_running_loop().create_task(enqueue(self.rt, "approval.requested", key, data,
                                                              event.thread_id,
                                                              execution if isinstance(execution, str) else None))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _turn_end(self, record: Any, data: dict[str, Any]) -> None:
        await on_turn_end(self.rt, record, data)

    async def stop(self) -> None:
        rt = self.rt
        if self._turn_end in rt.turn_end_hooks:
            rt.turn_end_hooks.remove(self._turn_end)
        rt.bus.remove_listener(self._on_event)
        if self.quotas is not None and rt.admission == self.quotas.admit:
            rt.admission = None
        if self.limiter is not None and rt.model_gate is self.limiter:
            rt.model_gate = None
            await self.limiter.aclose()
        for part in (self.scheduler, self.sender):
            if part is not None:
                await part.stop()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task


async def start_services(rt: Runtime, *, scheduler: bool | None = None) -> Services:
    """Start the scheduler and the webhook sender on ``rt`` and install the turn-end hook,
    the quota check (``STANDARDAGENTS_QUOTAS``) and the shared rate limit
    (``STANDARDAGENTS_RATE_LIMITS``). The project's ``define_webhook`` subscriptions are stored."""
    services = Services(rt)
    if not hasattr(rt.store, "_run"):
        return services
    for name in rt.registry.names("webhooks"):
        definition: WebhookDefinition = rt.registry.get("webhooks", name)
        try:
            await create_webhook(rt, definition.url, definition.events, secret=definition.secret, name=name,
                                 source="project")
        except Exception as exc:
            log.warning("webhook %s is not subscribed: %s", name, exc)
    rt.turn_end_hooks.append(services._turn_end)
    rt.bus.add_listener(services._on_event)
    sender = services.sender = WebhookSender(rt)
    sender.start()
    if scheduler if scheduler is not None else os.environ.get(SCHEDULER_ENV, "1") != "0":
        services.scheduler = Scheduler(rt)
        services.scheduler.start()
    policy = policy_from_env()
    if policy is not None:
        services.quotas = Quotas(rt, policy)
        rt.admission = services.quotas.admit
    limits = limits_from_env()
    if limits:
        services.limiter = SharedRateLimiter(rt.store, limits)
        rt.model_gate = services.limiter
    return services
