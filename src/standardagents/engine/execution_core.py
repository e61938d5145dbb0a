"""What a running turn is, apart from how its loop runs: its record, state, counters and the
call's own options, and what it asks of the runtime running it.

The step's parts (the model call, pauses, the checks that end a turn, compaction) work on an
:class:`ExecutionCore`; the loop (:class:`~.loop.Execution`) extends it with the control flow.
Keeping the data here, under those parts, lets them name it without importing the loop, and
:class:`ExecutionHost` names only what they use of the runtime.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..definitions import (
    AgentDefinition,
    ModelDefinition,
    PromptDefinition,
    ToolDefinition,
    UsageLimits,
)
from ..records import ExecutionRecord, Message, ToolResult, now_ms
from .client_tools import ClientTools
from .digest import CHANGED_KEY, DIGEST_KEY
from .options import STATE_KEY as OPTIONS_KEY
from .options import TurnOptions
from .output import OutputRun, OutputSpec, PartialOutput, Verdict, to_jsonable
from .ports import DoneHost
from .results import ExecutionResult
from .state import ExecutionState, ThreadState
from .steps import StepProbe

if TYPE_CHECKING:
    from ..providers.base import ModelProvider
    from ..registry import Registry
    from ..toolcalls import CapabilityLatches
    from .context import LLMCache
    from .hooks import HookSet
    from .limits import UsageMeter
    from .overrides import SideOverride
    from .side import SideSetup
    from .tools import ToolOutcome

__all__ = ["ExecutionCore", "ExecutionHost", "SetupsPort", "TurnFlags"]


class SetupsPort(Protocol):
    """What the engine's parts under :mod:`.setup` ask of the runtime's resolved setups."""

    def provider_for(self, model: ModelDefinition) -> ModelProvider: ...

    async def side_setup(self, agent: AgentDefinition, side: Literal["a", "b"], namespace: str | None) -> SideSetup: ...

    async def current_setup(self, setup: SideSetup) -> SideSetup: ...

    async def render_system(self, setup: SideSetup, state: ThreadState) -> str: ...

    async def definitions_digest(self, agent: AgentDefinition, namespace: str | None) -> str: ...

    async def resolve_tool(self, name: str, namespace: str | None, agent: AgentDefinition) -> ToolDefinition: ...

    async def hook_set(self, agent: AgentDefinition, prompt: PromptDefinition | None, namespace: str | None) -> HookSet: ...


class TurnFlags(Protocol):
    """What a turn's end reads and marks of the runtime's in-flight bookkeeping."""

    @property
    def handing_over(self) -> bool: ...

    @property
    def abandoned(self) -> set[str]: ...


class ExecutionHost(DoneHost, Protocol):
    """What a running turn asks of the runtime that runs it (and its end, of :class:`DoneHost`)."""

    @property
    def registry(self) -> Registry: ...

    @property
    def setups(self) -> SetupsPort: ...

    @property
    def inflight(self) -> TurnFlags: ...

    @property
    def default_max_steps(self) -> int: ...

    @property
    def tool_timeout(self) -> float | None: ...

    @property
    def event_detail_limit(self) -> int: ...

    @property
    def llm_cache(self) -> LLMCache: ...

    @property
    def capabilities(self) -> CapabilityLatches: ...

    @property
    def model_gate(self) -> Any: ...

    def provider_for(self, model: ModelDefinition) -> ModelProvider: ...

    def create_messages(self, state: ThreadState, messages: list[Message], *, execution: ExecutionRecord | None = None,
                        tool_results: list[dict[str, Any]] | None = None,
                        hooks: HookSet | None = None) -> Awaitable[list[Message]]: ...

    def store_tool_outcomes(self, state: ThreadState, outcomes: list[ToolOutcome], side: Literal["a", "b"] | None,
                            hooks: HookSet, *, execution: ExecutionRecord | None = None,
                            sides: list[Literal["a", "b"] | None] | None = None) -> Awaitable[list[Message]]: ...

    async def run_queued_call(self, state: ThreadState, name: str, args: dict[str, Any], setup: SideSetup | None,
                              side: Literal["a", "b"] | None, *, execution: ExecutionRecord | None = None) -> ToolResult: ...

    async def repair_transcript(self, state: ThreadState, *, reason: str = ...) -> int: ...

    def on_session_status(self, state: ThreadState, payload: dict[str, Any]) -> None: ...

    def owned_recently(self, execution: ExecutionCore) -> bool: ...

    async def confirm_owned(self, execution: ExecutionCore) -> None: ...


class ExecutionCore:
    """One turn's data: what it runs on, what it produced and spent so far, and the call's
    own options. Create an :class:`~.loop.Execution` through :meth:`Runtime.start`."""

    def __init__(self, runtime: ExecutionHost, state: ThreadState, agent: AgentDefinition, record: ExecutionRecord) -> None:
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
        #: set when another process took this execution over (the heartbeat found its epoch
        #: moved on): the turn ends here without a write, and goes on there
        self.taken_over = False
        #: when (event-loop clock) a write of this turn last proved it is this process's
        self.owned_at = 0.0

    def take_options(self, options: TurnOptions) -> None:
        """Run with a call's own options (they take precedence over the definitions)."""
        self.output_override = options.output
        self.output_retries = options.output_retries
        self.usage_limits = options.usage_limits
        if options.sampling:
            self.sampling = dict(options.sampling)
        if options.client_tools is not None:
            self.client_tools = options.client_tools
        if options.override is not None:
            self.override = options.override
        self.options = options

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
        if self.options is not None and self.options.state:
            state[OPTIONS_KEY] = self.options.state
        for key in (DIGEST_KEY, CHANGED_KEY, "resumedFrom", "resumedAt"):  # its start, changes, takeover
            if key in self.record.state:
                state[key] = self.record.state[key]
        if ex.hooks_run or ex.guardrails_run:
            # hooks and guardrails after the last step's record (its tool calls' hooks, say)
            state["checks"] = {"hooks": ex.hooks_run or [], "guardrails": ex.guardrails_run or []}
        return state
