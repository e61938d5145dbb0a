"""Usage limits at run time: a meter that counts one turn's spending and stops it in time.

The loop asks the meter before each model request (with the request's estimated input
tokens) and before running tool calls; a limit already passed by the last response is caught
at the same places, so no further work starts once one is exceeded. A tripped limit ends the
turn with outcome ``usage_limit``; what was stored before stays.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..definitions.limits import UsageLimits
from ..toolcalls import estimate_tokens

if TYPE_CHECKING:
    from ..providers.base import ModelRequest
    from ..records import Message, Usage

__all__ = ["LimitTripped", "UsageMeter"]

_LABELS = {
    "requests": "model requests per turn",
    "input_tokens": "input tokens per turn",
    "output_tokens": "output tokens per turn",
    "total_tokens": "tokens per turn",
    "tool_calls": "tool calls per turn",
    "cost_usd": "USD per turn",
    "thread_input_tokens": "input tokens in this thread",
    "thread_output_tokens": "output tokens in this thread",
    "thread_total_tokens": "tokens in this thread",
    "thread_cost_usd": "USD in this thread",
}


class LimitTripped(Exception):
    """A usage limit stopped the turn: which one, how much was (or would be) used, and a
    sentence a person can read."""

    def __init__(self, limit: str, used: float, maximum: float, *, before: bool) -> None:
        self.limit = limit
        self.used = used
        self.maximum = maximum
        label = _LABELS.get(limit, limit)
        shown = f"{used:.6f}".rstrip("0").rstrip(".") if isinstance(used, float) else str(used)
        if before:
            message = f"The turn stopped before going over its limit of {maximum:g} {label} (it would reach {shown})."
        else:
            message = f"The turn stopped: it has used {shown} of its limit of {maximum:g} {label}."
        super().__init__(message)
        self.message = message

    def payload(self) -> dict[str, Any]:
        return {"limit": self.limit, "used": self.used, "max": self.maximum, "message": self.message}


class UsageMeter:
    """One turn's requests, tokens, tool calls and cost, against its limits."""

    def __init__(self, limits: UsageLimits, history: list[Message]) -> None:
        self.limits = limits
        self.requests = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.tool_calls = 0
        self.cost = 0.0
        # estimates already made this turn, by message (kept alive, so an id is never reused)
        self._seen: dict[int, tuple[Any, int]] = {}
        self._tools: tuple[Any, int] | None = None
        # what earlier turns of the thread spent (the messages present when this turn began)
        self.prior_input = self.prior_output = 0
        self.prior_cost = 0.0
        if limits.any_thread_limit():
            for m in history:
                if m.usage is not None:
                    self.prior_input += m.usage.prompt_tokens
                    self.prior_output += m.usage.completion_tokens
                if m.cost is not None:
                    self.prior_cost += m.cost

    def _estimate(self, request: ModelRequest) -> int:
        """The request's input tokens, estimated; each message and the tool list are counted
        once per turn (the history grows by appending, so a step counts only what is new)."""
        seen = self._seen
        total = 0
        for message in request.messages:
            known = seen.get(id(message))
            if known is None or known[0] is not message:
                known = seen[id(message)] = (message, estimate_tokens(message))
            total += known[1]
        tools = request.tools
        if tools:
            if self._tools is None or self._tools[0] is not tools:
                self._tools = (tools, estimate_tokens(json.dumps(tools, separators=(",", ":"))))
            total += self._tools[1]
        return total

    def record(self, usage: Usage | None, cost: float | None) -> None:
        """Count one model response."""
        self.requests += 1
        if usage is not None:
            self.input_tokens += usage.prompt_tokens
            self.output_tokens += usage.completion_tokens
        if cost is not None:
            self.cost += cost

    def before_request(self, request: ModelRequest) -> None:
        """Raise :class:`LimitTripped` when the next request would pass a limit."""
        self.check()
        lim = self.limits
        if lim.requests is not None and self.requests + 1 > lim.requests:
            raise LimitTripped("requests", self.requests + 1, lim.requests, before=True)
        if any(v is not None for v in (lim.input_tokens, lim.total_tokens, lim.thread_input_tokens,
                                       lim.thread_total_tokens)):
            estimate = self._estimate(request)
            turn_in = self.input_tokens + estimate
            thread_in = self.prior_input + turn_in
            for name, used in (("input_tokens", turn_in), ("total_tokens", turn_in + self.output_tokens),
                               ("thread_input_tokens", thread_in),
                               ("thread_total_tokens", thread_in + self.prior_output + self.output_tokens)):
                cap = getattr(lim, name)
                if cap is not None and used > cap:
                    raise LimitTripped(name, used, cap, before=True)
        # a request always produces output and costs something: reaching these caps is enough
        for name, spent in (("output_tokens", self.output_tokens),
                            ("thread_output_tokens", self.prior_output + self.output_tokens),
                            ("cost_usd", self.cost), ("thread_cost_usd", self.prior_cost + self.cost)):
            cap = getattr(lim, name)
            if cap is not None and spent >= cap:
                raise LimitTripped(name, round(spent, 9) if isinstance(spent, float) else spent, cap, before=False)

    def before_tools(self, count: int) -> None:
        """Raise :class:`LimitTripped` when running ``count`` more calls would pass a limit."""
        self.check()
        cap = self.limits.tool_calls
        if cap is not None and self.tool_calls + count > cap:
            raise LimitTripped("tool_calls", self.tool_calls + count, cap, before=True)
        self.tool_calls += count

    def check(self) -> None:
        """Raise :class:`LimitTripped` when what was already spent passed a limit."""
        lim = self.limits
        for name, used in (("input_tokens", self.input_tokens), ("output_tokens", self.output_tokens),
                           ("total_tokens", self.input_tokens + self.output_tokens),
                           ("thread_input_tokens", self.prior_input + self.input_tokens),
                           ("thread_output_tokens", self.prior_output + self.output_tokens),
                           ("thread_total_tokens", self.prior_input + self.prior_output + self.input_tokens
                            + self.output_tokens)):
            cap = getattr(lim, name)
            if cap is not None and used > cap:
                raise LimitTripped(name, used, cap, before=False)
        for name, spent in (("cost_usd", self.cost), ("thread_cost_usd", self.prior_cost + self.cost)):
            cap = getattr(lim, name)
            if cap is not None and spent > cap:
                raise LimitTripped(name, round(spent, 9), cap, before=False)
