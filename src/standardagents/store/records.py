"""Rows of the store's account, effect and subagent tables as small dataclasses.

They live beside the store (not in :mod:`standardagents.records`) because only the
server, the scheduler and the subagent machinery read them, never the per-step engine path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..records import new_id, now_ms

__all__ = [
    "ApiTokenRecord",
    "EffectRecord",
    "EffectStatus",
    "SubagentRecord",
    "UserRecord",
]

EffectStatus = Literal["pending", "running", "done", "failed", "cancelled"]


@dataclass(slots=True)
class UserRecord:
    """A person or service that owns threads and API tokens."""

    name: str
    id: str = field(default_factory=lambda: new_id("usr_"))
    email: str | None = None
    is_admin: bool = False
    created_at: int = field(default_factory=now_ms)


@dataclass(slots=True)
class ApiTokenRecord:
    """An API token as stored: only the SHA-256 of the secret and a short display prefix."""

    user_id: str
    name: str
    token_hash: str
    prefix: str
    id: str = field(default_factory=lambda: new_id("tok_"))
    created_at: int = field(default_factory=now_ms)
    last_used_at: int | None = None
    revoked_at: int | None = None


@dataclass(slots=True)
class EffectRecord:
    """A side effect scheduled to run at ``run_at`` (epoch ms), claimed by one worker at a time.

    ``claimed_until`` is the end of the claiming worker's lease; a running effect whose lease
    has passed is claimable again (its worker is presumed dead).
    """

    thread_id: str
    name: str
    args: Any = None
    run_at: int = field(default_factory=now_ms)
    id: str = field(default_factory=lambda: new_id("eff_"))
    status: EffectStatus = "pending"
    attempts: int = 0
    last_error: str | None = None
    result: Any = None
    created_at: int = field(default_factory=now_ms)
    updated_at: int = field(default_factory=now_ms)
    claimed_by: str | None = None
    claimed_until: int | None = None
    #: the propagation headers (``traceparent``...) of the span that scheduled it, if traced
    trace: dict[str, str] | None = None


@dataclass(slots=True)
class SubagentRecord:
    """A link from a parent thread to a child thread running another agent."""

    parent_thread_id: str
    child_thread_id: str
    agent: str
    id: str = field(default_factory=lambda: new_id("sub_"))
    relationship: str | None = None
    status: str = "running"
    result: Any = None
    created_at: int = field(default_factory=now_ms)
    updated_at: int = field(default_factory=now_ms)
