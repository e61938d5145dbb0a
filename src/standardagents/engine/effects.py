"""Scheduled effects: persisted by a thread, claimed by one worker, retried with
exponential backoff, recorded, and run once however many schedulers share the store.

The store's claim is the only coordination: a worker leases the effects it claims, and
finishing or failing one only counts while the worker still owns it, so a second
scheduler (or a restarted process) never runs an effect again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from typing import TYPE_CHECKING, Any

from .. import observability as observe
from ..definitions import EffectDefinition
from ..exceptions import NotFoundError, StandardAgentsError
from ..records import now_ms
from ..store.records import EffectRecord

if TYPE_CHECKING:
    from .hosts import EffectsHost
    from .state import ThreadState

__all__ = ["EffectScheduler", "backoff_ms", "schedule"]

log = logging.getLogger("standardagents.effects")


async def schedule(runtime: EffectsHost, state: ThreadState, name: str, args: dict[str, Any], delay: float) -> str:
    """Persist an effect due ``delay`` seconds from now; returns its id."""
    if not runtime.registry.has("effects", name, state.namespace):
        raise NotFoundError("effect", name, "define it in agents/effects/")
    if delay < 0:
        raise StandardAgentsError(f"effect {name!r}: delay must be zero or more seconds, got {delay}")
    try:
        json.dumps(args)
    except (TypeError, ValueError) as exc:
        raise StandardAgentsError(f"effect {name!r}: its arguments must be JSON values ({exc})") from exc
    record = await runtime.store.schedule_effect(state.thread_id, name, args, run_at=now_ms() + int(delay * 1000),
                                                 trace=observe.trace_headers() or None)
    return record.id


def backoff_ms(attempt: int, base_seconds: float) -> int:
    """The wait before retrying after failed attempt number ``attempt`` (1, 2, 4, ... x base)."""
    return int(base_seconds * 1000 * 2 ** max(0, attempt - 1))


class EffectScheduler:
    """Runs the due effects of one runtime's store; several processes may each run one.

    ``run_due()`` makes one pass (handy in tests and cron-like use); ``start()`` keeps
    passing every ``interval`` seconds until ``stop()``.
    """

    def __init__(self, runtime: EffectsHost, *, interval: float = 0.5, lease_ms: int = 60_000, base_backoff: float = 1.0,
                 batch: int = 20, worker_id: str | None = None) -> None:
        self.runtime = runtime
        self.interval = interval
        self.lease_ms = lease_ms
        self.base_backoff = base_backoff
        self.batch = batch
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run passes in the background of the running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop the background passes and wait for the current one to end. A cancellation of
        the caller itself while it waits is passed on, not swallowed."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise

    async def _run(self) -> None:
        while True:
            try:
                await self.run_due()
            except Exception:
                log.exception("effect scheduler pass failed")
            await asyncio.sleep(self.interval)

    async def run_due(self, now: int | None = None) -> list[EffectRecord]:
        """Claim and run the effects due at ``now`` (epoch ms, default: the clock), up to
        ``batch`` of them; returns the effects this pass ran, as stored afterwards.

        Effects are claimed one at a time, just before each runs, and the lease of the one
        running is renewed while it runs: an effect waiting behind a slow one is never held
        under a lease that runs out, and a slow effect is never taken over (and run a
        second time) by another scheduler."""
        store = self.runtime.store
        done: list[EffectRecord] = []
        for _ in range(self.batch):
            at = now_ms() if now is None else now
            claimed = await store.claim_due_effects(at, self.worker_id, 1, self.lease_ms)
            if not claimed:
                break
            effect = claimed[0]
            renewal = asyncio.get_running_loop().create_task(self._renew(effect.id))
            try:
                await self._run_one(effect, now)
            finally:
                renewal.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewal
            after = await store.get_effect(effect.id)
            done.append(after if after is not None else effect)
        return done

    async def _renew(self, effect_id: str) -> None:
        """Keep the lease of a running effect ahead of the clock (every third of a lease)."""
        every = max(self.lease_ms / 3000, 0.01)
        while True:
            await asyncio.sleep(every)
            try:
                owned = await self.runtime.store.renew_effect(effect_id, self.worker_id, now_ms() + self.lease_ms)
            except Exception:
                log.warning("could not renew the lease of effect %s", effect_id, exc_info=True)
                continue
            if not owned:
                log.warning("effect %s is no longer claimed by this scheduler", effect_id)
                return

    async def _run_one(self, effect: EffectRecord, now: int | None) -> None:
        rt = self.runtime
        store = rt.store
        try:
            state = await rt.state(effect.thread_id)
        except NotFoundError as exc:
            await store.fail_effect(effect.id, f"its thread is gone: {exc}", None, worker_id=self.worker_id)
            return
        if not rt.registry.has("effects", effect.name, state.namespace):
            await store.fail_effect(effect.id, f"no effect named {effect.name!r} is defined (agents/effects/)", None,
                                    worker_id=self.worker_id)
            return
        definition: EffectDefinition = await rt.registry.aget("effects", effect.name, state.namespace)
        try:
            with observe.effect_run(effect):
                result = await definition.run(state, effect.args or {})
        except Exception as exc:
            attempts = effect.attempts
            failed_at = now_ms() if now is None else now  # this effect's own failure time
            retry_at = None if attempts >= definition.max_attempts else failed_at + backoff_ms(attempts, self.base_backoff)
            log.warning("effect %s (%s) failed on attempt %s of %s: %s", effect.id, effect.name, attempts,
                        definition.max_attempts, exc)
            await store.fail_effect(effect.id, f"{type(exc).__name__}: {exc}", retry_at, worker_id=self.worker_id)
            rt.bus.emit("effect_failed", effect.thread_id, {"id": effect.id, "name": effect.name, "attempt": attempts,
                                                            "retryAt": retry_at, "error": str(exc)})
            return
        try:
            json.dumps(result)
        except (TypeError, ValueError):
            result = str(result)
        if await store.finish_effect(effect.id, result, worker_id=self.worker_id):
            rt.bus.emit("effect_done", effect.thread_id, {"id": effect.id, "name": effect.name})
