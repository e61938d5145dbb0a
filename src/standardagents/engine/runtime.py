"""The ``Runtime``: a project's registry, a store, an event bus and the model providers,
and the operations on threads (create, send, stop, subscribe).

One execution runs per thread at a time; a message sent meanwhile waits its turn. The
runtime is a facade: setup resolution lives in :mod:`.setup`, thread operations in
:mod:`.threadops`, starting and running turns in :mod:`.turns`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, Literal, TypeVar, Unpack, overload

from ..definitions import (
    AgentDefinition,
    ModelDefinition,
    PromptDefinition,
)
from ..events import EventBus, Subscription
from ..exceptions import NotFoundError
from ..providers.base import ModelProvider
from ..records import ExecutionRecord, Message, ThreadRecord, ToolResult, new_id
from ..registry import Registry
from ..store.base import Store
from ..toolcalls import CapabilityLatches
from ..toolsets import PluginRegistry, plugins
from . import approvals, client_results, handover, lifecycle, recovery, threadops, turns
from . import client_tools as client_tools_mod
from .client_tools import ClientTools
from .context import LLMCache
from .execution_core import ExecutionCore
from .handle import Turn
from .hooks import HookSet
from .inflight import InFlight
from .loop import ExecutionResult
from .options import RunOptions, StartOptions, TurnOptions, TurnRequest
from .owners import new_owner
from .setup import Setups, SideSetup
from .state import ThreadState
from .tools import ToolOutcome
from .turns import BUS_EVENT_TYPES

__all__ = ["Runtime", "SideSetup"]

log = logging.getLogger("standardagents.runtime")

_T = TypeVar("_T")


class Runtime:
    """Runs a project's agents against a store. Use ``await Runtime.open(path)``."""

    #: how deep subagents may nest (a parent's direct child is at depth 1)
    max_subagent_depth: int = 5

    def __init__(self, registry: Registry, store: Store, *, bus: EventBus | None = None,
                 model_override: str | ModelDefinition | None = None, default_max_steps: int = 50,
                 tool_timeout: float | None = None, auto_titles: bool | None = None) -> None:
        self.registry = registry
        #: name untitled threads after their first turn with a one-line side-task model call
        self.auto_titles = auto_titles if auto_titles is not None else os.environ.get(
            "STANDARDAGENTS_AUTO_TITLES", "").lower() in ("1", "true", "yes")
        #: what runs, waits and is held in this process: execution tasks, each thread's turn,
        #: thread claims, queued messages, turns being resumed (see :mod:`.inflight`)
        self.inflight = InFlight()
        self.store = store
        self.bus = bus or EventBus()
        self.model_override = model_override
        self.default_max_steps = default_max_steps
        #: event payloads carry tool arguments and results cut to this many characters
        self.event_detail_limit = 2000
        self.tool_timeout = tool_timeout
        self.llm_cache = LLMCache()
        #: which (endpoint, model) refused tool schemas, kept across restarts beside the store
        self.capabilities = CapabilityLatches()
        #: where the latches are kept between runs (a folder project only)
        self.capabilities_file: Path | None = None
        #: MCP sessions, one per server, opened on first use and closed with the runtime
        self.mcp_pool: Any = None
        #: the code sandbox's warm processes (made by the first ``run_code``)
        self.sandbox_pool: Any = None
        #: tools registered from Python code at run time (the process-wide registry by default)
        self.plugins: PluginRegistry = plugins
        #: side setups and model providers, resolved once (see :mod:`.setup`)
        self.setups = Setups(self)
        self._closed = False
        #: who runs this runtime's executions, for crash recovery: host, process and a
        #: per-incarnation nonce (a restarted container often has the same host and pid)
        self.owner = new_owner(socket.gethostname())
        recovery.LIVE_OWNERS.add(self.owner)
        #: seconds without a heartbeat after which another host's running execution counts as dead
        #: (``STANDARDAGENTS_EXECUTION_LEASE``, default 30); its turns are then resumed here
        self.execution_lease = float(os.environ.get("STANDARDAGENTS_EXECUTION_LEASE") or 30.0)
        #: set by :meth:`stop_gracefully`: no new turns start here (a shutdown is under way)
        self.draining = False
        #: hooks of the services above the engine (:mod:`standardagents.service`): awaited with
        #: each ended turn's record and ``done``; asked before a turn starts (quotas: raise to
        #: refuse it, or return what to await when it ends); around each model request
        self.turn_end_hooks: list[Callable[[ExecutionRecord, dict[str, Any]], Awaitable[None]]] = []
        self.admission: Callable[[ThreadRecord], Awaitable[Callable[[], Coroutine[Any, Any, None]] | None]] | None = None
        self.model_gate: Any = None

    # construction --------------------------------------------------------------------------
    @classmethod
    async def open(cls, project: str | Path | Registry | None = None, *, database_url: str | None = None,
                   store: Store | None = None, take_over: bool = True, **options: Any) -> Runtime:
        """Load a project (a folder or a ready Registry) and open its store; ``take_over``:
        resume the turns of gone processes now (a server passes False and calls
        :meth:`take_over` once its streams' relay and event log listen, so no event of a
        resumed turn is published before they do)."""
        registry, store = await lifecycle.open_parts(project, database_url, store)
        runtime = cls(registry, store, **options)
        if take_over:
            await runtime.take_over()
        lifecycle.load_capabilities(runtime)
        return runtime

    async def aclose(self) -> None:
        """Cancel running executions, close providers and the store."""
        if self._closed:
            return
        self._closed = True
        await lifecycle.close(self)

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called (nothing new starts here then)."""
        return self._closed

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # resolution (engine/setup.py) ----------------------------------------------------------
    async def agent(self, name: str, namespace: str | None = None) -> AgentDefinition:
        return await self.registry.aget("agents", name, namespace)

    def provider_for(self, model: ModelDefinition) -> ModelProvider:
        """One shared provider per endpoint configuration."""
        return self.setups.provider_for(model)

    def use_provider(self, model_name: str, provider: ModelProvider) -> None:
        """Route every request for a model definition to ``provider`` (tests, embedding)."""
        self.setups.use_provider(model_name, provider)

    async def side_setup(self, agent: AgentDefinition, side: Literal["a", "b"], namespace: str | None) -> SideSetup:
        return await self.setups.side_setup(agent, side, namespace)

    def invalidate(self) -> None:
        """Forget cached side setups (after the project changed)."""
        self.setups.invalidate()

    async def current_setup(self, setup: SideSetup) -> SideSetup:
        """``setup``, or a fresh one when its MCP servers' tool lists moved since it was built."""
        return await self.setups.current_setup(setup)


    def reload_project(self) -> list[str]:
        """Load the project folder again; when it validates, the next step of every thread
        uses it (running steps finish on the old one). Returns the problems (empty when swapped).

        This loads on the calling thread; :meth:`areload_project` loads off the event loop."""
        registry, problems = self.setups.load_again()
        if registry is not None:
            self.setups.swap_registry(registry)
        return problems

    async def areload_project(self) -> list[str]:
        """:meth:`reload_project` with the loading (imports of every project file, which may
        be slow) on a worker thread, so streams and turns in progress keep running; the new
        registry is swapped in on the event loop."""
        registry, problems = await asyncio.to_thread(self.setups.load_again)
        if registry is not None:
            self.setups.swap_registry(registry)
        return problems

    async def watch_project(self, *, debounce_ms: int = 300) -> None:
        """Reload the project whenever one of its files changes (until cancelled)."""
        from watchfiles import awatch

        root = self.registry.root
        if root is None:
            return
        async for _changes in awatch(Path(root) / "agents", debounce=debounce_ms, recursive=True):
            await self.areload_project()

    async def hook_set(self, agent: AgentDefinition, prompt: PromptDefinition | None, namespace: str | None) -> HookSet:
        """The active hooks: the prompt's list, else the agent's, with provenance."""
        return await self.setups.hook_set(agent, prompt, namespace)

    async def parent_hooks(self, agent: AgentDefinition, prompt: PromptDefinition | None, namespace: str | None) -> tuple[list[Any], list[Any]]:
        """Hooks required by child agents that ``prompt`` exposes as tools."""
        return await self.setups.parent_hooks(agent, prompt, namespace)

    async def render_system(self, setup: SideSetup, state: ThreadState) -> str:
        return await self.setups.render_system(setup, state)

    # threads (engine/threadops.py) ---------------------------------------------------------

    async def create_thread(self, agent: str, *, user_id: str | None = None, title: str | None = None,
                            metadata: dict[str, Any] | None = None, parent_id: str | None = None,
                            namespace: str | None = None, thread_id: str | None = None) -> ThreadRecord:
        """Create a thread and run ``after_thread_created`` (``thread_id``: an id the client chose)."""
        return await threadops.create_thread(self, agent, user_id=user_id, title=title, metadata=metadata,
                                             parent_id=parent_id, namespace=namespace, thread_id=thread_id)

    async def get_thread(self, thread_id: str) -> ThreadRecord:
        thread = await self.store.get_thread(thread_id)
        if thread is None:
            raise NotFoundError("thread", thread_id)
        return thread

    async def state(self, thread_id: str) -> ThreadState:
        """A ThreadState for a thread (with the running execution, if any)."""
        return await threadops.thread_state(self, thread_id)

    async def hooks_of(self, state: ThreadState) -> HookSet:
        """The hooks active for the thread's agent (its first side's prompt, else the agent's)."""
        return await threadops.hooks_of(self, state)

    # messages ------------------------------------------------------------------------------
    def create_messages(self, state: ThreadState, messages: list[Message], *, execution: ExecutionRecord | None = None,
                        tool_results: list[dict[str, Any]] | None = None,
                        hooks: HookSet | None = None) -> Coroutine[Any, Any, list[Message]]:
        """Store messages from the engine in one transaction: hooks before and after, the
        live history, events. A failing ``before_create_message`` keeps the last good message."""
        # the coroutine itself is returned: on every step's path, no extra frame to resume
        return threadops.create_messages(self, state, messages, execution=execution, tool_results=tool_results,
                                         hooks=hooks)

    async def engine_create_message(self, state: ThreadState, msg: Message, *, injected: bool) -> Message:
        return await threadops.engine_create_message(self, state, msg, injected=injected)

    async def engine_update_message(self, state: ThreadState, message_id: str, updates: dict[str, Any]) -> Message:
        return await threadops.engine_update_message(self, state, message_id, updates)

    # tool results --------------------------------------------------------------------------
    def store_tool_outcomes(self, state: ThreadState, outcomes: list[ToolOutcome], side: Literal["a", "b"] | None,
                            hooks: HookSet, *, execution: ExecutionRecord | None = None,
                            sides: list[Literal["a", "b"] | None] | None = None) -> Coroutine[Any, Any, list[Message]]:
        """Tool messages and result rows for a step, in call order, in one transaction
        (``sides``: each outcome's own side, when they differ)."""
        return threadops.store_tool_outcomes(self, state, outcomes, side, hooks, execution=execution, sides=sides)

    async def run_queued_call(self, state: ThreadState, name: str, args: dict[str, Any], setup: SideSetup | None,
                              side: Literal["a", "b"] | None, *, execution: ExecutionRecord | None = None) -> ToolResult:
        """Store a synthetic assistant call, run it, store its result."""
        return await threadops.run_queued_call(self, state, name, args, setup, side, execution=execution)

    async def engine_run_queued_tool(self, state: ThreadState, name: str, args: dict[str, Any]) -> asyncio.Task[ExecutionResult]:
        """A tool queued from outside a turn starts an execution (behind a running one): the
        tool runs first, stored as a call and its result, then the agent's turn goes on."""
        return await threadops.engine_run_queued_tool(self, state, name, args)

    async def engine_invoke_tool(self, state: ThreadState, name: str, args: dict[str, Any]) -> ToolResult:
        return await threadops.engine_invoke_tool(self, state, name, args)

    async def repair_transcript(self, state: ThreadState, *, reason: str = "no result was recorded for this call") -> int:
        """Give every tool call without a result an error result, so requests stay valid."""
        return await threadops.repair_transcript(self, state, reason=reason)

    def on_session_status(self, state: ThreadState, payload: dict[str, Any]) -> None:
        """A child's sessionStatus call: recorded on its parent's subagent registry."""
        from .composition import record_status

        record_status(self, state, payload)

    async def schedule_effect(self, state: ThreadState, name: str, args: dict[str, Any], *, delay: float = 0.0) -> str:
        from .effects import schedule

        return await schedule(self, state, name, args, delay)

    # executions (engine/turns.py) ----------------------------------------------------------
    def is_running(self, thread_id: str) -> bool:
        return thread_id in self.inflight.running

    @overload
    async def send(self, thread_id: str, content: str | None = None, *, output_type: type[_T],
                   **options: Unpack[RunOptions]) -> ExecutionResult[_T]: ...

    @overload
    async def send(self, thread_id: str, content: str | None = None, *, output_type: Any = None,
                   **options: Unpack[RunOptions]) -> ExecutionResult[Any]: ...

    async def send(self, thread_id: str, content: str | None = None, *, output_type: Any = None,
                   **options: Unpack[RunOptions]) -> ExecutionResult[Any]:
        """Store a message and run the agent until its turn ends; returns how it ended.

        ``output_type`` makes the turn's final answer a validated value of that type
        (``result.value``), overriding the prompt's own; ``usage_limits`` caps what the turn
        may spend (its fields override the agent's); ``model`` and ``system`` replace the
        starting side's model and system prompt for this turn (the other options: see
        :meth:`start`)."""
        turn = await self.begin(thread_id, TurnRequest(content=content, output_type=output_type, **options))
        return await turn

    async def start(self, thread_id: str, content: str | None = None, *, execution_id: str | None = None,
                    **options: Unpack[StartOptions]) -> asyncio.Task[ExecutionResult]:
        """Start (or queue behind the running one) an execution; returns its task.

        The message is ``content`` (or ``parts``, ``attachments``) with ``role``, ``side``,
        ``metadata`` and ``silent``; ``start_side`` is the side that answers it.
        ``execution_id`` lets a caller know the id before the execution starts (it is the
        ``executionId`` of its events). ``busy`` says what the message does when the thread
        runs a turn (the agent's ``busy`` when not given; see :mod:`.busy`): a refused one
        raises ``ThreadBusyError``. ``output_type`` and ``output_retries``: see :meth:`send`;
        ``usage_limits`` caps what the turn may spend. ``sampling`` (``temperature``,
        ``top_p``, ``max_tokens``, ``stop``, ``seed``) overrides the model's settings for this
        turn. ``client_tools`` are tools the caller runs itself: a call of one pauses the turn
        until :meth:`submit_tool_results` (see :mod:`.client_tools`). ``model`` (a model
        definition's name) and ``system`` (the whole system prompt text) take the place of
        ``start_side``'s for this turn only: the definitions and other turns are unchanged, a
        resumed turn keeps them, and the step records name the model called. An unknown model
        raises ``NotFoundError`` before anything is stored.

        The same fields make a :class:`TurnRequest` for :meth:`begin`."""
        turn = await self.begin(thread_id, TurnRequest(content=content, execution_id=execution_id, **options))
        return turn.task

    async def submit(self, thread_id: str, content: str | None = None, **options: Unpack[StartOptions]) -> Turn:
        """Start (or queue) a turn as :meth:`start` does, and return its :class:`Turn`: the
        execution's id at once, its status, ``cancel()`` for it alone, and its result
        (``await turn``)."""
        return await self.begin(thread_id, TurnRequest(content=content, **options))

    async def begin(self, thread: str | ThreadRecord, request: TurnRequest) -> Turn:
        """Start (or queue) the turn ``request`` asks for: the one entry every door goes
        through. Returns its :class:`Turn` (its execution id is ``request.execution_id``,
        or a new one). ``thread`` is the thread's id, or its record when the caller has
        just read it (a door checking access): the turn starts from that record instead of
        reading it again."""
        if request.execution_id is None:
            request = dataclasses.replace(request, execution_id=new_id("exe_"))
        execution_id = request.execution_id
        assert execution_id is not None
        record = thread if isinstance(thread, ThreadRecord) else await self.get_thread(thread)
        thread_id = record.id
        # quotas (the services' admission check) may refuse the turn, or hold a slot until it ends
        release = await self.admission(record) if self.admission is not None else None
        try:
            task = await turns.start(self, record, request)
        except BaseException:
            if release is not None:
                await release()
            raise
        if release is not None:
            done = release

            def ended(_task: asyncio.Task[ExecutionResult]) -> None:
                self.inflight.spawn(done())

            task.add_done_callback(ended)
        return Turn(self, thread_id, execution_id, task)

    async def drain(self) -> None:
        """Wait until every started or queued execution (and recovered one) has ended."""
        while self.inflight.tasks:
            await asyncio.gather(*list(self.inflight.tasks), return_exceptions=True)

    def execute(self, thread: ThreadRecord, agent: AgentDefinition, message: Message | None,
                start_side: Literal["a", "b"], execution_id: str | None = None,
                resume: ExecutionRecord | None = None, queued: bool = False,
                claimed: bool = False, options: TurnOptions | None = None) -> Coroutine[Any, Any, ExecutionResult]:
        """One turn of the thread, under its lock and claim (see :func:`.turns.execute`): the
        entry the engine's flows (recovery, approvals, client results) run turns through."""
        return turns.execute(self, thread, agent, message, start_side, execution_id, resume, queued, claimed, options)

    def owned_recently(self, execution: ExecutionCore) -> bool:
        """Whether the store confirmed within half a lease that ``execution`` is this
        runtime's (a heartbeat, or the turn's own claim), so it need not be asked again."""
        return not execution.taken_over and (
            asyncio.get_running_loop().time() - max(self.inflight.owned_at, execution.owned_at) < self.execution_lease / 2)

    async def confirm_owned(self, execution: ExecutionCore) -> None:
        """Raise ``ExecutionTakenOver`` when another process took ``execution`` over (asked of
        the store only after a stall: see :func:`.recovery.confirm_owned`)."""
        await recovery.confirm_owned(self, execution)

    def execute_locked(self, thread: ThreadRecord, agent: AgentDefinition, message: Message | None,
                       start_side: Literal["a", "b"], execution_id: str | None,
                       resume: ExecutionRecord | None, queued: bool,
                       options: TurnOptions | None = None, epoch: int = 0,
                       carried: dict[str, Any] | None = None) -> Coroutine[Any, Any, ExecutionResult]:
        """A turn run while the caller holds the thread's lock and claim (a resumed turn: see
        :func:`.turns.execute_locked`)."""
        return turns.execute_locked(self, thread, agent, message, start_side, execution_id, resume, queued, options,
                                    epoch, carried)

    # crash recovery and cross-process claims (engine/recovery.py) ---------------------------
    async def recover(self) -> list[str]:
        """Settle what dead processes left behind (see :func:`.recovery.recover`)."""
        return await recovery.recover(self)

    async def take_over(self) -> list[str]:
        """Resume what gone processes left running, then keep looking on every heartbeat."""
        resumed = await self.recover()
        recovery.beat(self)  # the heartbeat also looks for turns of processes that died since
        return resumed

    # approvals (engine/approvals.py) ---------------------------------------------------------
    async def pending_approvals(self, thread_id: str) -> list[dict[str, Any]]:
        """The calls of a thread waiting for a decision, each with a fresh resume token."""
        return await approvals.pending_approvals(self, thread_id)

    async def decide(self, token: str, approved: bool, *, reason: str | None = None,
                     thread_id: str | None = None) -> asyncio.Task[ExecutionResult] | None:
        """Approve or deny one paused call; the last decision continues the same execution
        (its task is returned). Forged or stale tokens raise ``ApprovalError``."""
        return await approvals.decide(self, token, approved, reason=reason, thread_id=thread_id)

    # client tools (engine/client_tools.py) ---------------------------------------------------
    async def check_client_tools(self, agent: AgentDefinition, namespace: str | None, client: ClientTools) -> None:
        """Refuse client tools named like one of the agent's own tools (``ClientToolError``)."""
        names: set[str] = set()
        for side in ("a", "b"):
            if agent.side(side) is not None:
                names |= set((await self.side_setup(agent, side, namespace)).toolbox.tools)
        client_tools_mod.check_against(client, names)

    async def waiting_for_tool_results(self, call_ids: list[str], thread_id: str | None = None) -> ExecutionRecord | None:
        """The execution waiting for the client's results of ``call_ids`` (on ``thread_id``
        when given, else found by the calls' ids), or None."""
        return await client_tools_mod.find_waiting(self, call_ids, thread_id)

    async def submit_tool_results(self, execution_id: str, results: dict[str, str], *, output_type: Any = None,
                                  sampling: dict[str, Any] | None = None,
                                  client_tools: ClientTools | None = None) -> asyncio.Task[ExecutionResult]:
        """Answer the client tool calls a waiting execution paused for; the same execution
        continues (its task is returned). ``ClientToolError`` when it does not wait for them."""
        return await self.resume_with_results(
            execution_id, results, TurnOptions.build(output_type=output_type, sampling=sampling,
                                                     client_tools=client_tools))

    async def resume_with_results(self, execution_id: str, results: dict[str, str],
                                  options: TurnOptions | None = None) -> asyncio.Task[ExecutionResult]:
        """:meth:`submit_tool_results` with the turn's options already built (a door's
        :meth:`TurnRequest.turn_options`): they apply on top of the paused turn's own."""
        if options is not None and options.client_tools is not None:
            record = await self.store.get_execution(execution_id)
            if record is not None:
                thread = await self.get_thread(record.thread_id)
                await self.check_client_tools(await self.agent(thread.agent, thread.package), thread.package,
                                              options.client_tools)
        return await client_results.submit_results(self, execution_id, results, options)

    async def stop(self, thread_id: str, *, timeout: float = 10.0,  # noqa: ASYNC109 - a bounded wait
                   rollback: bool = False) -> bool:
        """Cancel the running execution of a thread, here or in another process sharing the
        store; True when one was running and has ended.

        Another process is asked through the event bus (carried between workers by the
        PostgreSQL relay) and this waits up to ``timeout`` seconds for its ``done``."""
        return await turns.stop(self, thread_id, timeout=timeout, rollback=rollback)

    async def cancel(self, execution_id: str, *, timeout: float = 10.0) -> bool:  # noqa: ASYNC109 - a bounded wait
        """Cancel one execution by its id, here or in another process sharing the store: a
        queued one leaves its thread's inbox with one ``done`` (``cancelled``), a running one
        is stopped (never another turn of the same thread), a waiting one is marked cancelled.
        True when it was cancelled; False when it is over or unknown."""
        return await turns.cancel(self, execution_id, timeout=timeout)

    async def execution_thread(self, execution_id: str) -> str | None:
        """The thread an execution belongs to, also while it is queued (None: unknown)."""
        return await turns.thread_of(self, execution_id)

    def on_bus_event(self, event: Any) -> None:
        """A bus listener (attached with a cross-process relay): a ``stop_requested`` for a
        thread this process runs cancels that execution; turns another process handed over
        while shutting down are looked for (and resumed here) at once. Every other event
        (a stream's deltas among them) is passed over here, without a further call."""
        if event.type in BUS_EVENT_TYPES:
            turns.on_bus_event(self, event)

    # graceful shutdown (engine/handover.py) ------------------------------------------------
    async def stop_gracefully(self, timeout: float) -> list[str]:  # noqa: ASYNC109 - the grace period is the point
        """Stop starting turns, give the running ones ``timeout`` seconds to finish, then hand
        the rest over (:meth:`hand_over`); returns the ids of the executions handed over."""
        return await handover.drain(self, timeout)

    async def hand_over(self) -> list[str]:
        """End this runtime's running turns without settling them, so a live process resumes
        them at once from their last committed step (see :mod:`.handover`)."""
        return await handover.hand_over(self)

    async def running_threads(self, thread_ids: list[str]) -> set[str]:
        """Which of these threads run an execution now, in this process or another one
        sharing the store (a thread is claimed in the store while it runs)."""
        running = {t for t in thread_ids if t in self.inflight.running}
        if len(running) < len(thread_ids):
            wanted = set(thread_ids)
            running.update(key for _scope_id, key, _value in await self.store.list_scope("lock") if key in wanted)
        return running

    def subscribe(self, thread_id: str | None = None, *, reasoning: bool = True, maxsize: int | None = None) -> Subscription:
        return self.bus.subscribe(thread_id, reasoning=reasoning, maxsize=maxsize)

    @overload
    async def run(self, agent: str, message: str | None = None, *, output_type: type[_T],
                  user_id: str | None = None, **options: Unpack[RunOptions]) -> ExecutionResult[_T]: ...

    @overload
    async def run(self, agent: str, message: str | None = None, *, output_type: Any = None,
                  user_id: str | None = None, **options: Unpack[RunOptions]) -> ExecutionResult[Any]: ...

    async def run(self, agent: str, message: str | None = None, *, output_type: Any = None,
                  user_id: str | None = None, **options: Unpack[RunOptions]) -> ExecutionResult[Any]:
        """Create a thread for ``agent``, send ``message`` and wait for the end of the turn
        (``output_type`` and the options: see :meth:`send`). The options are checked before
        the thread is created."""
        request = TurnRequest(content=message, output_type=output_type, **options)
        request.turn_options()
        thread = await self.create_thread(agent, user_id=user_id)
        return await (await self.begin(thread, request))

    @staticmethod
    def run_sync(project: str | Path | Registry, agent: str, message: str, **options: Any) -> ExecutionResult:
        """Synchronous door: open, run one message on a new thread, close."""

        async def main() -> ExecutionResult:
            rt = await Runtime.open(project, **options)
            try:
                return await rt.run(agent, message)
            finally:
                await rt.aclose()

        return asyncio.run(main())

