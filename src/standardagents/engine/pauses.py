"""Pauses of an execution and their resumption: a call that needs approval, or a call of a
tool the client runs itself, stores the execution as waiting (durably, with what it waits
for) and ends this run of the loop; a decision or the client's results continue it.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Literal

from .. import observability as observe
from ..records import Message, ToolCall, ToolResult, now_ms
from .approval_tokens import approval_request, make_token, signing_secret
from .client_tools import WAITING_FOR, index_calls
from .tools import ToolOutcome, run_tool_call
from .turn_checks import check_stops

if TYPE_CHECKING:
    from .execution_core import ExecutionCore
    from .side import SideSetup

__all__ = ["Paused", "pause_for_approval", "pause_for_client", "resume_approvals"]


async def pause_for_approval(x: ExecutionCore, side: Literal["a", "b"], reply: Message, calls: list[ToolCall]) -> None:
    secret = await signing_secret(x.rt.store)
    requests = []
    for call in calls:
        try:
            arguments: Any = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = call.arguments
        token = make_token(secret, thread_id=x.thread_id, execution_id=x.record.id, call_id=call.id)
        requests.append(approval_request(call.id, call.name, arguments, token, x.record.id))
    record = x.record
    record.status = "waiting"
    record.step_count = x.ex.step_count
    record.updated_at = now_ms()
    record.state = {**x._durable_state(), "pending": [{"id": c.id, "name": c.name, "arguments": c.arguments,
                                                          "messageId": reply.id} for c in calls],
                    "decisions": {}, **observe.carried_context()}
    if x._client_after:
        record.state["clientCallsAfter"] = x._client_after
    await x.rt.store.save_execution(record)
    for req in requests:
        x.bus.emit("approval.request", x.thread_id, req)
    x._final_saved = True
    raise Paused(requests)


async def pause_for_client(x: ExecutionCore, reply: Message, calls: list[ToolCall]) -> None:
    """Store the execution as waiting for the client's results of ``calls`` (durably, like
    an approval wait), then end this run of the loop."""
    x.ex.used_tools.extend(c.name for c in calls)
    pending = [{"id": c.id, "name": c.name, "arguments": c.arguments or "{}"} for c in calls]
    record = x.record
    record.status = "waiting"
    record.step_count = x.ex.step_count
    record.updated_at = now_ms()
    record.state = {**x._durable_state(), "waitingFor": WAITING_FOR,
                    "clientCalls": [{**p, "messageId": reply.id} for p in pending], **observe.carried_context()}
    await x.rt.store.save_execution(record)
    await index_calls(x.rt, record, [c.id for c in calls])
    x._final_saved = True
    raise Paused(pending, "client_tool_calls")


def _approval(approved: bool, decision: dict[str, Any]) -> dict[str, Any]:
    """What a decided call's stored result keeps of its decision: who decided, when and why,
    so a thread read again later (the web app after a reload) shows it as it was shown live."""
    return {"approved": approved, "reason": decision.get("reason"), "decidedBy": decision.get("decidedBy"),
            "decidedByName": decision.get("decidedByName"), "decidedAt": decision.get("decidedAt")}


async def resume_approvals(x: ExecutionCore) -> None:
    """Run the approved calls, store denials as results, then the turn goes on."""
    resume = x.resume or {}
    setup = await x.rt.setups.side_setup(x.agent, x.ex.side, x.state.namespace)
    if "clientCalls" in resume:
        await _store_client_results(x, resume, setup)
        return
    decisions: dict[str, Any] = resume.get("decisions", {})
    outcomes: list[ToolOutcome] = []
    approved = []
    for item in resume.get("pending", []):
        call = ToolCall(item["id"], item["name"], item.get("arguments") or "{}")
        decision = decisions.get(call.id, {})
        if decision.get("approved"):
            approved.append(call)
        else:
            reason = decision.get("reason")
            text = "The user denied this call." + (f" Reason: {reason}" if reason else "")
            outcomes.append(ToolOutcome(call, ToolResult("error", error=text), None,
                                        approval=_approval(False, decision)))
    side = x.ex.side
    if outcomes:
        await x.rt.store_tool_outcomes(x.state, outcomes, side if x.dual else None, setup.hooks)
    ran: list[ToolOutcome] = []
    if approved:
        ran = list(await asyncio.gather(*(run_tool_call(x.state, c, setup.toolbox, setup.hooks,
                                                        default_timeout=x.rt.tool_timeout) for c in approved)))
        for out in ran:
            out.approval = _approval(True, decisions.get(out.call.id, {}))
        await x.rt.store_tool_outcomes(x.state, ran, side if x.dual else None, setup.hooks)
    cfg = x.agent.side(side)
    if cfg is not None and check_stops(x, side, cfg, setup, ran):
        x.ex.stopped = True
        return
    after = resume.get("clientCallsAfter")
    if after and x.client_tools is not None:
        # the same reply called client tools too: now they go to the client
        calls = [ToolCall(c["id"], c["name"], c.get("arguments") or "{}") for c in after]
        await pause_for_client(x, Message(thread_id=x.thread_id, role="assistant", id=after[0]["messageId"],
                                             tool_calls=calls), calls)
    x._keep_side_steps = True


async def _store_client_results(x: ExecutionCore, resume: dict[str, Any], setup: SideSetup) -> None:
    """The client's results of the paused calls become their tool results; the turn goes on."""
    results: dict[str, Any] = resume.get("results", {})
    outcomes = []
    for item in resume["clientCalls"]:
        call = ToolCall(item["id"], item["name"], item.get("arguments") or "{}")
        text = results.get(call.id)
        outcomes.append(ToolOutcome(call, ToolResult("success", result=text if isinstance(text, str) else ""), None))
    await x.rt.store_tool_outcomes(x.state, outcomes, x.ex.side if x.dual else None, setup.hooks)
    x._keep_side_steps = True


class Paused(Exception):
    """Internal: the turn waits for approvals or for client tool results (``outcome``);
    ``requests`` describe the pending calls."""

    def __init__(self, requests: list[dict[str, Any]], outcome: str = "approval_required") -> None:
        super().__init__("waiting for approval" if outcome == "approval_required" else "waiting for tool results")
        self.requests = requests
        self.outcome = outcome
