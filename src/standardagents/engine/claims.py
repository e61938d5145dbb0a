"""Claims on threads across processes: a thread is claimed in the store while one of its
executions runs, so two processes sharing a database never run turns of it at once; a claim
not refreshed within the lease belonged to a process that is gone and is taken over.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ..records import now_ms
from .owners import still_running

if TYPE_CHECKING:
    from .hosts import ClaimHost

__all__ = ["claim_thread", "release_thread", "try_claim"]

log = logging.getLogger("standardagents.recovery")


async def try_claim(rt: ClaimHost, thread_id: str) -> bool:
    """Claim the thread if no live process holds it (no waiting); True when claimed.

    A claim not refreshed within the lease is taken over, unless its holder is a process of
    this PID namespace that certainly still runs (late with its heartbeat, not gone)."""
    now = now_ms()
    if await rt.store.claim_env("lock", "", thread_id, {"owner": rt.owner}, now):
        rt.inflight.claimed.add(thread_id)
        return True
    holder = await rt.store.get_env("lock", "", thread_id)
    owner = str(holder.get("owner", "")) if isinstance(holder, dict) else ""
    if owner == rt.owner and thread_id not in rt.inflight.claimed:
        # left by a turn of this runtime that could not release it (the database was away)
        if await rt.store.touch_env("lock", "", [thread_id], now, rt.owner):
            rt.inflight.claimed.add(thread_id)
            return True
    if owner != rt.owner and still_running(owner):
        return False
    if await rt.store.claim_env("lock", "", thread_id, {"owner": rt.owner}, now,
                                stale_before=now - int(rt.execution_lease * 1000)):
        rt.inflight.claimed.add(thread_id)
        return True
    return False


async def claim_thread(rt: ClaimHost, thread_id: str) -> None:
    """Hold the thread across processes (another worker, a CLI on the same database): wait
    while a live process runs one of its executions; a claim not refreshed within the
    lease belonged to a process that is gone and is taken over."""
    delay = 0.01
    while True:
        if await try_claim(rt, thread_id):
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)


async def release_thread(rt: ClaimHost, thread_id: str) -> None:
    rt.inflight.claimed.discard(thread_id)
    try:  # only while this runtime holds it: a claim taken over stays with its taker
        await asyncio.shield(rt.store.release_env("lock", "", thread_id, rt.owner))
    except Exception:
        log.warning("could not release thread %s", thread_id, exc_info=True)
