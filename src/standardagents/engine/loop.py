"""The turn loop: one execution of a thread, step by step, until a stop condition.

A step renders the context, calls the model (streaming), stores the reply, runs the tool
calls it asked for concurrently, stores their results in call order, and checks the stop
conditions. Each step's writes are committed before the next step starts, and every
execution ends with exactly one ``done`` event, whatever fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal

from typing_extensions import TypeVar

from .. import observability as observe
from ..costs import call_cost
from ..definitions import AgentDefinition, ModelDefinition, SideConfig, UsageLimits
from ..exceptions import ProviderError, StandardAgentsError
from ..providers.base import (
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
)
from ..records import ExecutionRecord, Message, ToolCall, ToolResult, new_id, now_ms
from ..toolcalls import (
    LOAD_TOOLS_NAME,
    FenceSplitter,
    is_grammar_error,
    prepare_tools,
    recover_tool_calls,
    strip_thinking,
)
from .approval_tokens import approval_request, make_token, signing_secret
from .client_tools import WAITING_FOR, ClientTools, index_calls, unique_client_ids
from .compaction import compact_if_needed, over_threshold
from .context import THINKING_BLOCKS_KEY, clip
from .done import publish_done
from .guardrails import GuardrailTripped, OutputGuard, run_guardrails
from .limits import LimitTripped, UsageMeter
from .ondemand import CARRIED_KEY, save_carried
from .options import STATE_KEY as OPTIONS_KEY
from .options import TurnOptions
from .output import (
    OUTPUT_TOOL_NAME,
    UNCHANGED,
    OutputRun,
    OutputSpec,
    PartialOutput,
    Verdict,
    to_jsonable,
)
from .state import ExecutionState, ThreadState
from .steps import StepProbe
from .tools import ToolOutcome, run_tool_call

if TYPE_CHECKING:
    from .overrides import SideOverride
    from .runtime import Runtime, SideSetup

__all__ = ["Execution", "ExecutionResult"]

log = logging.getLogger("standardagents.engine")

@contextlib.asynccontextmanager
async def _closing(stream: Any) -> AsyncIterator[Any]:
    """``stream``, closed on the way out when it can be (async generators can)."""
    try:
        yield stream
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


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


class _TurnEnd(Exception):
    """Internal: the current side's turn is over (not an error)."""


class Execution:
    """One run of the loop for one thread. Create through :meth:`Runtime.start`."""

    def __init__(self, runtime: Runtime, state: ThreadState, agent: AgentDefinition, record: ExecutionRecord) -> None:
        self.rt = runtime
        self.state = state
        self.agent = agent
        self.record = record
        self.ex: ExecutionState = state.execution  # type: ignore[assignment]
        self.dual = agent.type == "dual_ai"
        self.bus = runtime.bus
        self.thread_id = state.thread_id
        self.created: list[Message] = []
        self.last_text: str | None = None
        self.usage: dict[str, int] = {}
        self.subagent_usage: dict[str, int] = {}
        self.subagent_cost: float | None = None
        self.payload: dict[str, Any] | None = None
        self.value: Any = None
        self._partial: Message | None = None
        self._partial_text: list[str] = []
        self._retry_budget: dict[str, int] = {}
        self._llm_state: dict[str, tuple[int, int, list[dict[str, Any]]]] = {}
        self._final_saved = False
        self._carried: list[str] | None = None
        #: the message that started this execution (input guardrails vet it)
        self.user_message: Message | None = None
        #: pending approvals with their decisions, when this execution resumes a paused one
        self.resume: dict[str, Any] | None = None
        self._keep_side_steps = False
        #: a call's own output type and retry budget (they override the prompt's)
        self.output_override: OutputSpec | None = None
        self.output_retries: int | None = None
        #: why the turn failed when it ended without an exception (output_invalid)
        self.error: str | None = None
        self._output: OutputRun | None = None
        self._verdict: Verdict | None = None
        self._growing: PartialOutput | None = None
        #: a call's own usage limits (fields it sets override the agent's)
        self.usage_limits: UsageLimits | None = None
        #: a call's own sampling settings (ModelRequest fields; ``extra_body`` merged into the model's)
        self.sampling: dict[str, Any] = {}
        self._meter: UsageMeter | None = None
        #: the call's own options, kept with the record so a resumed turn has them again
        self.options: TurnOptions | None = None
        #: a model and/or system prompt in place of one side's, for this turn only
        self.override: SideOverride | None = None
        #: USD spent so far (None until a call with a known price)
        self.cost: float | None = None
        self._call_cost: float | None = None
        self._used_model: ModelDefinition | None = None
        self._step = StepProbe()
        #: tools the caller runs itself (their calls pause the turn for the results)
        self.client_tools: ClientTools | None = None
        #: the caller's tool_choice still applies (to the first model request it makes)
        self._client_choice_pending = True
        #: client calls of a reply whose other calls wait for approval (answered after them)
        self._client_after: list[dict[str, Any]] | None = None

    # entry ---------------------------------------------------------------------------------
    async def run(self) -> ExecutionResult:
        ex = self.ex
        stop_reason: StopReason = "complete"
        error: str | None = None
        paused: list[dict[str, Any]] | None = None
        try:
            if self.resume is not None:
                await self._resume_approvals()
            elif self.user_message is not None:
                await self._input_guardrails()
            if not ex.stopped:
                await self._loop()
            if ex.stop_reason == "interrupted":
                stop_reason = "interrupted"
            elif ex.stop_reason == "error":
                stop_reason = "error"
                error = self.error
        except _Paused as pause:
            stop_reason = "interrupted"
            ex.outcome = pause.outcome
            paused = pause.requests
        except asyncio.CancelledError:
            if self.rt._handing_over:
                raise  # handed over: left running in the store for another process to resume
            stop_reason = "cancelled"
            ex.outcome = "cancelled"
            await asyncio.shield(self._settle_cancel())
        except LimitTripped as trip:
            stop_reason, error = "interrupted", trip.message
            ex.outcome = "usage_limit"
            ex.stop_reason = "interrupted"
            self.payload = trip.payload()
            await self._limit_tripped(trip)
        except ProviderError as exc:
            stop_reason, error = "error", str(exc)
            ex.outcome = "model_error"
            self.payload = {"status": exc.status, "code": exc.code, "retryAfter": exc.retry_after}
            await self._record_error(error, "model_error")
        except StandardAgentsError as exc:
            stop_reason, error = "error", str(exc)
            ex.outcome = "error"
            await self._record_error(error, "error")
        except Exception as exc:  # a bug or a hook that broke the loop: still end cleanly
            log.exception("execution %s failed", self.record.id)
            stop_reason, error = "error", f"{type(exc).__name__}: {exc}"
            ex.outcome = "error"
            await self._record_error(error, "internal_error")
        ex.stopped = True
        if paused is not None and ex.outcome == "client_tool_calls":
            result = ExecutionResult(self.thread_id, self.record.id, "interrupted", "client_tool_calls", self.last_text,
                                     None, None, None, {"toolCalls": paused}, self.created, self.usage, self.cost,
                                     self.subagent_usage, self.subagent_cost)
            self.bus.emit("done", self.thread_id, {"stopReason": "interrupted", "executionId": self.record.id,
                                                   "outcome": "client_tool_calls", "error": None, "stoppedBy": None,
                                                   "toolCalls": paused, "text": self.last_text})
            return result
        if paused is not None:
            result = ExecutionResult(self.thread_id, self.record.id, "interrupted", "approval_required", self.last_text,
                                     None, None, None, {"approvals": paused}, self.created, self.usage, self.cost,
                                     self.subagent_usage, self.subagent_cost)
            self.bus.emit("done", self.thread_id, {"stopReason": "interrupted", "executionId": self.record.id,
                                                   "outcome": "approval_required", "error": None, "stoppedBy": None,
                                                   "approvals": [{k: v for k, v in p.items() if k not in ("token", "stateToken")} for p in paused]})
            return result
        if self._carried is not None:
            try:
                await asyncio.shield(save_carried(self.state, self._carried, ex.used_tools))
            except Exception:
                log.exception("could not save the carried tools of execution %s", self.record.id)
        if not (self._final_saved and stop_reason == "complete"):
            self._finish_record(stop_reason, error)
            try:
                await asyncio.shield(self.rt.store.save_execution(self.record))
            except Exception:
                log.exception("could not save the end of execution %s", self.record.id)
        result = ExecutionResult(self.thread_id, self.record.id, stop_reason, ex.outcome or stop_reason,
                                 self.last_text, error, ex.stopped_by, self.value, self.payload, self.created, self.usage,
                                 self.cost, self.subagent_usage, self.subagent_cost)
        done: dict[str, Any] = {"stopReason": stop_reason, "executionId": self.record.id,
                                "outcome": result.outcome, "error": error, "stoppedBy": ex.stopped_by}
        if self.value is not None:
            done["value"] = to_jsonable(self.value)
        if ex.outcome in ("output_invalid", "model_error", "guardrail"):
            done["payload"] = self.payload
        await publish_done(self.rt, self.record, done)
        return result

    def add_subagent(self, result: ExecutionResult[Any]) -> None:
        """Count what a subagent's turn (and its own subagents) spent, apart from this
        thread's model calls."""
        for spent in (result.usage, result.subagent_usage):
            for k, v in spent.items():
                self.subagent_usage[k] = self.subagent_usage.get(k, 0) + v
        for cost in (result.cost, result.subagent_cost):
            if cost is not None:
                self.subagent_cost = (self.subagent_cost or 0.0) + cost

    def _finish_record(self, stop_reason: str, error: str | None, outcome: str | None = None) -> ExecutionRecord:
        ex = self.ex
        record = self.record
        record.status = stop_reason
        record.stop_reason = stop_reason
        record.stopped_by = ex.stopped_by
        record.error = error
        record.step_count = ex.step_count
        record.updated_at = now_ms()
        record.state = self._durable_state()
        if outcome is not None:
            record.state["outcome"] = outcome
        return record

    def _durable_state(self) -> dict[str, Any]:
        ex = self.ex
        state = {"side": ex.side, "sideSteps": dict(ex.side_steps), "sessionTurns": ex.session_turns,
                 "outcome": ex.outcome, "status": ex.status, "value": to_jsonable(self.value), "payload": self.payload,
                 "usage": self.usage, "cost": self.cost}
        if self.subagent_usage:
            state["subagentUsage"] = self.subagent_usage
            state["subagentCost"] = self.subagent_cost
        if self.client_tools is not None:
            state["clientTools"] = self.client_tools.to_state()
        if self.options is not None and self.options.state:
            state[OPTIONS_KEY] = self.options.state
        if ex.hooks_run or ex.guardrails_run:
            # hooks and guardrails after the last step's record (its tool calls' hooks, say)
            state["checks"] = {"hooks": ex.hooks_run or [], "guardrails": ex.guardrails_run or []}
        return state

    async def _record_error(self, message: str, code: str) -> None:
        self.bus.emit("error", self.thread_id, {"message": message, "code": code})
        msg = Message(thread_id=self.thread_id, role="assistant", content=message, status="error", hidden=True,
                      side=self.ex.side, metadata={"error": code, "executionId": self.record.id})
        try:
            await asyncio.shield(self.rt.store.commit_step(messages=[msg]))
            self.bus.emit("message_created", self.thread_id, {"message": msg.to_dict()})
        except Exception:
            log.exception("could not store the error of execution %s", self.record.id)

    async def _limit_tripped(self, trip: LimitTripped) -> None:
        """Tell the person which limit stopped the turn; calls left unanswered get results."""
        self.bus.emit("usage_limit", self.thread_id, trip.payload())
        await self._record_error(trip.message, "usage_limit")
        try:
            await self.rt.repair_transcript(self.state, reason=trip.message)
        except Exception:
            log.exception("could not settle the calls of execution %s", self.record.id)

    async def _settle_cancel(self) -> None:
        """Keep the partial reply (marked) and give every unanswered call an error result."""
        messages: list[Message] = []
        partial = self._partial
        if partial is not None and self._partial_text:
            partial.content = "".join(self._partial_text)
        if partial is not None and (partial.content or partial.tool_calls):
            partial.status = "cancelled"
            messages.append(partial)
        try:
            stored = await self.rt.store.commit_step(messages=messages) if messages else []
            for m in stored:
                self.ex.message_history.append(m)
                self.bus.emit("message_created", self.thread_id, {"message": m.to_dict()})
            await self.rt.repair_transcript(self.state, reason="the turn was cancelled before this call finished")
        except Exception:
            log.exception("could not settle cancelled execution %s", self.record.id)

    # the loop ------------------------------------------------------------------------------
    async def _loop(self) -> None:
        ex = self.ex
        agent = self.agent
        max_turns = agent.max_session_turns
        limits = agent.usage_limits.merged(self.usage_limits) if agent.usage_limits else self.usage_limits
        if limits is not None and self._meter is None:
            # a turn that goes on (after an approval, a crash) counts what it spent before
            self._meter = UsageMeter(limits, ex.message_history, None if self.user_message is not None else self.record.id)
        while True:
            side_cfg = agent.side(ex.side)
            if side_cfg is None:
                raise StandardAgentsError(f"agent {agent.name!r} has no side {ex.side}")
            await self._run_turn(ex.side, side_cfg)
            if ex.stopped or ex.outcome in ("session_stop", "session_fail") or ex.stop_reason in ("interrupted", "error"):
                return
            if not self.dual:
                return
            ex.session_turns += 1
            if max_turns is not None and ex.session_turns >= max_turns:
                ex.outcome = "max_session_turns"
                return
            nxt = ex.forced_side or ("b" if ex.side == "a" else "a")
            ex.forced_side = None
            ex.side = nxt
            self.record.side = nxt

    async def _run_turn(self, side: Literal["a", "b"], cfg: SideConfig) -> None:
        ex = self.ex
        setup = await self.rt.side_setup(self.agent, side, self.state.namespace)
        if self.override is not None:
            setup = await self._overridden(side, setup)
        if setup.ondemand and self._carried is None:
            carried = await self.state.get_env(CARRIED_KEY, [])
            self._carried = [n for n in carried if n in setup.toolbox.tools] if isinstance(carried, list) else []
            ex.loaded_tools = list(self._carried)
        max_steps = cfg.max_steps or self.rt.default_max_steps
        spec = self.output_override or setup.output
        self._output = None if spec is None else OutputRun(
            spec, self.output_retries if self.output_retries is not None else setup.prompt.output_retries)
        if self._keep_side_steps:
            self._keep_side_steps = False
        else:
            ex.side_steps[side] = 0
        while True:
            if ex.side_steps[side] >= max_steps:
                ex.outcome = "max_steps"
                ex.stop_reason = "interrupted"
                ex.stopped_by = side
                return
            ex.step_count += 1
            ex.side_steps[side] += 1
            observe.step()
            if setup.mcp_generation is not None:
                fresh = await self.rt.current_setup(setup)
                setup = setup if fresh is setup else await self._overridden(side, fresh)
            if ex.queued_tools:
                await self._run_queued(side, setup)
            ends_turn = cfg.stop_on_response and not self.dual
            reply = await self._model_step(side, setup, ends_turn)
            verdict, self._verdict = self._verdict, None
            if verdict is not None:
                if await self._after_output(side, cfg, setup, reply, verdict):
                    return
                continue
            if not reply.tool_calls:
                # a side with stop_on_response=False keeps the floor after a text reply, in
                # dual_ai too: only its stop tool, a session tool or max_steps ends the turn
                if cfg.stop_on_response:
                    ex.outcome = ex.outcome or "response"
                    return
                continue
            if self._meter is not None:
                self._meter.before_tools(len(reply.tool_calls))
            outcomes = await self._run_tools(side, reply, setup)
            self._charge_budget(outcomes, setup)
            if self._check_stops(side, cfg, setup, outcomes) or ex.stopped:
                return

    async def _after_output(self, side: Literal["a", "b"], cfg: SideConfig, setup: SideSetup, reply: Message,
                            verdict: Verdict) -> bool:
        """Act on the typed-output verdict of a reply; True when the turn is over."""
        ex = self.ex
        others = [c for c in reply.tool_calls or [] if c.name != OUTPUT_TOOL_NAME]
        if others:
            if self._meter is not None:
                self._meter.before_tools(len(others))
            outcomes = await self._run_tools(side, Message(thread_id=self.thread_id, role="assistant", tool_calls=others), setup)
            self._charge_budget(outcomes, setup)
            if self._check_stops(side, cfg, setup, outcomes) or ex.stopped:
                return True
        if verdict.kind == "value":
            ex.outcome = ex.outcome or "response"
            return True
        if verdict.kind == "retry":
            return False
        attempts = self._output.failures if self._output is not None else 0
        self.error = (f"the final answer did not match the output type after {attempts} attempts: "
                      + "; ".join(verdict.errors))
        self.payload = {"errors": verdict.errors}
        ex.outcome = "output_invalid"
        ex.stop_reason = "error"
        ex.stopped_by = side
        await self._record_error(self.error, "output_invalid")
        return True

    # guardrails -----------------------------------------------------------------------------
    async def _overridden(self, side: Literal["a", "b"], setup: SideSetup) -> SideSetup:
        """``setup`` as this turn's override changes it (when it is for ``side``)."""
        override = self.override
        if override is None or override.side != side:
            return setup
        return await override.setup(self.rt.registry, setup)

    async def _input_guardrails(self) -> None:
        message = self.user_message
        if message is None or not message.content:
            return
        setup = await self.rt.side_setup(self.agent, self.ex.side, self.state.namespace)
        if not setup.input_guardrails:
            return
        trip = await run_guardrails(self.state, setup.input_guardrails, message.content, "input")
        if trip is None:
            return
        await self.rt.store.update_message(message.id, {"hidden": True, "metadata": {**message.metadata, "guardrail": {
            "kind": "input", "guardrail": trip.guardrail, "info": trip.info}}})
        for i, m in enumerate(self.ex.message_history):
            if m.id == message.id:
                self.ex.message_history[i] = m.copy(hidden=True)
                self.ex.history_version += 1
        self._tripped(trip)

    def _tripped(self, trip: Any) -> None:
        ex = self.ex
        self.bus.emit("guardrail", self.thread_id, {"kind": trip.kind, "guardrail": trip.guardrail, "info": trip.info})
        ex.outcome = "guardrail"
        ex.stop_reason = "interrupted"
        ex.stopped = True
        self.payload = {"guardrail": trip.guardrail, "kind": trip.kind, "info": trip.info}

    async def _output_tripped(self, setup: SideSetup, reply: Message, trip: GuardrailTripped) -> Message:
        """Keep only the text clients already saw, marked; end the turn."""
        self._partial = None
        reply.content = trip.approved or None
        reply.tool_calls = None
        reply.status = "guardrail"
        reply.metadata["guardrail"] = {"kind": "output", "guardrail": trip.trip.guardrail, "info": trip.trip.info}
        self._step.cut_short(reply, self._used_model or setup.model, self.ex)
        stored = await self.rt.create_messages(self.state, [reply])
        self._tripped(trip.trip)
        return stored[0]

    # approvals ------------------------------------------------------------------------------
    async def _pause_for_approval(self, side: Literal["a", "b"], reply: Message, calls: list[ToolCall]) -> None:
        secret = await signing_secret(self.rt.store)
        requests = []
        for call in calls:
            try:
                arguments: Any = json.loads(call.arguments or "{}")
            except ValueError:
                arguments = call.arguments
            token = make_token(secret, thread_id=self.thread_id, execution_id=self.record.id, call_id=call.id)
            requests.append(approval_request(call.id, call.name, arguments, token, self.record.id))
        record = self.record
        record.status = "waiting"
        record.step_count = self.ex.step_count
        record.updated_at = now_ms()
        record.state = {**self._durable_state(), "pending": [{"id": c.id, "name": c.name, "arguments": c.arguments,
                                                              "messageId": reply.id} for c in calls],
                        "decisions": {}, **observe.carried_context()}
        if self._client_after:
            record.state["clientCallsAfter"] = self._client_after
        await self.rt.store.save_execution(record)
        for req in requests:
            self.bus.emit("approval.request", self.thread_id, req)
        self._final_saved = True
        raise _Paused(requests)

    async def _pause_for_client(self, reply: Message, calls: list[ToolCall]) -> None:
        """Store the execution as waiting for the client's results of ``calls`` (durably, like
        an approval wait), then end this run of the loop."""
        self.ex.used_tools.extend(c.name for c in calls)
        pending = [{"id": c.id, "name": c.name, "arguments": c.arguments or "{}"} for c in calls]
        record = self.record
        record.status = "waiting"
        record.step_count = self.ex.step_count
        record.updated_at = now_ms()
        record.state = {**self._durable_state(), "waitingFor": WAITING_FOR,
                        "clientCalls": [{**p, "messageId": reply.id} for p in pending], **observe.carried_context()}
        await self.rt.store.save_execution(record)
        await index_calls(self.rt, record, [c.id for c in calls])
        self._final_saved = True
        raise _Paused(pending, "client_tool_calls")

    async def _resume_approvals(self) -> None:
        """Run the approved calls, store denials as results, then the turn goes on."""
        resume = self.resume or {}
        setup = await self.rt.side_setup(self.agent, self.ex.side, self.state.namespace)
        if "clientCalls" in resume:
            await self._store_client_results(resume, setup)
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
                                            approval={"approved": False, "reason": reason}))
        side = self.ex.side
        if outcomes:
            await self.rt.store_tool_outcomes(self.state, outcomes, side if self.dual else None, setup.hooks)
        ran: list[ToolOutcome] = []
        if approved:
            ran = list(await asyncio.gather(*(run_tool_call(self.state, c, setup.toolbox, setup.hooks,
                                                            default_timeout=self.rt.tool_timeout) for c in approved)))
            for out in ran:
                out.approval = {"approved": True, "reason": decisions.get(out.call.id, {}).get("reason")}
            await self.rt.store_tool_outcomes(self.state, ran, side if self.dual else None, setup.hooks)
        cfg = self.agent.side(side)
        if cfg is not None and self._check_stops(side, cfg, setup, ran):
            self.ex.stopped = True
            return
        after = resume.get("clientCallsAfter")
        if after and self.client_tools is not None:
            # the same reply called client tools too: now they go to the client
            calls = [ToolCall(c["id"], c["name"], c.get("arguments") or "{}") for c in after]
            await self._pause_for_client(Message(thread_id=self.thread_id, role="assistant", id=after[0]["messageId"],
                                                 tool_calls=calls), calls)
        self._keep_side_steps = True

    async def _store_client_results(self, resume: dict[str, Any], setup: SideSetup) -> None:
        """The client's results of the paused calls become their tool results; the turn goes on."""
        results: dict[str, Any] = resume.get("results", {})
        outcomes = []
        for item in resume["clientCalls"]:
            call = ToolCall(item["id"], item["name"], item.get("arguments") or "{}")
            text = results.get(call.id)
            outcomes.append(ToolOutcome(call, ToolResult("success", result=text if isinstance(text, str) else ""), None))
        await self.rt.store_tool_outcomes(self.state, outcomes, self.ex.side if self.dual else None, setup.hooks)
        self._keep_side_steps = True

    def _charge_budget(self, outcomes: list[ToolOutcome], setup: SideSetup) -> None:
        """Unreadable arguments cost the tool one retry; past the budget the turn ends."""
        budget = setup.prompt.max_tool_retries
        for out in outcomes:
            if not out.bad_arguments:
                continue
            used = self._retry_budget.get(out.call.name, 0) + 1
            self._retry_budget[out.call.name] = used
            if used > budget:
                raise StandardAgentsError(
                    f"the model sent unusable arguments for tool {out.call.name!r} {used} times "
                    f"(budget {budget}); last problem: {out.result.error}")

    def _check_stops(self, side: Literal["a", "b"], cfg: SideConfig, setup: SideSetup, outcomes: list[ToolOutcome]) -> bool:
        ex = self.ex
        for out in outcomes:
            name = out.call.name
            kind = setup.toolbox.session.get(name)
            if kind is not None and out.result.status == "success":
                binding = cfg.session_tool(kind)  # type: ignore[arg-type]
                payload = _session_payload(binding, out.args or {})
                if kind == "status":
                    ex.status = payload.get("message")
                    self.rt.on_session_status(self.state, payload)
                    continue
                ex.stopped = True
                ex.stopped_by = side
                ex.outcome = "session_stop" if kind == "stop" else "session_fail"
                self.payload = payload
                return True
            if cfg.stop_tool and name == cfg.stop_tool and out.result.status == "success":
                self.value = _extract(out.result.result, cfg.stop_tool_response_property)
                ex.outcome = "stop_tool"
                ex.stopped_by = side
                return True
        return False

    # one model step ------------------------------------------------------------------------
    async def _model_step(self, side: Literal["a", "b"], setup: SideSetup, ends_turn: bool = False) -> Message:
        ex = self.ex
        request = await self._assemble(side, setup)
        if self._meter is not None:
            self._meter.before_request(request)
        msg_id = new_id("msg_")
        reply = Message(thread_id=self.thread_id, role="assistant", content=None, id=msg_id, side=side if self.dual else None,
                        metadata={"executionId": self.record.id, "step": ex.step_count})
        self._partial = reply
        self._partial_text = []
        self._step = step = StepProbe()
        history = self.ex.message_history
        try:
            response = await self._call_model(request, setup, reply)
        except GuardrailTripped as trip:
            return await self._output_tripped(setup, reply, trip)
        self._partial = None
        text = response.text or None
        if text and ("<" in text):
            visible, thought = strip_thinking(text)
            if thought:
                response.reasoning = "\n".join(p for p in (response.reasoning, thought) if p)
                text = visible or None
        out = self._output
        if text and not response.tool_calls and setup.toolbox.tools and (out is None or not out.matches(text)):
            recovered, remaining = recover_tool_calls(text, setup.toolbox.tools.keys())
            if recovered:
                response.tool_calls = [ToolCall(new_id("call_"), c.name, json.dumps(c.arguments)) for c in recovered]
                text = remaining.strip() or None
                reply.metadata["recoveredCalls"] = len(recovered)
                await self._started_from_response(response, setup)
        reply.content = text
        reply.reasoning = response.reasoning
        if response.thinking_blocks:
            reply.metadata[THINKING_BLOCKS_KEY] = response.thinking_blocks
        reply.tool_calls = list(response.tool_calls) or None
        if self.client_tools is not None and reply.tool_calls:
            reply.tool_calls = unique_client_ids(reply.tool_calls, self.client_tools.names)
        reply.usage = response.usage
        if response.finish_reason == "length":
            reply.status = "truncated"
        if response.model:
            reply.metadata["model"] = response.model
        step.finish(reply, response, request, history, self._used_model or setup.model, ex)
        cost = reply.cost = self._call_cost
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
        if self._meter is not None:
            self._meter.record(response.usage, cost)
        if response.usage is not None:
            u = response.usage.to_dict()
            for k, v in u.items():
                self.usage[k] = self.usage.get(k, 0) + v
            if self.bus.has_subscribers(self.thread_id):
                self.bus.emit("usage", self.thread_id, {"messageId": msg_id, "usage": u, "step": ex.step_count,
                                                        "cost": cost, "executionCost": self.cost})
        if setup.output_guardrails and text and not setup.model.stream:
            found = await run_guardrails(self.state, setup.output_guardrails, text, "output")
            if found is not None:
                return await self._output_tripped(setup, reply, GuardrailTripped(found, ""))
        extra: list[Message] = []
        verdict = out.judge(reply) if out is not None else None
        if verdict is not None:
            assert out is not None
            self._verdict = verdict
            if verdict.kind == "value":
                self.value = verdict.value
                reply.metadata["value"] = verdict.json_value
                ends_turn = not self.dual
                if self.bus.has_subscribers(self.thread_id):
                    self.bus.emit("output", self.thread_id, {"messageId": msg_id, "value": verdict.json_value,
                                                             "side": reply.side})
            extra = [m for m in (out.tool_message(self.thread_id, verdict, reply.side),
                                 out.retry_message(self.thread_id, verdict, reply.side)) if m is not None]
        final = None
        if ends_turn and not any(c.name != OUTPUT_TOOL_NAME for c in reply.tool_calls or ()) \
                and (verdict is None or verdict.kind == "value"):
            # The turn ends with this reply: record the execution's end in the same commit.
            final = self._finish_record("complete", None, outcome="response")
        stored = await self.rt.create_messages(self.state, [reply, *extra], execution=final)
        if final is not None:
            self._final_saved = True
        reply = stored[0]
        if text:
            self.last_text = text
        return reply

    async def _assemble(self, side: Literal["a", "b"], setup: SideSetup) -> ModelRequest:
        hooks = setup.hooks
        state = self.state
        system = setup.static_system
        if system is None:
            system = await self.rt.render_system(setup, state)
        if hooks.has("after_system_message"):
            replaced = await hooks.transform("after_system_message", state, system)
            system = replaced if isinstance(replaced, str) else system
        history = self.ex.message_history
        if hooks.has("filter_messages"):
            snapshot = [m for m in history if not m.hidden]
            filtered = await hooks.transform("filter_messages", state, snapshot)
            msgs = [m if isinstance(m, Message) else Message.from_dict(m) for m in filtered]
            llm = self.rt.llm_cache.convert(msgs, side, self.dual)
        else:
            llm = self._converted(history, side)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        messages.extend(llm)
        if setup.prompt.compaction_threshold and over_threshold(setup, messages) and await compact_if_needed(self, setup, system):
            messages = [{"role": "system", "content": system}] if system else []
            messages.extend(self._converted(self.ex.message_history, side))
        if self.dual and (not llm or llm[-1]["role"] == "assistant"):
            messages.append({"role": "user", "content": "(continue)"})
        if hooks.has("prefilter_llm_history"):
            messages = await hooks.transform("prefilter_llm_history", state, copy.deepcopy(messages))
        model = setup.model
        tools = setup.toolbox.offered
        meta: dict[str, Any] = {"threadId": self.thread_id, "agent": self.agent.name}
        if setup.ondemand:
            names = [LOAD_TOOLS_NAME, *self.ex.loaded_tools]
            tools = setup.tools_at(None, names)
            meta["toolNames"] = names
        client = self.client_tools
        tool_choice: str | dict[str, Any] | None = setup.prompt.tool_choice if setup.toolbox.offered else None
        parallel = setup.prompt.parallel_tool_calls
        if client is not None:
            tools = [*tools, *client.schemas]
            if client.tool_choice is not None and self._client_choice_pending:
                tool_choice = client.tool_choice
            if client.parallel_tool_calls is not None:
                parallel = client.parallel_tool_calls
            self._client_choice_pending = False
        request = ModelRequest(model=model.model, messages=messages, tools=tools,
                               tool_choice=tool_choice,
                               parallel_tool_calls=None if parallel else False,
                               max_tokens=setup.prompt.max_tokens or model.max_tokens,
                               temperature=setup.prompt.temperature if setup.prompt.temperature is not None else model.temperature,
                               top_p=model.top_p, extra_body=model.extra_body, timeout=model.timeout,
                               metadata=meta)
        if self.sampling:
            extra = self.sampling.get("extra_body")
            request = dataclasses.replace(request, **{k: v for k, v in self.sampling.items() if k != "extra_body"})
            if extra:
                request.extra_body = {**request.extra_body, **extra}
        return request

    def _converted(self, history: list[Message], side: str) -> list[dict[str, Any]]:
        """Model messages for the live history, converting only what was appended since
        the last step (the history is append-only unless ``history_version`` moved)."""
        cached = self._llm_state.get(side)
        version = self.ex.history_version
        if cached is None or cached[0] != version or cached[1] > len(history):
            llm = self.rt.llm_cache.convert(history, side, self.dual)
            self._llm_state[side] = (version, len(history), llm)
            return llm
        llm = cached[2]
        if cached[1] < len(history):
            llm.extend(self.rt.llm_cache.convert(history[cached[1]:], side, self.dual))
            self._llm_state[side] = (version, len(history), llm)
        return llm

    async def _call_model(self, request: ModelRequest, setup: SideSetup, reply: Message) -> ModelResponse:
        """Call the side's model, then each fallback on a retriable error."""
        chain = [setup.model, *setup.fallbacks]
        last: ProviderError | None = None
        for i, model in enumerate(chain):
            if i:
                request.model = model.model
            provider = self.rt.provider_for(model)
            self._used_model = model
            try:
                with observe.model_call(model, request, (chain[i - 1].name, last) if i else None) as call:
                    self._step.traced(call)
                    response = await self._call_one(provider, model, request, setup, reply)
                    # priced once here: the call's span carries it and the step reuses it
                    self._call_cost = call_cost(model, response.usage, response.model)
                    call.response(response, self._call_cost)
                    return response
            except ProviderError as exc:
                last = exc
                if not exc.retriable or not exc.before_first_token or i == len(chain) - 1:
                    raise
                self._step.failed(model, exc)
                log.warning("model %s failed (%s); trying fallback %s", model.name, exc, chain[i + 1].name)
        assert last is not None
        raise last

    async def _call_one(self, provider: Any, model: Any, request: ModelRequest, setup: SideSetup, reply: Message) -> ModelResponse:
        """One model, with tool schemas adapted to what this endpoint accepts.

        A refusal of the tools' schema latches a looser level for (endpoint, model) and the
        request is sent again; later requests go out at the latched level at once."""
        latches = self.rt.capabilities
        endpoint = model.base_url or model.provider
        offered = request.tools
        out = self._output
        while True:
            level = latches.level_for(endpoint, model.model) if offered else None
            request.tools = setup.tools_at(level, request.metadata.get("toolNames")) if offered else offered
            if offered and self.client_tools is not None and self.client_tools.schemas and level != "no_tools":
                theirs = self.client_tools.schemas
                request.tools = [*request.tools, *(theirs if level is None else prepare_tools(theirs, level))]
            if level == "no_tools":
                request.tool_choice = None
            if out is not None:
                out.shape(request, model, latches, level)
            try:
                if model.stream:
                    return await self._stream(provider, request, setup, reply)
                response = await provider.request(request)
                await self._started_from_response(response, setup)
                return response
            except ProviderError as exc:
                if out is not None and exc.before_first_token and out.refused(exc, model, latches):
                    self._step.failed(model, exc)
                    log.warning("%s refused %s output for %s (%s); asking for it as %s", endpoint, out.mode, model.model,
                                exc, latches.output_mode_for(endpoint, model.model))
                    continue
                if not offered or not exc.before_first_token or not is_grammar_error(exc):
                    raise
                if latches.escalate(endpoint, model.model) is None:
                    raise
                self._step.failed(model, exc)
                log.warning("%s refused the tool schemas of %s (%s); retrying with %s tools", endpoint, model.model,
                            exc, latches.level_for(endpoint, model.model))

    async def _started_from_response(self, response: ModelResponse, setup: SideSetup,
                                     skip: set[int] | frozenset[int] = frozenset()) -> None:
        """``tool_call_started`` for calls known only once the reply is complete."""
        for i, call in enumerate(response.tool_calls):
            if i in skip:
                continue
            tool = setup.toolbox.tools.get(call.name)
            progress = None
            if tool is not None and tool.progress_argument:
                try:
                    progress = json.loads(call.arguments or "{}").get(tool.progress_argument)
                except (ValueError, AttributeError):
                    progress = None
            await self._tool_started(call, setup, None if progress is None else str(progress))

    async def _tool_started(self, call: ToolCall, setup: SideSetup, progress: str | None) -> None:
        self.bus.emit("tool_call_started", self.thread_id, {"id": call.id, "name": call.name, "progress": progress,
                                                            "arguments": clip(call.arguments, self.rt.event_detail_limit)})
        if setup.hooks.has("tool_call_started"):
            await setup.hooks.notify("tool_call_started", self.state, call, progress)

    async def _stream(self, provider: Any, request: ModelRequest, setup: SideSetup, reply: Message) -> ModelResponse:
        bus = self.bus
        tid = self.thread_id
        side = reply.side
        text_parts: list[str] = []
        self._partial_text = text_parts
        calls: dict[int, dict[str, Any]] = {}
        listening = bus.has_subscribers(tid)
        out = self._output
        growing = self._growing = PartialOutput(out.spec) if out is not None and listening else None
        text_growing = growing if out is not None and out.mode != "tool" else None
        splitter = FenceSplitter()
        guard = None
        if setup.output_guardrails:
            def release(piece: str) -> None:
                if bus.has_subscribers(tid):
                    bus.emit("message_chunk", tid, {"messageId": reply.id, "delta": piece, "side": side})

            guard = OutputGuard(self.state, setup.output_guardrails, release, setup.prompt.guardrail_chunk_size)
        # Closed as soon as this loop stops reading (a tripped guardrail, a stop, an error):
        # the connection is dropped at once, so the model stops generating (and billing).
        step = self._step
        async with _closing(provider.stream(request)) as deltas:
            async for delta in deltas:
                if step.ttft is None:
                    step.first_token()
                if type(delta) is TextDelta:
                    for kind, piece in splitter.feed(delta.text):
                        if kind == "text":
                            text_parts.append(piece)
                            if guard is not None:
                                await guard.feed(piece)
                            elif listening:
                                bus.emit("message_chunk", tid, {"messageId": reply.id, "delta": piece, "side": side})
                            if text_growing is not None and (grown := text_growing.feed(piece)) is not UNCHANGED:
                                bus.emit("output_delta", tid, {"messageId": reply.id, "value": grown, "side": side})
                        elif listening:
                            bus.emit("reasoning_chunk", tid, {"messageId": reply.id, "delta": piece, "side": side})
                elif type(delta) is ToolCallDelta:
                    await self._on_call_delta(delta, calls, setup)
                elif type(delta) is ReasoningDelta:
                    if listening:
                        bus.emit("reasoning_chunk", tid, {"messageId": reply.id, "delta": delta.text, "side": side})
                elif type(delta) is StreamEnd:
                    for kind, piece in splitter.flush():
                        if kind == "text":
                            text_parts.append(piece)
                            if guard is not None:
                                await guard.feed(piece)
                            elif listening:
                                bus.emit("message_chunk", tid, {"messageId": reply.id, "delta": piece, "side": side})
                        elif listening:
                            bus.emit("reasoning_chunk", tid, {"messageId": reply.id, "delta": piece, "side": side})
                    if guard is not None:
                        await guard.check()
                    response = delta.response
                    await self._started_from_response(response, setup, {i for i, slot in calls.items() if slot["started"]})
                    return response
        raise ProviderError("the model's stream ended without a final response", retriable=True, before_first_token=not text_parts)

    async def _on_call_delta(self, delta: ToolCallDelta, calls: dict[int, dict[str, Any]], setup: SideSetup) -> None:
        slot = calls.get(delta.index)
        if slot is None:
            slot = calls[delta.index] = {"id": delta.id or "", "name": delta.name or "", "args": [], "started": False}
        else:
            if delta.id:
                slot["id"] = delta.id
            if delta.name:
                slot["name"] = slot["name"] or delta.name
        if delta.arguments:
            slot["args"].append(delta.arguments)
            growing = self._growing
            if growing is not None and slot["name"] == OUTPUT_TOOL_NAME \
                    and (grown := growing.feed(delta.arguments)) is not UNCHANGED:
                self.bus.emit("output_delta", self.thread_id, {"messageId": self._partial.id if self._partial else None,
                                                               "value": grown, "side": self._partial.side if self._partial else None})
        if slot["started"] or not slot["name"]:
            return
        tool = setup.toolbox.tools.get(slot["name"])
        prog_arg = tool.progress_argument if tool is not None else None
        if prog_arg is None:
            slot["started"] = True
            await self._tool_started(ToolCall(slot["id"], slot["name"], "".join(slot["args"])), setup, None)
            return
        value = _completed_string_arg("".join(slot["args"]), prog_arg)
        if value is not None:
            slot["started"] = True
            await self._tool_started(ToolCall(slot["id"], slot["name"], "".join(slot["args"])), setup, value)

    # tools ---------------------------------------------------------------------------------
    async def _run_tools(self, side: Literal["a", "b"], reply: Message, setup: SideSetup) -> list[ToolOutcome]:
        calls = reply.tool_calls or []
        client = self.client_tools
        if client is not None and (theirs := [c for c in calls if c.name in client.names]):
            # the agent's own calls of the same reply run here first; the client runs its own
            ours = [c for c in calls if c not in theirs]
            if ours:
                # an approval wait among them keeps the client's calls for after the decisions
                self._client_after = [{"id": c.id, "name": c.name, "arguments": c.arguments or "{}",
                                       "messageId": reply.id} for c in theirs]
                await self._run_tools(side, Message(thread_id=self.thread_id, role="assistant", tool_calls=ours), setup)
                self._client_after = None
            await self._pause_for_client(reply, theirs)
        self.ex.used_tools.extend(c.name for c in calls)
        state = self.state
        hooks = setup.hooks
        gated = [c for c in calls if (t := setup.toolbox.tools.get(c.name)) is not None and t.needs_approval]
        if gated:
            free = [c for c in calls if c not in gated]
            if free:
                await self._run_tools(side, Message(thread_id=self.thread_id, role="assistant", tool_calls=free), setup)
            await self._pause_for_approval(side, reply, gated)
        if len(calls) == 1 or not setup.prompt.parallel_tool_calls:
            outcomes = [await run_tool_call(state, c, setup.toolbox, hooks, default_timeout=self.rt.tool_timeout) for c in calls]
        else:
            outcomes = list(await asyncio.gather(*(run_tool_call(state, c, setup.toolbox, hooks, default_timeout=self.rt.tool_timeout) for c in calls)))
        await self.rt.store_tool_outcomes(self.state, outcomes, side if self.dual else None, hooks)
        return outcomes

    async def _run_queued(self, side: Literal["a", "b"], setup: SideSetup) -> None:
        queued, self.ex.queued_tools = self.ex.queued_tools, []
        for name, args in queued:
            await self.rt.run_queued_call(self.state, name, args, setup, side if self.dual else None, execution=self.record)


class _Paused(Exception):
    """Internal: the turn waits for approvals or for client tool results (``outcome``);
    ``requests`` describe the pending calls."""

    def __init__(self, requests: list[dict[str, Any]], outcome: str = "approval_required") -> None:
        super().__init__("waiting for approval" if outcome == "approval_required" else "waiting for tool results")
        self.requests = requests
        self.outcome = outcome


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


def _completed_string_arg(partial: str, key: str) -> str | None:
    """The value of ``key`` once it has finished streaming in partial JSON text, else None."""
    needle = f'"{key}"'
    at = partial.find(needle)
    if at < 0:
        return None
    i = partial.find(":", at + len(needle))
    if i < 0:
        return None
    i += 1
    n = len(partial)
    while i < n and partial[i] in " \t\r\n":
        i += 1
    if i >= n:
        return None
    if partial[i] == '"':
        j = i + 1
        while j < n:
            c = partial[j]
            if c == "\\":
                j += 2
                continue
            if c == '"':
                try:
                    return str(json.loads(partial[i:j + 1]))
                except ValueError:
                    return None
            j += 1
        return None
    j = i
    while j < n and partial[j] not in ",}":
        j += 1
    if j >= n:
        return None
    return partial[i:j].strip()


_ = ToolResult  # re-exported type used in annotations elsewhere
