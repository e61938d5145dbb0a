"""Human approval: a tool marked ``needs_approval`` pauses the turn before it runs.

The execution is stored as ``waiting`` with its pending calls; each call is announced with
an opaque resume token signed with the runtime's secret. Approving or denying every pending
call continues the same execution (a denial becomes a tool result the model reads).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from .. import observability as observe
from ..exceptions import StoreError
from ..records import ExecutionRecord, Fence, ThreadRecord, new_id, now_ms
from ..store.identityops import ApprovalDecisionRecord, record_approval_decision
from .approval_tokens import (
    TOKEN_MAX_AGE,
    ApprovalError,
    ApprovalForbidden,
    Decider,
    approval_request,
    call_digest,
    current_decider,
    make_token,
    read_token,
    signing_secret,
)

if TYPE_CHECKING:
    from ..definitions import AgentDefinition
    from .hosts import ApprovalsHost
    from .options import TurnOptions
    from .results import ExecutionResult

__all__ = [
    "TOKEN_MAX_AGE",
    "ApprovalError",
    "ApprovalForbidden",
    "Decider",
    "approval_request",
    "make_token",
    "may_approve",
    "read_token",
    "signing_secret",
]

log = logging.getLogger("standardagents.approvals")
_UNSET: Any = object()


def may_approve(approvers: list[str], thread: ThreadRecord, decider: Decider | None) -> bool:
    """Whether ``decider`` is one of an agent's ``approvers`` for this thread (an operator at the
    command line, with no decider, always is)."""
    if decider is None:
        return True
    for rule in approvers:
        kind, _, rest = rule.partition(":")
        if rule == "owner" and thread.user_id is not None and thread.user_id == decider.id:
            return True
        if rule == "admin" and decider.is_admin:
            return True
        if (kind == "user" and rest == decider.id) or (kind == "role" and rest in decider.roles):
            return True
        if kind == "claim":
            name, _, value = rest.partition("=")
            held = decider.claims.get(name)
            if str(held) == value or (isinstance(held, list) and value in [str(v) for v in held]):
                return True
    return False

async def pending_approvals(rt: ApprovalsHost, thread_id: str) -> list[dict[str, Any]]:
    """The calls of a thread waiting for a decision, each with a fresh resume token."""
    secret = await signing_secret(rt.store)
    out = []
    for record in await rt.store.list_executions(thread_id=thread_id, status="waiting"):
        decided = record.state.get("decisions", {})
        for item in record.state.get("pending", []):
            if item["id"] in decided:
                continue
            try:
                arguments: Any = json.loads(item.get("arguments") or "{}")
            except ValueError:
                arguments = item.get("arguments")
            digest = call_digest(item["name"], item.get("arguments") or "{}")
            token = make_token(secret, thread_id=thread_id, execution_id=record.id, call_id=item["id"], digest=digest)
            out.append({**approval_request(item["id"], item["name"], arguments, token, record.id), "digest": digest})
    return out


async def decide(rt: ApprovalsHost, token: str, approved: bool, *, reason: str | None = None,
                 thread_id: str | None = None, decider: Decider | None = _UNSET,
                 ) -> asyncio.Task[ExecutionResult] | None:
    """Approve or deny one paused call. When it was the last pending call of its
    execution, the same execution continues; its task is returned (else None).

    The decision is bound to the call's tool and exact arguments (a token asked for another
    call is refused), consumed once, and audited with who decided (``decider``, else the
    request's :data:`current_decider`), when and why.

    Raises :class:`~standardagents.engine.approvals.ApprovalError` for a forged or stale
    token, or a call that is no longer pending; :class:`ApprovalForbidden` for a decider the
    agent's ``approvers`` leave out, or a call that waited past ``approval_expires_in``."""
    data = read_token(await signing_secret(rt.store), token)
    if thread_id is not None and data["thread_id"] != thread_id:
        raise ApprovalError("this approval token belongs to another thread")
    who = current_decider.get() if decider is _UNSET else decider
    thread = await rt.get_thread(data["thread_id"])
    agent = await rt.agent(thread.agent, thread.package)
    if not may_approve(agent.approvers, thread, who):
        raise ApprovalForbidden(f"you may not decide this call: agent {agent.name!r} takes decisions from "
                                f"{', '.join(agent.approvers) or 'nobody'}")
    # A compare-and-set on the stored record: of concurrent deciders (a double click, two
    # workers, a CLI), exactly one records each decision and exactly one resumes.
    for _attempt in range(50):
        record = await rt.store.get_execution(data["execution_id"])
        if record is None or record.status != "waiting":
            raise ApprovalError("this approval is stale: the execution is no longer waiting")
        calls = {p["id"]: p for p in record.state.get("pending", [])}
        pending = set(calls)
        decisions = dict(record.state.get("decisions", {}))
        if data["call_id"] not in pending or data["call_id"] in decisions:
            raise ApprovalError("this approval is stale: the call was already decided")
        call = calls[data["call_id"]]
        digest = call_digest(call["name"], call.get("arguments") or "{}")
        if data.get("digest") is not None and data["digest"] != digest:
            raise ApprovalError("this approval was asked for another call: the tool or its arguments changed, "
                                "so the call needs a new approval")
        seen_at = record.updated_at
        waiting_since = int(record.state.get("waitingSince", seen_at))
        decided_at = now_ms()
        if agent.approval_expires_in is not None and decided_at - waiting_since > agent.approval_expires_in * 1000:
            raise ApprovalForbidden(f"this approval expired: agent {agent.name!r} waits "
                                    f"{agent.approval_expires_in:g} s for a decision")
        decisions[data["call_id"]] = {"approved": bool(approved), "reason": reason, "digest": digest,
                                      "decidedBy": who.id if who is not None else None,
                                      "decidedByName": who.name if who is not None else None, "decidedAt": decided_at}
        record.state = {**record.state, "decisions": decisions, "waitingSince": waiting_since}
        complete = pending <= set(decisions)
        if complete:
            record.status = "running"
            # the resume checks this mark under the thread's claim before running anything
            record.state["owner"] = rt.owner
            record.state["resumeBy"] = new_id("res_")
            record.epoch += 1  # the turn goes on under this process's claim
        record.updated_at = max(now_ms(), seen_at + 1)
        if await rt.store.replace_execution(record, expected_status="waiting", expected_updated_at=seen_at):
            break
    else:
        raise ApprovalError("the decision could not be recorded: the execution kept changing; try again")
    audit = ApprovalDecisionRecord(
        thread_id=thread.id, execution_id=record.id, call_id=data["call_id"], tool=call["name"], digest=digest,
        approved=bool(approved), decided_at=decided_at, reason=reason, decided_by=who.id if who else None,
        decided_by_name=who.name if who else None, tenant=who.tenant if who else None,
        roles=list(who.roles) if who else [])
    try:
        await record_approval_decision(rt.store, audit)
    except StoreError:
        # the decision itself is recorded on the execution (who, when, digest); only its audit row is missing
        log.exception("the audit row of decision %s could not be written", audit.id)
    rt.bus.emit("approval.decided", data["thread_id"], {"id": data["call_id"], "approved": bool(approved),
                                                          "executionId": record.id, "reason": reason,
                                                          "decidedBy": audit.decided_by})
    if not complete:
        return None
    return rt.inflight.track(rt.execute(thread, agent, None, record.side, resume=record), thread.id)


async def resume(rt: ApprovalsHost, thread: ThreadRecord, agent: AgentDefinition, record: ExecutionRecord,
                 options: TurnOptions | None = None) -> ExecutionResult:
    """Continue a paused execution (lock held): the same record, its counters restored, with
    the continuation's own ``options`` when given (client tools answered and offered again)."""
    from . import resume as resuming
    from .client_tools import ClientTools
    from .digest import CHANGED_KEY
    from .history import turn_history
    from .loop import Execution, ExecutionResult
    from .options import STATE_KEY as OPTIONS_KEY
    from .options import TurnOptions
    from .state import ExecutionState, ThreadState

    # Read the record again under the claim: only the decision that set this mark resumes,
    # and only while the record still says so (not after a recovery or another resume).
    fresh = await rt.store.get_execution(record.id)
    mark = record.state.get("resumeBy")
    if fresh is None or fresh.status != "running" or mark is None or fresh.state.get("resumeBy") != mark:
        rt.bus.emit("done", thread.id, {"stopReason": "cancelled", "executionId": record.id, "outcome": "stale",
                                        "error": "this execution was already resumed or settled elsewhere"})
        return ExecutionResult(thread.id, record.id, "cancelled", "stale",
                               error="this execution was already resumed or settled elsewhere")
    record = fresh
    # a turn that waited across a deploy: its agent's policy says whether it goes on
    changed = await resuming.definitions_moved(rt, agent, thread.package, record)
    if changed is not None:
        if changed["policy"] == "end":
            return await resuming.end_turn(rt, record, thread, resuming.changed_reason(changed), "definitions_changed",
                                           changed)
        record.state = {**record.state, CHANGED_KEY: changed}
    saved = {k: v for k, v in record.state.items() if k != "resumeBy"}
    ex = ExecutionState(id=record.id, side=record.side, step_count=record.step_count,
                        fence=Fence(record.id, record.epoch))
    ex.side_steps.update(saved.get("sideSteps", {}))
    ex.session_turns = int(saved.get("sessionTurns", 0))
    state = ThreadState(rt, thread, agent, thread.package, ex)
    execution = Execution(rt, state, agent, record)
    execution.owned_at = asyncio.get_running_loop().time()  # its claim (compare-and-set) proved it
    if "clientCalls" in saved:
        execution.resume = {"clientCalls": saved["clientCalls"], "results": saved.get("results", {})}
    else:
        execution.resume = {"pending": saved.get("pending", []), "decisions": saved.get("decisions", {}),
                            "clientCallsAfter": saved.get("clientCallsAfter")}
    execution.client_tools = ClientTools.from_state(saved.get("clientTools"))
    # the call's own output type and limits as the record kept them (what the continuation
    # sets itself overrides them), and what the turn spent before it paused
    kept = TurnOptions.from_state(saved.get(OPTIONS_KEY))
    merged = options.over(kept) if options is not None else kept
    if merged is not None:
        execution.take_options(merged)
    if isinstance(saved.get("usage"), dict):
        execution.usage = {k: v for k, v in saved["usage"].items() if isinstance(v, int)}
    if isinstance(saved.get("cost"), int | float):
        execution.cost = float(saved["cost"])
    if isinstance(saved.get("subagentUsage"), dict):
        execution.subagent_usage = {k: v for k, v in saved["subagentUsage"].items() if isinstance(v, int)}
    if isinstance(saved.get("subagentCost"), int | float):
        execution.subagent_cost = float(saved["subagentCost"])
    record.state = {k: v for k, v in saved.items()
                    if k not in ("pending", "decisions", "clientCalls", "clientCallsAfter", "results", "waitingFor")}
    task = asyncio.current_task()
    assert task is not None
    rt.inflight.begin(thread.id, task, execution)
    try:
        ex.message_history = await turn_history(execution, resumed=True)
        rt.bus.emit("execution_started", thread.id, {"executionId": record.id, "side": record.side, "resumed": True})
        return await observe.run_execution(execution)
    finally:
        rt.inflight.end(thread.id)
