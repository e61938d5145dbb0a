"""Quotas per user (or tenant): concurrent turns, turns per minute, tokens and cost per day.

The checks run where every door starts a turn (``Runtime.admission``), against counters in
the store, so they hold across workers: a concurrent turn holds one of the quota's slots
(a row claimed with a conditional update) until it ends, a turn per minute is counted in the
minute's window row only while under the limit, and the day's tokens and cost are summed
from the recorded usage. A turn over a limit raises
:class:`~standardagents.exceptions.QuotaExceeded` (429 with ``Retry-After`` over HTTP), or
waits up to ``max_wait`` seconds when ``on_limit="wait"``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from ..definitions._base import problems_from_validation
from ..exceptions import DefinitionError, QuotaExceeded
from ..records import ThreadRecord, new_id, now_ms
from ..store import serviceops as ops
from ..store.serviceops import run_op

if TYPE_CHECKING:
    from ..engine.runtime import Runtime

__all__ = ["QUOTAS_ENV", "QuotaPolicy", "Quotas", "policy_from_env"]

QUOTAS_ENV = "STANDARDAGENTS_QUOTAS"
DAY_MS = 86_400_000
MINUTE_MS = 60_000

Release = Callable[[], Coroutine[Any, Any, None]]


class QuotaPolicy(BaseModel):
    """The limits every user (or tenant, with ``by="tenant"``: a thread's ``tenant`` metadata)
    gets; a limit left out is no limit."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    concurrent_turns: int | None = Field(default=None, ge=1)
    turns_per_minute: int | None = Field(default=None, ge=1)
    tokens_per_day: int | None = Field(default=None, ge=1)
    cost_per_day: float | None = Field(default=None, gt=0)
    by: Literal["user", "tenant"] = "user"
    on_limit: Literal["reject", "wait"] = "reject"
    #: seconds a turn waits for room with ``on_limit="wait"`` before it is refused after all
    max_wait: float = Field(default=30.0, ge=0)
    #: seconds a concurrent-turn slot outlives a process that died holding it
    slot_lease: float = Field(default=3600.0, gt=0)


def policy_from_env() -> QuotaPolicy | None:
    """``STANDARDAGENTS_QUOTAS``: the policy as JSON, e.g. ``{"concurrentTurns": 2, "turnsPerMinute": 10}``."""
    raw = os.environ.get(QUOTAS_ENV)
    if not raw:
        return None
    try:
        return QuotaPolicy.model_validate(json.loads(raw))
    except ValidationError as exc:
        raise DefinitionError([(f"{QUOTAS_ENV}: {field}", message)
                               for field, message in problems_from_validation(exc)]) from None
    except ValueError as exc:
        raise DefinitionError(f"{QUOTAS_ENV} is not JSON: {exc}") from None


class Quotas:
    """The admission check of one runtime (install with ``runtime.admission = quotas.admit``)."""

    def __init__(self, rt: Runtime, policy: QuotaPolicy) -> None:
        self.rt = rt
        self.policy = policy

    async def admit(self, thread: ThreadRecord) -> Release | None:
        """Let a turn of ``thread`` start (returning what gives its slot back when it
        ends), wait for room, or raise :class:`QuotaExceeded`."""
        tenant = (thread.metadata or {}).get("tenant") if self.policy.by == "tenant" else None
        if not isinstance(tenant, str):
            tenant = None
        who = f"tenant:{tenant}" if tenant is not None else f"user:{thread.user_id}"
        deadline = time.monotonic() + self.policy.max_wait
        while True:
            try:
                return await self._try(who, thread.user_id, tenant)
            except QuotaExceeded as exc:
                left = deadline - time.monotonic()
                if self.policy.on_limit != "wait" or left <= 0:
                    raise
                await asyncio.sleep(min(left, exc.retry_after, 1.0))

    async def _spent_today(self, day: int, user_id: str, tenant: str | None) -> tuple[int, float]:
        """Tokens and cost of today's model replies: the whole tenant's (every user of it, in
        the threads stamped with it) with ``by="tenant"``, else the user's."""
        if tenant is not None:
            pairs = await run_op(self.rt.store, ops.tenant_usage, tenant, day, write=False)
        else:
            pairs = [(r.get("usage"), r.get("cost")) for r in await self.rt.store.list_usage(user_id=user_id, since=day)]
        tokens = sum(int((usage or {}).get("totalTokens") or (usage or {}).get("total_tokens") or 0)
                     for usage, _ in pairs)
        return tokens, sum(float(cost or 0) for _, cost in pairs)

    async def _try(self, who: str, user_id: str | None, tenant: str | None = None) -> Release | None:
        policy = self.policy
        now = now_ms()
        if (policy.tokens_per_day is not None or policy.cost_per_day is not None) and (
                user_id is not None or tenant is not None):
            day = now - now % DAY_MS
            tokens, cost = await self._spent_today(day, user_id or "", tenant)
            until_midnight = (day + DAY_MS - now) / 1000
            if policy.tokens_per_day is not None and tokens >= policy.tokens_per_day:
                raise QuotaExceeded(f"{who} has used {tokens} tokens today, over tokensPerDay ({policy.tokens_per_day})",
                                    until_midnight)
            if policy.cost_per_day is not None and cost >= policy.cost_per_day:
                raise QuotaExceeded(f"{who} has spent {cost:.4f} today, over costPerDay ({policy.cost_per_day})",
                                    until_midnight)
        release: Release | None = None
        if policy.concurrent_turns is not None:
            key, holder = f"concurrent:{who}", new_id("q_")
            if not await run_op(self.rt.store, ops.take_slot, key, policy.concurrent_turns, holder,
                                now + int(policy.slot_lease * 1000), now):
                raise QuotaExceeded(f"{who} already runs {policy.concurrent_turns} turns at once, the limit of "
                                    "concurrentTurns", 1)

            async def release_slot() -> None:
                await run_op(self.rt.store, ops.release_slot, key, holder)

            release = release_slot
        if policy.turns_per_minute is not None:
            window = now - now % MINUTE_MS
            if not await run_op(self.rt.store, ops.take_window, f"turns:{who}", window, 1, 0,
                                policy.turns_per_minute, None):
                if release is not None:
                    await release()
                raise QuotaExceeded(f"{who} has started {policy.turns_per_minute} turns this minute, the limit "
                                    f"of turnsPerMinute",
                                    (window + MINUTE_MS - now) / 1000)
        return release
