"""A provider rate limit shared by every worker of a deployment.

Each model definition may have a limit of requests and tokens per window (a minute unless
said otherwise). Before a model request, a worker counts it in the current window of the
shared counter (a row updated atomically in the database, or a Redis key when
``STANDARDAGENTS_RATE_LIMIT_REDIS_URL`` is set) and waits for the next window when the count
would pass the limit; so eight workers together spend one quota, not eight. A provider's 429
blocks the model for every worker until its ``Retry-After`` has passed.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from ..definitions._base import problems_from_validation
from ..exceptions import DefinitionError
from ..store import serviceops as ops
from ..store.base import Store
from ..store.serviceops import run_op

__all__ = ["RATE_LIMITS_ENV", "REDIS_URL_ENV", "RateLimit", "SharedRateLimiter", "limits_from_env"]

RATE_LIMITS_ENV = "STANDARDAGENTS_RATE_LIMITS"
REDIS_URL_ENV = "STANDARDAGENTS_RATE_LIMIT_REDIS_URL"
#: seconds waited after a 429 that gave no Retry-After
DEFAULT_BLOCK = 1.0
#: seconds before the engine's first retry of another retriable failure (doubling, capped)
RETRY_BACKOFF = 0.5
RETRY_BACKOFF_CAP = 8.0

#: count a window's use when it stays within both limits (keys: counter, blocked-until key)
_REDIS_TAKE = """
local blocked = tonumber(redis.call('GET', KEYS[2]) or '0')
if blocked > tonumber(ARGV[5]) then return -blocked end
local req = tonumber(redis.call('HGET', KEYS[1], 'r') or '0')
local tok = tonumber(redis.call('HGET', KEYS[1], 't') or '0')
local maxr = tonumber(ARGV[3])
local maxt = tonumber(ARGV[4])
if maxr >= 0 and req + tonumber(ARGV[1]) > maxr then return 0 end
if maxt >= 0 and req > 0 and tok + tonumber(ARGV[2]) > maxt then return 0 end
redis.call('HINCRBY', KEYS[1], 'r', ARGV[1])
redis.call('HINCRBY', KEYS[1], 't', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 1
"""


class RateLimit(BaseModel):
    """At most ``requests`` model requests and ``tokens`` tokens (estimated from the request:
    its text and ``max_tokens``) per ``per`` seconds, across all workers."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    requests: int | None = Field(default=None, ge=1)
    tokens: int | None = Field(default=None, ge=1)
    per: float = Field(default=60.0, gt=0)


def limits_from_env() -> dict[str, RateLimit]:
    """``STANDARDAGENTS_RATE_LIMITS``: a JSON object from model definition names to limits,
    e.g. ``{"default": {"requests": 60, "tokens": 90000}}``."""
    raw = os.environ.get(RATE_LIMITS_ENV)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        limits: dict[str, RateLimit] = {}
        for name, value in data.items():
            try:
                limits[str(name)] = RateLimit.model_validate(value)
            except ValidationError as exc:
                raise DefinitionError([(f"{RATE_LIMITS_ENV}: {name}.{field}", message)
                                       for field, message in problems_from_validation(exc)]) from None
        return limits
    except ValueError as exc:
        raise DefinitionError(f"{RATE_LIMITS_ENV} is not a JSON object: {exc}") from None


def _estimate_tokens(request: Any) -> int:
    text = json.dumps(getattr(request, "messages", []), ensure_ascii=False, default=str)
    return len(text) // 4 + int(getattr(request, "max_tokens", None) or 0)


class SharedRateLimiter:
    """The gate a runtime calls around each model request (``Runtime.model_gate``)."""

    def __init__(self, store: Store, limits: dict[str, RateLimit], *, redis_url: str | None = None) -> None:
        self.store = store
        self.limits = dict(limits)
        self.redis_url = redis_url if redis_url is not None else os.environ.get(REDIS_URL_ENV)
        self._redis: Any = None
        self._script: Any = None
        self._unretried: dict[str, tuple[Any, Any]] = {}

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None

    def _client(self) -> Any:
        if self._redis is None:
            try:
                import redis.asyncio as aioredis
            except ImportError as exc:
                raise DefinitionError("a Redis rate limit needs the redis extra: pip install 'standardagents[redis]'") from exc
            self._redis = aioredis.from_url(str(self.redis_url))
            self._script = self._redis.register_script(_REDIS_TAKE)
        return self._redis

    def unretried(self, model: Any) -> Any:
        """``model`` as its provider is built under a shared limit: with no retries of its own.

        A provider (or its SDK) retrying a 429 or a 5xx by itself would send requests the limit
        never counted; so a limited model's provider does not retry, and the engine retries
        through :meth:`acquire` (see :meth:`retry_delay`), each attempt counted in the window."""
        name = getattr(model, "name", "")
        if name not in self.limits or not getattr(model, "max_retries", 0):
            return model
        cached = self._unretried.get(name)
        if cached is None or cached[0] is not model:
            cached = self._unretried[name] = (model, model.model_copy(update={"max_retries": 0}))
        return cached[1]

    def retry_delay(self, model: Any, error: Any, retries: int) -> float | None:
        """Seconds to wait before the engine sends ``model`` its request again after ``error``
        (the ``retries``-th retry so far), or None when it should not: the model is not limited
        here, the error is not retriable or came after the first token, or the model's
        ``max_retries`` are spent. A 429 waits no more here: :meth:`refused` blocked the model
        until its ``Retry-After`` and :meth:`acquire` waits for that."""
        if getattr(model, "name", "") not in self.limits:
            return None
        if not getattr(error, "retriable", False) or not getattr(error, "before_first_token", True):
            return None
        if retries >= int(getattr(model, "max_retries", 0) or 0):
            return None
        if getattr(error, "status", None) == 429:
            return 0.0
        return min(RETRY_BACKOFF_CAP, RETRY_BACKOFF * (2 ** retries))

    async def acquire(self, model: Any, request: Any) -> None:
        """Wait until the model's shared window has room for this request, and count it."""
        limit = self.limits.get(getattr(model, "name", ""))
        if limit is None:
            return
        key = f"model:{model.name}"
        tokens = _estimate_tokens(request) if limit.tokens is not None else 0
        per_ms = int(limit.per * 1000)
        while True:
            now = int(time.time() * 1000)
            window = now - now % per_ms
            wait_until = await self._take(key, window, per_ms, tokens, limit, now)
            if wait_until is None:
                return
            await asyncio.sleep(max(0.001, (wait_until - int(time.time() * 1000)) / 1000))

    async def _take(self, key: str, window: int, per_ms: int, tokens: int, limit: RateLimit, now: int) -> int | None:
        """None when counted; else when to try again (epoch ms)."""
        if self.redis_url:
            self._client()
            result = int(await self._script(
                keys=[f"sa:rl:{key}:{window}", f"sa:rl:block:{key}"],
                args=[1, tokens, limit.requests if limit.requests is not None else -1,
                      limit.tokens if limit.tokens is not None else -1, now, per_ms * 2]))
            if result == 1:
                return None
            return -result if result < 0 else window + per_ms
        blocked = await run_op(self.store, ops.blocked_until, key, write=False)
        if blocked > now:
            return blocked
        if await run_op(self.store, ops.take_window, key, window, 1, tokens, limit.requests, limit.tokens):
            if window % (per_ms * 64) == 0:
                await run_op(self.store, ops.prune_windows, window - per_ms * 2)
            return None
        return window + per_ms

    async def refused(self, model: Any, retry_after: float | None) -> None:
        """The provider answered 429: nobody calls the model before ``retry_after`` has passed."""
        if getattr(model, "name", "") not in self.limits:
            return
        key = f"model:{model.name}"
        until = int((time.time() + (retry_after if retry_after is not None else DEFAULT_BLOCK)) * 1000)
        if self.redis_url:
            self._client()
            await self._redis.set(f"sa:rl:block:{key}", until, px=max(1, until - int(time.time() * 1000)))
            return
        await run_op(self.store, ops.block, key, until)
