"""What ends or vets a side's turn apart from the model's own reply: input and output
guardrail trips, session tools and the stop tool, and the retry budget for unusable tool
arguments.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from ..definitions import SideConfig
from ..exceptions import StandardAgentsError
from ..records import Message
from .guardrails import GuardrailTripped, run_guardrails
from .tools import ToolOutcome

if TYPE_CHECKING:
    from .execution_core import ExecutionCore
    from .side import SideSetup

__all__ = ["charge_budget", "check_stops", "input_guardrails", "output_tripped"]


async def input_guardrails(x: ExecutionCore) -> None:
    message = x.user_message
    if message is None or not message.content:
        return
    setup = await x.rt.setups.side_setup(x.agent, x.ex.side, x.state.namespace)
    if not setup.input_guardrails:
        return
    trip = await run_guardrails(x.state, setup.input_guardrails, message.content, "input")
    if trip is None:
        return
    await x.rt.store.update_message(message.id, {"hidden": True, "metadata": {**message.metadata, "guardrail": {
        "kind": "input", "guardrail": trip.guardrail, "info": trip.info}}})
    for i, m in enumerate(x.ex.message_history):
        if m.id == message.id:
            x.ex.message_history[i] = m.copy(hidden=True)
            x.ex.history_version += 1
    _tripped(x, trip)


def _tripped(x: ExecutionCore, trip: Any) -> None:
    ex = x.ex
    x.bus.emit("guardrail", x.thread_id, {"kind": trip.kind, "guardrail": trip.guardrail, "info": trip.info})
    ex.outcome = "guardrail"
    ex.stop_reason = "interrupted"
    ex.stopped = True
    x.payload = {"guardrail": trip.guardrail, "kind": trip.kind, "info": trip.info}


async def output_tripped(x: ExecutionCore, setup: SideSetup, reply: Message, trip: GuardrailTripped) -> Message:
    """Keep only the text clients already saw, marked; end the turn."""
    x._partial = None
    reply.content = trip.approved or None
    reply.tool_calls = None
    reply.status = "guardrail"
    reply.metadata["guardrail"] = {"kind": "output", "guardrail": trip.trip.guardrail, "info": trip.trip.info}
    x._step.cut_short(reply, x._used_model or setup.model, x.ex)
    stored = await x.rt.create_messages(x.state, [reply])
    _tripped(x, trip.trip)
    return stored[0]


def charge_budget(x: ExecutionCore, outcomes: list[ToolOutcome], setup: SideSetup) -> None:
    """Unreadable arguments cost the tool one retry; past the budget the turn ends."""
    budget = setup.prompt.max_tool_retries
    for out in outcomes:
        if not out.bad_arguments:
            continue
        used = x._retry_budget.get(out.call.name, 0) + 1
        x._retry_budget[out.call.name] = used
        if used > budget:
            raise StandardAgentsError(
                f"the model sent unusable arguments for tool {out.call.name!r} {used} times "
                f"(budget {budget}); last problem: {out.result.error}")


def check_stops(x: ExecutionCore, side: Literal["a", "b"], cfg: SideConfig, setup: SideSetup, outcomes: list[ToolOutcome]) -> bool:
    ex = x.ex
    for out in outcomes:
        name = out.call.name
        kind = setup.toolbox.session.get(name)
        if kind is not None and out.result.status == "success":
            binding = cfg.session_tool(kind)  # type: ignore[arg-type]
            payload = _session_payload(binding, out.args or {})
            if kind == "status":
                ex.status = payload.get("message")
                x.rt.on_session_status(x.state, payload)
                continue
            ex.stopped = True
            ex.stopped_by = side
            ex.outcome = "session_stop" if kind == "stop" else "session_fail"
            x.payload = payload
            return True
        if cfg.stop_tool and name == cfg.stop_tool and out.result.status == "success":
            x.value = _extract(out.result.result, cfg.stop_tool_response_property)
            ex.outcome = "stop_tool"
            ex.stopped_by = side
            return True
    return False


def _session_payload(binding: Any, args: dict[str, Any]) -> dict[str, Any]:
    """The message and attachments a session tool call carries, per its binding."""
    message = None
    attachments: list[str] = []
    if binding is not None and binding.message_property:
        value = args.get(binding.message_property)
        message = value if isinstance(value, str) or value is None else json.dumps(value)
    if binding is not None and binding.attachments_property:
        value = args.get(binding.attachments_property)
        if isinstance(value, str):
            attachments = [value]
        elif isinstance(value, list):
            attachments = [str(v) for v in value]
    return {"message": message, "attachments": attachments, "arguments": args}


def _extract(result: str | None, prop: str | None) -> Any:
    if result is None:
        return None
    try:
        data = json.loads(result)
    except ValueError:
        return result if not prop else None
    if prop and isinstance(data, dict):
        return data.get(prop)
    return data
