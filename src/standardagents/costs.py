"""What model calls cost, in USD: one call's price and the sums reports show.

Prices come from the maintained ``genai-prices`` data (per provider and model, with cached
input, cache writes and tiers), or from a model definition's own ``prices`` (per million
tokens) for private deployments and models the data does not know. A price that cannot be
found is ``None`` — never 0, which would read as "free".
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from .definitions import ModelDefinition
    from .records import Usage

__all__ = ["UsageTotals", "call_cost", "catalogue_cost", "manual_cost", "summarize"]

log = logging.getLogger("standardagents.costs")

_PER_MILLION = Decimal(1_000_000)
# providers the price data knows by id, by our provider names
_PROVIDER_IDS = {"openai": "openai", "anthropic": "anthropic"}
_OFFICIAL_HOSTS = {"api.openai.com": "openai", "api.anthropic.com": "anthropic"}


def call_cost(model: ModelDefinition, usage: Usage | None, model_ref: str | None = None) -> float | None:
    """The USD cost of one call with ``usage`` on ``model`` (``model_ref``: the model name the
    endpoint reported, when it differs from the definition's). ``None`` when unknown.

    Called on every model step: which name the price data knows and its flat rates are
    remembered per model definition and reported name (for the hour), so a step costs a
    dictionary lookup and a few multiplications."""
    if usage is None:
        return None
    prices = model.prices
    if prices is not None:
        return manual_cost(prices, usage)
    hour = int(time.time() // 3600)
    key = (id(model), model_ref)
    hit = _PRICED.get(key)
    if hit is None or hit[0] is not model or hit[1] != hour:
        if len(_PRICED) >= _PRICED_MAX:
            _PRICED.clear()
        hit = _PRICED[key] = (model, hour, *_priced_name(model, model_ref, hour))
    _model, _hour, ref, rates = hit
    if ref is None:
        return None
    if rates is not None:
        cost = _flat_cost(rates, usage)
        if cost is not None:
            return cost
    return _call_cost(model, usage, model_ref)


# (model definition, reported name) -> (the definition, hour, the name the price data knows, its flat rates)
_PRICED: dict[tuple[int, str | None], tuple[Any, int, str | None, tuple[Any, ...] | None]] = {}
_PRICED_MAX = 256


def _priced_name(model: ModelDefinition, model_ref: str | None,
                 hour: int) -> tuple[str | None, tuple[float, float | None, float | None, float] | None]:
    """The first of the reported and defined names the price data knows, with its flat rates
    (``None``: priced otherwise); ``(None, None)`` when neither is known."""
    if model.provider not in _PROVIDER_IDS:
        return None, None
    provider_id, url = _provider_key(model)
    if provider_id is None and url is None:
        return None, None
    for ref in dict.fromkeys(r for r in (model_ref, model.model) if r):
        if _lookup(ref, provider_id, url) is not None:
            return ref, _flat_rates(ref, provider_id, url, hour)
    return None, None


def _flat_cost(rates: tuple[float, float | None, float | None, float], usage: Usage) -> float | None:
    """The cost at flat per-token rates; ``None`` when the usage needs a rate the model lacks."""
    fresh, cached, written, output = rates
    if (cached is None and usage.cached_tokens) or (written is None and usage.cache_write_tokens):
        return None
    uncached = max(0, usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens)
    return (uncached * fresh + usage.cached_tokens * (cached or 0.0) + usage.cache_write_tokens * (written or 0.0)
            + usage.completion_tokens * output) / 1_000_000


def _call_cost(model: ModelDefinition, usage: Usage, model_ref: str | None) -> float | None:
    """:func:`call_cost` the long way: each known name tried in turn with the full calculation."""
    if model.provider not in _PROVIDER_IDS:
        return None
    provider_id, url = _provider_key(model)
    if provider_id is None and url is None:
        return None
    for ref in dict.fromkeys(r for r in (model_ref, model.model) if r):
        cost = catalogue_cost(usage, ref, provider_id, url)
        if cost is not None:
            return cost
    return None


def manual_cost(prices: Any, usage: Usage) -> float:
    """Cost from prices per million tokens: ``input``, ``output``, ``cached_input`` and
    ``cache_write`` (the last two default to the input price)."""
    get = prices.get if isinstance(prices, dict) else lambda k, d=None: getattr(prices, k, d)
    input_price = Decimal(str(get("input", 0) or 0))
    output_price = Decimal(str(get("output", 0) or 0))
    cached = get("cached_input")
    written = get("cache_write")
    cached_price = input_price if cached is None else Decimal(str(cached))
    write_price = input_price if written is None else Decimal(str(written))
    fresh = max(0, usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens)
    total = (fresh * input_price + usage.cached_tokens * cached_price + usage.cache_write_tokens * write_price
             + usage.completion_tokens * output_price) / _PER_MILLION
    return float(total)


def catalogue_cost(usage: Usage, model_ref: str, provider_id: str | None, provider_url: str | None) -> float | None:
    """Cost from the ``genai-prices`` data; ``None`` when it does not know the model.

    A model priced per token at flat rates (most are) is computed from its rates, looked up
    once an hour; tiered prices, per-request fees and cache use without its own rate go
    through the data's full calculation."""
    rates = _flat_rates(model_ref, provider_id, provider_url, int(time.time() // 3600))
    if rates is not None:
        cost = _flat_cost(rates, usage)
        if cost is not None:
            return cost
    found = _lookup(model_ref, provider_id, provider_url)
    if found is None:
        return None
    model_info, provider = found
    from genai_prices import Usage as PriceUsage

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        counted = PriceUsage(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens,
                             cache_read_tokens=usage.cached_tokens or None,
                             cache_write_tokens=usage.cache_write_tokens or None)
    try:
        calc = model_info.calc_price(counted, provider, genai_request_timestamp=datetime.now(tz=UTC))
    except Exception:  # a model the data lists without a usable price
        log.debug("no price for %s", model_ref, exc_info=True)
        return None
    return float(calc.total_price)


_TOKEN_RATES = ("input_mtok", "cache_read_mtok", "cache_write_mtok", "output_mtok")


@lru_cache(maxsize=512)
def _flat_rates(model_ref: str, provider_id: str | None, provider_url: str | None,
                hour: int) -> tuple[float, float | None, float | None, float] | None:
    """USD per token (input, cache read, cache write, output) of a model priced at flat
    per-token rates with no per-request fee; ``None`` for anything else. ``hour`` keys the
    cache, so a price that changes on a date is picked up."""
    found = _lookup(model_ref, provider_id, provider_url)
    if found is None:
        return None
    try:
        prices = found[0].get_prices(datetime.now(tz=UTC)).__dict__
    except Exception:
        return None
    if prices.get("requests_kcount") is not None:
        return None
    rates: list[float | None] = []
    for key in _TOKEN_RATES:
        value = prices.get(key)
        if value is not None and not isinstance(value, Decimal):
            return None  # tiered
        rates.append(None if value is None else float(value))
    fresh, cached, written, output = rates
    if fresh is None or output is None:
        return None
    return fresh, cached, written, output


@lru_cache(maxsize=512)
def _lookup(model_ref: str, provider_id: str | None, provider_url: str | None) -> tuple[Any, Any] | None:
    """The price data's (model, provider) for a model name, remembered (misses too)."""
    from genai_prices import data_snapshot

    try:
        provider, model_info = data_snapshot.get_snapshot().find_provider_model(model_ref, None, provider_id,
                                                                                 provider_url)
    except LookupError:
        return None
    return model_info, provider


def _provider_key(model: ModelDefinition) -> tuple[str | None, str | None]:
    """``(provider_id, provider_url)`` for the price data: official APIs by id, other
    endpoints (gateways such as OpenRouter) by their URL; local servers have no price."""
    return _endpoint_key(model.provider, model.base_url)


@lru_cache(maxsize=256)
def _endpoint_key(provider: str, base: str | None) -> tuple[str | None, str | None]:
    from .providers.openai import is_local_url

    if base is None:
        return _PROVIDER_IDS[provider], None
    host = (urlsplit(base).hostname or "").lower()
    if host in _OFFICIAL_HOSTS:
        return _OFFICIAL_HOSTS[host], None
    if is_local_url(base):
        return None, None
    return None, base


class UsageTotals:
    """Running sums of tokens and cost; ``cost`` stays ``None`` until a priced call is added,
    and ``uncosted`` counts the calls whose price was unknown."""

    __slots__ = ("cached_tokens", "calls", "completion_tokens", "cost", "prompt_tokens", "uncosted")

    def __init__(self) -> None:
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_tokens = 0
        self.cost: float | None = None
        self.uncosted = 0

    def add(self, usage: dict[str, Any] | None, cost: float | None) -> None:
        self.calls += 1
        if usage:
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)
            self.cached_tokens += int(usage.get("cached_tokens") or 0)
        if cost is None:
            self.uncosted += 1
        else:
            self.cost = (self.cost or 0.0) + cost

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "inputTokens": self.prompt_tokens, "outputTokens": self.completion_tokens,
                "totalTokens": self.prompt_tokens + self.completion_tokens, "cachedTokens": self.cached_tokens,
                "costUsd": None if self.cost is None else round(self.cost, 9), "uncostedCalls": self.uncosted}


def summarize(rows: Iterable[dict[str, Any]], by: str | None) -> list[dict[str, Any]]:
    """Sum usage rows (``agent``, ``user_id``, ``model``, ``created_at``, ``usage``, ``cost``)
    per ``by`` (``agent``, ``model``, ``user`` or ``day``; ``None``: one total)."""
    groups: dict[Any, UsageTotals] = {}
    for row in rows:
        if by is None:
            key = None
        elif by == "day":
            key = datetime.fromtimestamp(int(row["created_at"]) / 1000, tz=UTC).date().isoformat()
        elif by == "user":
            key = row.get("user_id")
        else:
            key = row.get(by)
        totals = groups.get(key)
        if totals is None:
            totals = groups[key] = UsageTotals()
        totals.add(row.get("usage"), row.get("cost"))
    out = []
    for key in sorted(groups, key=lambda k: (k is None, str(k))):
        entry = groups[key].to_dict()
        if by is not None:
            entry = {by: key, **entry}
        out.append(entry)
    return out
