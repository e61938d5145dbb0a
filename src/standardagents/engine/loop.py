"""The turn loop: one execution of a thread, step by step, until a stop condition.

A step renders the context, calls the model (streaming), stores the reply, runs the tool
calls it asked for concurrently, stores their results in call order, and checks the stop
conditions. Each step's writes are committed before the next step starts, and every
execution ends with exactly one ``done`` event, whatever fails. The model call lives in
:mod:`.model_call`, pauses and their resumption in :mod:`.pauses`, the checks that end a
side's turn in :mod:`.turn_checks`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from .. import observability as observe
from ..definitions import SideConfig
from ..exceptions import ExecutionTakenOver, ProviderError, StandardAgentsError, StoreUnavailable
from ..records import Message
from .done import publish_done
from .execution_core import ExecutionCore
from .limits import LimitTripped, UsageMeter
from .model_call import model_step
from .ondemand import CARRIED_KEY, save_carried
from .output import OUTPUT_TOOL_NAME, OutputRun, Verdict, to_jsonable
from .pauses import Paused, pause_for_approval, pause_for_client, resume_approvals
from .results import ExecutionResult, StopReason
from .side import SideSetup, with_override
from .tools import ToolOutcome, run_tool_call
from .turn_checks import charge_budget, check_stops, input_guardrails

__all__ = ["Execution", "ExecutionResult", "StopReason"]

log = logging.getLogger("standardagents.engine")


class Execution(ExecutionCore):
    """One run of the loop for one thread. Create through :meth:`Runtime.start`."""

    # entry ---------------------------------------------------------------------------------
    async def run(self) -> ExecutionResult:
        ex = self.ex
        stop_reason: StopReason = "complete"
        error: str | None = None
        paused: list[dict[str, Any]] | None = None
        try:
            if self.resume is not None:
                await resume_approvals(self)
            elif self.user_message is not None:
                await input_guardrails(self)
            if not ex.stopped:
                await self._loop()
            if ex.stop_reason == "interrupted":
                stop_reason = "interrupted"
            elif ex.stop_reason == "error":
                stop_reason = "error"
                error = self.error
        except Paused as pause:
            stop_reason = "interrupted"
            ex.outcome = pause.outcome
            paused = pause.requests
        except ExecutionTakenOver:
            return self._lost()
        except StoreUnavailable as exc:
            return self._abandon(exc)
        except asyncio.CancelledError:
            if self.rt.inflight.handing_over:
                raise  # handed over: left running in the store for another process to resume
            if self.taken_over:
                return self._lost()
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
            except ExecutionTakenOver:
                return self._lost()
            except StoreUnavailable as exc:
                return self._abandon(exc)
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

    def _lost(self) -> ExecutionResult:
        """The end of a turn another process took over: nothing more is written or sent from
        here (not its settling, not a ``done``: those are the new owner's)."""
        self.ex.stopped = True
        log.warning("execution %s of thread %s was taken over by another process; it stops here unsettled",
                    self.record.id, self.thread_id)
        return ExecutionResult(self.thread_id, self.record.id, "cancelled", "taken_over", self.last_text,
                               "the turn was taken over by another process", None, None, None, self.created,
                               self.usage, self.cost, self.subagent_usage, self.subagent_cost)

    def _abandon(self, exc: StoreUnavailable) -> ExecutionResult:
        """The end of a turn whose write could not reach the database: whether it took effect
        is unknown, so nothing more is written or sent from here. The record stays running:
        this runtime takes it up again once the database answers (unless another process took
        it over meanwhile), and that run sends the turn's one ``done``."""
        self.ex.stopped = True
        self.rt.inflight.abandoned.add(self.record.id)
        log.warning("execution %s of thread %s stops here unsettled: %s; it goes on once the database answers",
                    self.record.id, self.thread_id, exc)
        return ExecutionResult(self.thread_id, self.record.id, "interrupted", "store_unavailable", self.last_text,
                               str(exc), None, None, None, self.created, self.usage, self.cost,
                               self.subagent_usage, self.subagent_cost)

    async def _record_error(self, message: str, code: str) -> None:
        self.bus.emit("error", self.thread_id, {"message": message, "code": code})
        msg = Message(thread_id=self.thread_id, role="assistant", content=message, status="error", hidden=True,
                      side=self.ex.side, metadata={"error": code, "executionId": self.record.id})
        try:
            await asyncio.shield(self.rt.store.commit_step(messages=[msg], fence=self.ex.fence))
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
            stored = await self.rt.store.commit_step(messages=messages, fence=self.ex.fence) if messages else []
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
        setup = await self.rt.setups.side_setup(self.agent, side, self.state.namespace)
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
            if observe.observed:
                observe.step()
            if setup.mcp_generation is not None:
                fresh = await self.rt.setups.current_setup(setup)
                setup = setup if fresh is setup else await self._overridden(side, fresh)
            if ex.queued_tools:
                await self._run_queued(side, setup)
            ends_turn = cfg.stop_on_response and not self.dual
            reply = await model_step(self, side, setup, ends_turn)
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
            charge_budget(self, outcomes, setup)
            if check_stops(self, side, cfg, setup, outcomes) or ex.stopped:
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
            charge_budget(self, outcomes, setup)
            if check_stops(self, side, cfg, setup, outcomes) or ex.stopped:
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

    # tools ---------------------------------------------------------------------------------
    async def _overridden(self, side: Literal["a", "b"], setup: SideSetup) -> SideSetup:
        """``setup`` as this turn's override changes it (when it is for ``side``)."""
        override = self.override
        if override is None or override.side != side:
            return setup
        return await with_override(setup, override, self.rt.registry)

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
            await pause_for_client(self, reply, theirs)
        self.ex.used_tools.extend(c.name for c in calls)
        state = self.state
        hooks = setup.hooks
        gated = [c for c in calls if (t := setup.toolbox.tools.get(c.name)) is not None and t.needs_approval]
        if gated:
            free = [c for c in calls if c not in gated]
            if free:
                await self._run_tools(side, Message(thread_id=self.thread_id, role="assistant", tool_calls=free), setup)
            await pause_for_approval(self, side, reply, gated)
        if not self.rt.owned_recently(self):  # after a stall, no tool starts in a turn taken over
            await self.rt.confirm_owned(self)
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
