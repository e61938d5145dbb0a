"""Scheduled effects: persisted, claimed by one worker, retried with backoff, run once."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import TYPE_CHECKING, Any

from ..definitions import EffectDefinition
from ..exceptions import NotFoundError
from ..records import now_ms

if TYPE_CHECKING:
    from .runtime import Runtime
    from .state import ThreadState

__all__ = ["EffectScheduler", "schedule"]

log = logging.getLogger("standardagents.effects")


async def schedule(runtime: Runtime, state: ThreadState, name: str, args: dict[str, Any], delay: float) -> str:
    """Persist an effect due ``delay`` seconds from now."""
    if not runtime.registry.has("effects", name, state.namespace):
        raise NotFoundError("effect", name)
    record = await runtime.store.schedule_effect(state.thread_id, name, args, run_at=now_ms() + int(delay * 1000))
    return record.id


class EffectScheduler:
    """Runs due effects of one runtime; several processes may run one each."""

    def __init__(self, runtime: Runtime, *, interval: float = 0.5, lease_ms: int = 60_000, base_backoff: float = 1.0) -> None:
        self.runtime = runtime
        self.interval = interval
        self.lease_ms = lease_ms
        self.base_backoff = base_backoff
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.run_due()
            except Exception:
                log.exception("effect scheduler pass failed")
            await asyncio.sleep(self.interval)

    async def run_due(self) -> int:
        """Claim and run every effect due now; returns how many ran."""
        store = self.runtime.store
        claimed = await store.claim_due_effects(now_ms(), self.worker_id, 20, self.lease_ms)
        for effect in claimed:
            await self._run_one(effect)
        return len(claimed)

    async def _run_one(self, effect: Any) -> None:
        rt = self.runtime
        store = rt.store
        try:
            state = await rt.state(effect.thread_id)
            definition: EffectDefinition = await rt.registry.aget("effects", effect.name, state.namespace)
            result = await definition.run(state, effect.args or {})
        except Exception as exc:
            attempts = effect.attempts
            max_attempts = 5
            try:
                max_attempts = (await rt.registry.aget("effects", effect.name)).max_attempts
            except Exception:
                pass
            retry_at = None if attempts >= max_attempts else now_ms() + int(self.base_backoff * 1000 * 2 ** (attempts - 1))
            log.warning("effect %s (%s) failed on attempt %s: %s", effect.id, effect.name, attempts, exc)
            await store.fail_effect(effect.id, f"{type(exc).__name__}: {exc}", retry_at, worker_id=self.worker_id)
            return
        try:
            import json

            json.dumps(result)
        except (TypeError, ValueError):
            result = str(result)
        await store.finish_effect(effect.id, result, worker_id=self.worker_id)
