"""How a turn ended: :class:`ExecutionResult`, what ``await`` on a started turn gives.

It lives apart from the step loop that makes it so that every part of the engine (and the
layers around it) can name it without depending on the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Literal

from typing_extensions import TypeVar

from ..records import Message
from .output import to_jsonable

__all__ = ["ExecutionResult", "OutputT", "StopReason"]

StopReason = Literal["complete", "interrupted", "error", "cancelled"]

#: the type of ``ExecutionResult.value`` (a call's ``output_type``; ``Any`` when untyped)
OutputT = TypeVar("OutputT", default=Any)


@dataclass
class ExecutionResult(Generic[OutputT]):
    """How an execution ended; ``value`` is the turn's typed answer when an ``output_type``
    was given (or what a stop tool returned)."""

    thread_id: str
    execution_id: str
    stop_reason: StopReason
    outcome: str
    text: str | None = None
    error: str | None = None
    stopped_by: Literal["a", "b"] | None = None
    value: OutputT = None  # type: ignore[assignment]
    payload: dict[str, Any] | None = None
    messages: list[Message] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    #: USD spent by the turn's model calls (None when no call had a known price)
    cost: float | None = None
    #: what the subagents this turn ran spent (their own subagents included), apart from
    #: ``usage`` and ``cost``, which count this thread's model calls only
    subagent_usage: dict[str, int] = field(default_factory=dict)
    subagent_cost: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "threadId": self.thread_id, "executionId": self.execution_id, "stopReason": self.stop_reason,
            "outcome": self.outcome, "text": self.text, "error": self.error, "stoppedBy": self.stopped_by,
            "value": to_jsonable(self.value), "payload": self.payload, "usage": self.usage, "cost": self.cost,
            "subagentUsage": self.subagent_usage, "subagentCost": self.subagent_cost,
        }
