"""What every door shares: the agents it offers, opening (or continuing) a caller's thread
under the REST API's access policy, and starting a turn whose events the door can follow."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...engine.approval_tokens import current_decider
from ...engine.options import TurnRequest
from ...events import Subscription
from ...exceptions import QuotaExceeded
from ...records import ThreadRecord
from ...store.base import UserRecord
from ..auth import LOCAL_USER_ID, decider_of
from ..authorization import thread_allowed, thread_metadata

if TYPE_CHECKING:
    from ...definitions import AgentDefinition
    from ...engine.results import ExecutionResult
    from ...engine.runtime import Runtime

__all__ = [
    "DoorError",
    "Turn",
    "TurnFailure",
    "agent_description",
    "decide_calls",
    "local_user",
    "open_thread",
    "primary_agents",
    "start_turn",
    "turn_failure",
]


_CLIENT_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


class DoorError(Exception):
    """A refusal a door reports in its protocol's own way (``status`` as over HTTP)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class TurnFailure:
    """Why a finished turn gave the caller no answer, as every door reports it: an HTTP-like
    ``status``, a stable ``code`` and a message; ``retry_after`` (seconds) when the model's
    provider named one."""

    status: int
    code: str
    message: str
    retry_after: float | None = None


def turn_failure(outcome: str | None, stop_reason: str | None, error: str | None,
                 payload: dict[str, Any] | None, has_text: bool) -> TurnFailure | None:
    """The failure a turn ended in, or None when it answered (or paused: approvals and client
    tool calls are each door's own business, as is a cancelled turn).

    One classification for every door, so a guardrail, a usage limit or a model that failed
    is a failure over MCP, A2A and AG-UI exactly as over the OpenAI doors: the model's 429 stays
    a 429, an unreachable or failing endpoint is a 502 (503 when it said so, 504 on a
    timeout), a guardrail a 400 with its reason, a usage limit a 429 without a retry time, an
    answer that never matched the agent's output type a 502."""
    payload = payload or {}
    if outcome == "model_error":
        status, code = payload.get("status"), payload.get("code")
        message = f"the agent's model failed: {error}"
        if status == 429:
            wait = payload.get("retryAfter")
            return TurnFailure(429, "rate_limit_exceeded", message,
                               float(wait) if isinstance(wait, int | float) else None)
        if code == "timeout" or status in (408, 504):
            return TurnFailure(504, "model_timeout", message)
        if status == 503:
            return TurnFailure(503, "model_unavailable", message)
        return TurnFailure(502, "model_error", message)
    if outcome == "guardrail":
        name, kind, info = payload.get("guardrail"), payload.get("kind"), payload.get("info")
        reason = f": {info}" if info else ""
        return TurnFailure(400, "guardrail_tripped", f"the {kind} guardrail {name!r} stopped the turn{reason}")
    if outcome == "usage_limit":
        return TurnFailure(429, "usage_limit", f"a usage limit stopped the turn: {error}")
    if outcome == "output_invalid":
        return TurnFailure(502, "output_invalid", f"the agent's answer never matched its output type: {error}")
    if outcome in ("approval_required", "client_tool_calls", "cancelled") or stop_reason == "cancelled":
        return None
    if (stop_reason == "error" or outcome == "error") and not has_text:
        return TurnFailure(502, "agent_error", f"the agent failed: {error}")
    return None


async def primary_agents(rt: Runtime) -> list[tuple[str, AgentDefinition]]:
    """The agents a client may talk to (the primary ones), by their public names, sorted."""
    found: list[tuple[str, AgentDefinition]] = []
    for entry in rt.registry.entries("agents"):
        agent = await rt.registry.aget("agents", entry.name, entry.package)
        if agent.primary:
            found.append((rt.registry.public_name(entry), agent))
    found.sort(key=lambda pair: pair[0])
    return found


def agent_description(name: str, agent: AgentDefinition) -> str:
    """What a client is told about an agent: its own description, else a generic line."""
    return (agent.description or agent.tool_description or f"Talk to the agent {name!r}.").strip()


async def local_user(rt: Runtime) -> UserRecord:
    """The local admin a dev server (or a local stdio door) acts as."""
    user = await rt.store.get_user(LOCAL_USER_ID)
    if user is None:
        user = await rt.store.create_user("local", is_admin=True, user_id=LOCAL_USER_ID)
    return user


async def open_thread(rt: Runtime, caller: UserRecord, agent: str, thread_id: str | None,
                      source: str, *, create: bool = False) -> ThreadRecord:
    """The thread to talk in: ``thread_id`` when the caller may use it and it belongs to
    ``agent``, else a new thread of the caller's (``source`` is kept in its metadata).

    With ``create``, an unknown ``thread_id`` is the id of a new thread (protocols whose
    clients choose thread ids)."""
    entry = rt.registry.find("agents", agent)
    if entry is None or not (await rt.registry.aget("agents", entry.name, entry.package)).primary:
        raise DoorError(404, f"unknown agent {agent!r}")
    if not thread_id:
        return await rt.create_thread(agent, user_id=caller.id,
                                      metadata=await thread_metadata(rt, caller, agent, {"source": source}))
    thread = await rt.store.get_thread(thread_id)
    if thread is None and create:
        if not _CLIENT_ID.match(thread_id):
            raise DoorError(422, "a thread id is 1 to 128 letters, digits, '-', '_', '.' or ':'")
        try:
            return await rt.create_thread(agent, user_id=caller.id, thread_id=thread_id,
                                          metadata=await thread_metadata(rt, caller, agent, {"source": source}))
        except Exception:
            # created meanwhile by a concurrent request: use it as any existing thread
            thread = await rt.store.get_thread(thread_id)
            if thread is None:
                raise
    if thread is None:
        raise DoorError(404, f"unknown thread {thread_id!r}")
    if not await thread_allowed(rt, caller, thread, "write"):
        raise DoorError(403, f"you may not access thread {thread_id!r} (it belongs to another user)")
    if rt.registry.find("agents", thread.agent, thread.package) is not entry:
        raise DoorError(422, f"thread {thread_id!r} belongs to agent {thread.agent!r}, not {agent!r}")
    return thread


@dataclass
class Turn:
    """A started execution: its task, id and a subscription opened before it started."""

    thread: ThreadRecord
    execution_id: str
    task: asyncio.Task[ExecutionResult]
    sub: Subscription


async def start_turn(rt: Runtime, thread: ThreadRecord, request: TurnRequest) -> Turn:
    """Start (or queue) the execution ``request`` asks for, subscribed first so no event is
    missed."""
    sub = rt.subscribe(thread.id, reasoning=False)
    try:
        started = await rt.begin(thread, request)
    except BaseException:
        sub.close()
        raise
    return Turn(thread, started.id, started.task, sub)


def quota_refusal(exc: QuotaExceeded) -> str:
    """What a door tells a caller whose turn its quota refused: the quota that was met and
    when to try again (over REST the same is a 429 with ``Retry-After``)."""
    seconds = exc.retry_after
    return f"quota exceeded: {exc}; nothing was run, retry in {seconds} second{'s' if seconds != 1 else ''}"


async def decide_calls(rt: Runtime, thread_id: str, decisions: list[tuple[str, bool, str | None]],
                       caller: UserRecord | None = None,
                       ) -> tuple[Subscription, asyncio.Task[ExecutionResult]] | None:
    """Record ``(token, approved, reason)`` decisions for a thread's waiting calls, subscribed
    first so no event of the resumed turn is missed: the subscription and the resumed turn's
    task, or None when calls still wait (or nothing was decided). Every door that lets a
    person answer an approval goes through here; an ``ApprovalError`` propagates. ``caller``
    decides (checked against the agent's approvers and audited); without it, the caller the
    request was authenticated as."""
    if not decisions:
        return None
    sub = rt.subscribe(thread_id, reasoning=False)
    task = None
    reset = current_decider.set(decider_of(caller)) if caller is not None else None
    try:
        for token, approved, reason in decisions:
            task = await rt.decide(token, approved, reason=reason, thread_id=thread_id) or task
    except BaseException:
        sub.close()
        raise
    finally:
        if reset is not None:
            current_decider.reset(reset)
    if task is None:
        sub.close()
        return None
    return sub, task
