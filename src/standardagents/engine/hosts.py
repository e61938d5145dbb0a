"""What the runtime's flows (claims, recovery, resuming, approvals, busy threads, handing over,
composition, effects, thread operations, turns, opening and closing) ask of the runtime.

The ``Runtime`` facade sits on top of the engine's layers; each flow under it names here only
what it uses of it, so the layers hold for annotations too. These name engine types (the
in-flight bookkeeping, a thread's state, a turn's core), so they sit above those, unlike the
protocols of :mod:`.ports`, which name nothing of the engine and sit under all of it. A flow
that calls another takes a host that is also the other's (the protocols extend each other).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .execution_core import ExecutionCore, ExecutionHost, SetupsPort
from .ports import DoneHost, OwnerHost, StoreHost
from .state import StateHost

if TYPE_CHECKING:
    from ..definitions import AgentDefinition, ModelDefinition
    from ..events import EventBus
    from ..records import ExecutionRecord, Message, ThreadRecord
    from ..registry import Registry
    from ..store.base import Store
    from ..toolcalls import CapabilityLatches
    from ..toolsets import PluginRegistry
    from .client_tools import ClientTools
    from .hooks import HookSet
    from .inflight import InFlight
    from .options import TurnOptions
    from .results import ExecutionResult
    from .state import ThreadState
    from .tools import ToolOutcome

__all__ = [
    "ApprovalsHost", "BusyHost", "ClaimHost", "ClientResultsHost", "ClosingSetups", "CompositionHost",
    "EffectsHost", "HandoverHost", "LifecycleHost", "RecoveryHost", "ResumeHost", "SetupHost", "ThreadOpsHost",
    "TurnsHost",
]


class ClaimHost(OwnerHost, StoreHost, Protocol):
    """Claiming threads in the store (:mod:`.claims`): the owner id, the lease, the claims held."""

    @property
    def execution_lease(self) -> float: ...

    @property
    def inflight(self) -> InFlight: ...


class ResumeHost(ClaimHost, DoneHost, StateHost, Protocol):
    """Resuming a gone process's turn (:mod:`.resume`): it claims the turn, answers its calls cut
    short and runs it on through the turn's entry under the thread's lock."""

    @property
    def store(self) -> Store: ...

    @property
    def draining(self) -> bool: ...

    @property
    def setups(self) -> SetupsPort: ...

    @property
    def tool_timeout(self) -> float | None: ...

    async def agent(self, name: str, namespace: str | None = None) -> AgentDefinition: ...

    def store_tool_outcomes(self, state: ThreadState, outcomes: list[ToolOutcome], side: Literal["a", "b"] | None,
                            hooks: HookSet, *, execution: ExecutionRecord | None = None,
                            sides: list[Literal["a", "b"] | None] | None = None) -> Awaitable[list[Message]]: ...

    async def repair_transcript(self, state: ThreadState, *, reason: str = ...) -> int: ...

    def execute_locked(self, thread: ThreadRecord, agent: AgentDefinition, message: Message | None,
                       start_side: Literal["a", "b"], execution_id: str | None,
                       resume: ExecutionRecord | None, queued: bool,
                       options: TurnOptions | None = None, epoch: int = 0,
                       carried: dict[str, Any] | None = None) -> Coroutine[Any, Any, ExecutionResult]: ...


class RecoveryHost(ResumeHost, Protocol):
    """Crash recovery and the heartbeat (:mod:`.recovery`): it sends again the messages a gone
    process had queued, through the turn's entry."""

    @property
    def closed(self) -> bool: ...

    def owned_recently(self, execution: ExecutionCore) -> bool: ...

    def execute(self, thread: ThreadRecord, agent: AgentDefinition, message: Message | None,
                start_side: Literal["a", "b"], execution_id: str | None = None,
                resume: ExecutionRecord | None = None, queued: bool = False,
                claimed: bool = False, options: TurnOptions | None = None) -> Coroutine[Any, Any, ExecutionResult]: ...


class ClientResultsHost(OwnerHost, StoreHost, Protocol):
    """Answering a turn's client tool calls (:mod:`.client_results`): the same turn goes on."""

    @property
    def inflight(self) -> InFlight: ...

    async def get_thread(self, thread_id: str) -> ThreadRecord: ...

    async def agent(self, name: str, namespace: str | None = None) -> AgentDefinition: ...

    def execute(self, thread: ThreadRecord, agent: AgentDefinition, message: Message | None,
                start_side: Literal["a", "b"], execution_id: str | None = None,
                resume: ExecutionRecord | None = None, queued: bool = False,
                claimed: bool = False, options: TurnOptions | None = None) -> Coroutine[Any, Any, ExecutionResult]: ...


class ApprovalsHost(ResumeHost, ClientResultsHost, ExecutionHost, Protocol):
    """Deciding approvals and running a paused turn on (:mod:`.approvals`)."""

    @property
    def store(self) -> Store: ...

    @property
    def bus(self) -> EventBus: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def setups(self) -> SetupsPort: ...

    @property
    def inflight(self) -> InFlight: ...

    @property
    def tool_timeout(self) -> float | None: ...

    async def repair_transcript(self, state: ThreadState, *, reason: str = ...) -> int: ...


class BusyHost(StoreHost, Protocol):
    """A message to a busy thread (:mod:`.busy`): stopping the running turn, rolling it back."""

    @property
    def bus(self) -> EventBus: ...

    @property
    def inflight(self) -> InFlight: ...

    async def stop(self, thread_id: str, *, timeout: float = ..., rollback: bool = False) -> bool: ...  # noqa: ASYNC109 - a bounded wait


class HandoverHost(ClaimHost, Protocol):
    """Handing running turns over on shutdown (:mod:`.handover`)."""

    draining: bool

    @property
    def bus(self) -> EventBus: ...


class EffectsHost(StoreHost, Protocol):
    """Scheduling and running effects (:mod:`.effects`)."""

    @property
    def bus(self) -> EventBus: ...

    @property
    def registry(self) -> Registry: ...

    async def state(self, thread_id: str) -> ThreadState: ...


class CompositionHost(StateHost, Protocol):
    """Subagents and handoffs (:mod:`.composition`): a child thread's turn, run to its end."""

    @property
    def inflight(self) -> InFlight: ...

    async def create_thread(self, agent: str, *, user_id: str | None = None, title: str | None = None,
                            metadata: dict[str, Any] | None = None, parent_id: str | None = None,
                            namespace: str | None = None, thread_id: str | None = None) -> ThreadRecord: ...

    async def send(self, thread_id: str, content: str | None = None) -> ExecutionResult[Any]: ...

    async def hooks_of(self, state: ThreadState) -> HookSet: ...


class SetupHost(CompositionHost, Protocol):
    """Resolving side setups (:mod:`.setup`): the registry (swapped on a reload), the model
    override, MCP sessions (opened on first use) and the tools registered from code."""

    registry: Registry
    mcp_pool: Any

    @property
    def model_override(self) -> str | ModelDefinition | None: ...

    @property
    def plugins(self) -> PluginRegistry: ...


class ThreadOpsHost(ResumeHost, Protocol):
    """Thread operations (:mod:`.threadops`): creating threads, storing messages and tool
    results with their hooks, tools run from outside a turn."""

    @property
    def bus(self) -> EventBus: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def event_detail_limit(self) -> int: ...

    async def get_thread(self, thread_id: str) -> ThreadRecord: ...

    async def start(self, thread_id: str, content: str | None = None, *,
                    execution_id: str | None = None) -> asyncio.Task[ExecutionResult]: ...


class TurnsHost(RecoveryHost, ApprovalsHost, ThreadOpsHost, BusyHost, Protocol):
    """Starting, running and stopping turns (:mod:`.turns`): every flow above meets here."""

    @property
    def store(self) -> Store: ...

    @property
    def bus(self) -> EventBus: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def setups(self) -> SetupsPort: ...

    @property
    def inflight(self) -> InFlight: ...

    @property
    def draining(self) -> bool: ...

    @property
    def auto_titles(self) -> bool: ...

    async def check_client_tools(self, agent: AgentDefinition, namespace: str | None, client: ClientTools) -> None: ...

    async def recover(self) -> list[str]: ...



class ClosingSetups(SetupsPort, Protocol):
    """The runtime's setups, closed with it."""

    async def aclose(self) -> None: ...


class LifecycleHost(ClaimHost, Protocol):
    """Opening and closing a runtime (:mod:`.lifecycle`)."""

    capabilities_file: Path | None

    @property
    def registry(self) -> Registry: ...

    @property
    def setups(self) -> ClosingSetups: ...

    @property
    def capabilities(self) -> CapabilityLatches: ...

    @property
    def mcp_pool(self) -> Any: ...

    @property
    def sandbox_pool(self) -> Any: ...
