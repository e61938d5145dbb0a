"""Runtime records: the small typed values the engine, store and server pass around.

Definitions (what a user writes) are Pydantic models in :mod:`standardagents.definitions`;
these are plain dataclasses because they are created on every step and must be cheap.
``to_dict()`` gives the wire shape (the spec's field names); ``from_dict()`` reads it back.
Times are integer epoch milliseconds, as the spec's ``Date.now()`` values are.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, NamedTuple

__all__ = [
    "ExecutionRecord",
    "Fence",
    "FileRecord",
    "LogRecord",
    "Message",
    "MessageRole",
    "Side",
    "ThreadRecord",
    "ToolCall",
    "ToolResult",
    "Usage",
    "new_id",
    "now_ms",
]

MessageRole = Literal["system", "user", "assistant", "tool"]
Side = Literal["a", "b"]
ExecutionStatus = Literal["running", "waiting", "complete", "interrupted", "error", "cancelled"]


def now_ms() -> int:
    """Current time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


class _RandomIds:
    """128-bit ids cut from one read of the OS's random source per 256 ids (a read per id is
    a system call each time). Safe across threads: each slot of a pool is handed out once
    (``next`` on a counter is atomic), and a forked child never reuses its parent's pool."""

    __slots__ = ("pool",)

    def __init__(self) -> None:
        self.pool: tuple[str, Iterator[int]] = ("", itertools.count(_POOL))

    def take(self) -> str:
        hexes, counter = self.pool
        i = next(counter)
        if i >= _POOL:
            hexes = os.urandom(16 * _POOL).hex()
            self.pool = (hexes, itertools.count(1))
            i = 0
        return hexes[i * 32:i * 32 + 32]

    def forget(self) -> None:
        self.pool = ("", itertools.count(_POOL))


_POOL = 256
_IDS = _RandomIds()
os.register_at_fork(after_in_child=_IDS.forget)


def new_id(prefix: str = "") -> str:
    """A new unique id (128 random bits, as a UUID4 has); the prefix only helps humans."""
    return prefix + _IDS.take()


@dataclass(slots=True)
class Usage:
    """Token usage of one model response.

    ``prompt_tokens`` counts every input token, including ``cached_tokens`` (read from the
    provider's prompt cache) and ``cache_write_tokens`` (written to it), which are priced
    differently."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        # spelled out: dataclasses.asdict recurses and copies, several times slower per step
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.total_tokens, "reasoning_tokens": self.reasoning_tokens,
                "cached_tokens": self.cached_tokens, "cache_write_tokens": self.cache_write_tokens}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Usage | None:
        if not data:
            return None
        names = {f.name for f in fields(cls)}
        return cls(**{k: int(v or 0) for k, v in data.items() if k in names})


@dataclass(slots=True, frozen=True)
class _Function:
    name: str
    arguments: str


@dataclass(slots=True)
class ToolCall:
    """One tool call a model asked for. ``arguments`` is the JSON text as sent."""

    id: str
    name: str
    arguments: str = "{}"

    @property
    def function(self) -> _Function:
        """Spec-shaped access: ``call.function.name`` and ``call.function.arguments``."""
        return _Function(self.name, self.arguments)

    def to_dict(self) -> dict[str, Any]:
        """The spec's ``HookToolCall`` / chat-completions shape."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        fn = data.get("function") or {}
        return cls(id=str(data.get("id", "")), name=str(fn.get("name", data.get("name", ""))),
                   arguments=str(fn.get("arguments", data.get("arguments", "{}")) or "{}"))


@dataclass(slots=True)
class ToolResult:
    """The outcome of one tool call (the spec's ``HookToolResult``)."""

    status: Literal["success", "error"]
    result: str | None = None
    error: str | None = None
    stack: str | None = None
    attachments: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status}
        if self.result is not None:
            out["result"] = self.result
        if self.error is not None:
            out["error"] = self.error
        if self.stack is not None:
            out["stack"] = self.stack
        if self.attachments:
            out["attachments"] = list(self.attachments)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResult:
        status = data.get("status", "success")
        return cls(
            status="error" if status == "error" else "success",
            result=data.get("result"),
            error=data.get("error"),
            stack=data.get("stack"),
            attachments=list(data.get("attachments") or []),
        )

    @property
    def content(self) -> str:
        """What the model reads for this result."""
        if self.status == "success":
            return self.result if self.result is not None else ""
        return f"Error: {self.error or 'tool failed'}"


@dataclass(slots=True)
class Message:
    """One message of a thread, as stored and as hooks see it.

    ``seq`` orders messages within a thread (assigned by the store). ``status`` is
    ``complete`` unless a reply was cut short (``partial``, ``cancelled``, ``error``).
    ``silent`` hides a message from clients only; it stays in the model's context.
    ``hidden`` keeps it out of the model's context (compacted or filtered history)
    while clients still see it. ``cost`` is the USD price of the model call that produced
    the message (``None``: not a model reply, or its price is unknown).
    """

    thread_id: str
    role: MessageRole
    content: str | None = None
    id: str = field(default_factory=lambda: new_id("msg_"))
    parts: list[dict[str, Any]] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    side: Side | None = None
    silent: bool = False
    hidden: bool = False
    attachments: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage | None = None
    reasoning: str | None = None
    status: str = "complete"
    tool_status: Literal["success", "error"] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: int = field(default_factory=now_ms)
    updated_at: int | None = None
    seq: int | None = None
    cost: float | None = None

    def copy(self, **changes: Any) -> Message:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The wire shape (spec field names)."""
        return {
            "id": self.id,
            "thread_id": self.thread_id,
            "role": self.role,
            "content": self.content,
            "parts": self.parts,
            "tool_calls": [tc.to_dict() for tc in self.tool_calls] if self.tool_calls else None,
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "side": self.side,
            "silent": self.silent,
            "hidden": self.hidden,
            "attachments": list(self.attachments),
            "usage": self.usage.to_dict() if self.usage else None,
            "reasoning_content": self.reasoning,
            "status": self.status,
            "tool_status": self.tool_status,
            "metadata": dict(self.metadata),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "seq": self.seq,
            "cost": self.cost,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        """Read a message dict (as a hook may return one); unknown keys go to metadata."""
        known = {f.name for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if key == "tool_calls":
                kwargs["tool_calls"] = [v if isinstance(v, ToolCall) else ToolCall.from_dict(v) for v in value] if value else None
            elif key == "usage":
                kwargs["usage"] = value if isinstance(value, Usage) or value is None else Usage.from_dict(value)
            elif key == "reasoning_content":
                kwargs["reasoning"] = value
            elif key in known:
                kwargs[key] = value
            else:
                extra[key] = value
        if extra:
            kwargs["metadata"] = {**(kwargs.get("metadata") or {}), **extra}
        return cls(**kwargs)


@dataclass(slots=True)
class ThreadRecord:
    """A thread: one conversation with one agent."""

    agent: str
    id: str = field(default_factory=lambda: new_id("thr_"))
    user_id: str | None = None
    title: str | None = None
    parent_id: str | None = None
    package: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: int = field(default_factory=now_ms)
    updated_at: int = field(default_factory=now_ms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "agent_id": self.agent,
            "user_id": self.user_id,
            "title": self.title,
            "parent_id": self.parent_id,
            "package": self.package,
            "metadata": dict(self.metadata),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass(slots=True)
class ExecutionRecord:
    """The durable state of one execution, so it can pause and resume anywhere.

    ``state`` is an engine-owned JSON object (pending tool calls, per-side step counts,
    retry budgets...) written with each step's commit. ``epoch`` grows by one each time a
    process takes the execution over: a write of the record is stored only while the stored
    epoch is still the one the writer holds (its fencing token).
    """

    thread_id: str
    id: str = field(default_factory=lambda: new_id("exe_"))
    status: str = "running"
    side: Side = "a"
    step_count: int = 0
    stop_reason: str | None = None
    stopped_by: Side | None = None
    error: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    created_at: int = field(default_factory=now_ms)
    updated_at: int = field(default_factory=now_ms)
    epoch: int = 0


class Fence(NamedTuple):
    """What a write of a running execution is conditional on: the execution still at the
    epoch this process claimed it with."""

    execution_id: str
    epoch: int


@dataclass(slots=True)
class LogRecord:
    """A log line attached to a thread."""

    thread_id: str
    level: str
    message: str
    data: dict[str, Any] | None = None
    id: int | None = None
    created_at: int = field(default_factory=now_ms)


@dataclass(slots=True)
class FileRecord:
    """A file in a thread's file space (content is loaded separately)."""

    thread_id: str
    path: str
    size: int
    mime_type: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: int = field(default_factory=now_ms)
    updated_at: int = field(default_factory=now_ms)
