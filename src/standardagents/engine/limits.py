"""Usage limits at run time: a meter that counts one turn's spending and stops it in time.

The loop asks the meter before each model request (with the request's estimated input
tokens) and before running tool calls; a limit already passed by the last response is caught
at the same places, so no further work starts once one is exceeded. A tripped limit ends the
turn with outcome ``usage_limit``; what was stored before stays.
"""

from __future__ import annotations

import json
from operator import is_
from typing import TYPE_CHECKING, Any

from ..definitions.limits import UsageLimits
from ..toolcalls import estimate_tokens
from .output import OUTPUT_TOOL_NAME

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

    def __init__(self, limits: UsageLimits, history: list[Message], execution_id: str | None = None) -> None:
        """``execution_id``: a turn that goes on (resumed after an approval or a crash); what its
        earlier steps in ``history`` spent counts toward the turn's limits again."""
        self.limits = limits
        self.requests = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.tool_calls = 0
        self.cost = 0.0
        # only the limits that are set are checked, each with what it counts
        active = [(name, cap, spent) for name, spent in _SPENT.items() if (cap := getattr(limits, name)) is not None]
        self._passed = active
        self._estimated = [a for a in active if a[0] in _ESTIMATED]
        self._reached = [a for a in active if a[0] in _REACHED]
        # the last request's messages and the estimate of each
        self._last: list[Any] = []
        self._costs: list[int] = []
        self._total = 0
        # whether a response was counted since the last check (only that can pass a limit)
        self._recorded = True
        self._tools: tuple[Any, int] | None = None
        # what earlier turns of the thread spent (the messages present when this turn began)
        self.prior_input = self.prior_output = 0
        self.prior_cost = 0.0
        if execution_id is not None or limits.any_thread_limit():
            for m in history:
                if execution_id is not None and m.metadata.get("executionId") == execution_id \
                        and m.role == "assistant" and "step" in m.metadata:
                    self.requests += 1
                    self.tool_calls += sum(1 for c in m.tool_calls or () if c.name != OUTPUT_TOOL_NAME)
                    if m.usage is not None:
                        self.input_tokens += m.usage.prompt_tokens
                        self.output_tokens += m.usage.completion_tokens
                    if m.cost is not None:
                        self.cost += m.cost
                    continue
                if m.usage is not None:
                    self.prior_input += m.usage.prompt_tokens
                    self.prior_output += m.usage.completion_tokens
                if m.cost is not None:
                    self.prior_cost += m.cost

    def _estimate(self, request: ModelRequest) -> int:
        """The request's input tokens, estimated; each message and the tool list are counted
        once per turn. A step's request usually repeats the last one's messages and appends a
        few: that is checked by one list comparison (in C; equal messages count the same), and
        only the new ones are estimated. Otherwise the lists are compared position by position
        and only the messages that differ are estimated again."""
        messages = request.messages
        last = self._last
        kept = len(last)
        if kept and len(messages) >= kept and messages[:kept] == last:
            added = [estimate_tokens(m) for m in messages[kept:]]
            self._costs.extend(added)
            self._total += sum(added)
        else:
            costs = self._costs
            same = list(map(is_, messages, last))
            if len(costs) > len(same):
                del costs[len(same):]
            i = -1
            for _ in range(same.count(False)):
                i = same.index(False, i + 1)
                costs[i] = estimate_tokens(messages[i])
            for message in messages[len(same):]:
                costs.append(estimate_tokens(message))
            self._total = sum(costs)
        # a copy: the caller may change its list; the messages stay alive, so an id is not reused
        self._last = list(messages)
        total = self._total
        tools = request.tools
        if tools:
            if self._tools is None or self._tools[0] is not tools:
                self._tools = _tools_estimate(tools)
            total += self._tools[1]
        return total

    def record(self, usage: Usage | None, cost: float | None) -> None:
        """Count one model response."""
        self._recorded = True
        self.requests += 1
        if usage is not None:
            self.input_tokens += usage.prompt_tokens
            self.output_tokens += usage.completion_tokens
        if cost is not None:
            self.cost += cost

    def before_request(self, request: ModelRequest) -> None:
        """Raise :class:`LimitTripped` when the next request would pass a limit."""
        if self._recorded:
            self.check()
        lim = self.limits
        if lim.requests is not None and self.requests + 1 > lim.requests:
            raise LimitTripped("requests", self.requests + 1, lim.requests, before=True)
        if self._estimated:
            estimate = self._estimate(request)
            for name, cap, used_of in self._estimated:
                used = used_of(self) + estimate
                if used > cap:
                    raise LimitTripped(name, used, cap, before=True)
        # a request always produces output and costs something: reaching these caps is enough
        for name, cap, used_of in self._reached:
            used = used_of(self)
            if used >= cap:
                raise LimitTripped(name, round(used, 9) if isinstance(used, float) else used, cap, before=False)

    def before_tools(self, count: int) -> None:
        """Raise :class:`LimitTripped` when running ``count`` more calls would pass a limit."""
        if self._recorded:
            self.check()
        cap = self.limits.tool_calls
        if cap is not None and self.tool_calls + count > cap:
            raise LimitTripped("tool_calls", self.tool_calls + count, cap, before=True)
        self.tool_calls += count

    def check(self) -> None:
        """Raise :class:`LimitTripped` when what was already spent passed a limit."""
        for name, cap, used_of in self._passed:
            used = used_of(self)
            if used > cap:
                raise LimitTripped(name, round(used, 9) if isinstance(used, float) else used, cap, before=False)
        self._recorded = False


# what each limit counts, as spent so far (the estimate of the next request is added to the
# input-side ones before a request)
_SPENT: dict[str, Any] = {
    "input_tokens": lambda m: m.input_tokens,
    "output_tokens": lambda m: m.output_tokens,
    "total_tokens": lambda m: m.input_tokens + m.output_tokens,
    "thread_input_tokens": lambda m: m.prior_input + m.input_tokens,
    "thread_output_tokens": lambda m: m.prior_output + m.output_tokens,
    "thread_total_tokens": lambda m: m.prior_input + m.prior_output + m.input_tokens + m.output_tokens,
    "cost_usd": lambda m: m.cost,
    "thread_cost_usd": lambda m: m.prior_cost + m.cost,
}
_ESTIMATED = ("input_tokens", "total_tokens", "thread_input_tokens", "thread_total_tokens")
_REACHED = ("output_tokens", "thread_output_tokens", "cost_usd", "thread_cost_usd")


# the estimate of a tool list, by the list: a side's offered tools are one list shared by its
# turns (see SideSetup.tools_at), so each is serialised once, not once per turn
_TOOL_ESTIMATES: dict[int, tuple[Any, int]] = {}
_TOOL_ESTIMATES_MAX = 256


def _tools_estimate(tools: list[dict[str, Any]]) -> tuple[Any, int]:
    known = _TOOL_ESTIMATES.get(id(tools))
    if known is None or known[0] is not tools:
        if len(_TOOL_ESTIMATES) >= _TOOL_ESTIMATES_MAX:
            _TOOL_ESTIMATES.clear()
        known = _TOOL_ESTIMATES[id(tools)] = (tools, estimate_tokens(json.dumps(tools, separators=(",", ":"))))
    return known
