"""The ``Runtime``: a project's registry, a store, an event bus and the model providers,
and the operations on threads (create, send, stop, subscribe).

One execution runs per thread at a time; a message sent meanwhile waits its turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from .. import observability as observe
from ..definitions import (
    AgentDefinition,
    BusyPolicy,
    ModelDefinition,
    PromptDefinition,
    ToolDefinition,
)
from ..definitions.limits import UsageLimits
from ..events import EventBus, Subscription
from ..exceptions import (
    DefinitionError,
    InjectionRejected,
    NotFoundError,
    ShuttingDownError,
    StandardAgentsError,
)
from ..project import DEFAULT_MODEL, load_project
from ..providers.base import ModelProvider
from ..records import ExecutionRecord, Message, ThreadRecord, ToolCall, ToolResult, new_id, now_ms
from ..registry import Registry
from ..store.base import Store
from ..toolcalls import CapabilityLatches, prepare_tools
from ..toolsets import PluginRegistry, merge_toolsets, plugins, resolve_tool_name
from . import approvals, handover, recovery
from . import busy as busy_policy
from . import client_tools as client_tools_mod
from .client_tools import ClientTools
from .compaction import place_summaries
from .context import LLMCache, clip, prompt_is_static, render_prompt
from .handover import HANDED_OVER
from .hooks import HookSet
from .loop import Execution, ExecutionResult
from .options import STATE_KEY as OPTIONS_KEY
from .options import TurnOptions
from .output import OutputSpec, output_spec
from .state import ExecutionState, ThreadState
from .tools import Toolbox, ToolOutcome, run_tool_call, session_tool

__all__ = ["Runtime", "SideSetup"]

log = logging.getLogger("standardagents.runtime")

_T = TypeVar("_T")


@dataclass
class SideSetup:
    """Everything one side needs per step, resolved once and cached."""

    agent: AgentDefinition
    side: Literal["a", "b"]
    prompt: PromptDefinition
    model: ModelDefinition
    fallbacks: list[ModelDefinition]
    toolbox: Toolbox
    hooks: HookSet
    namespace: str | None
    static_system: str | None
    #: on-demand discovery: the catalogue text appended to the system prompt
    catalogue: str | None = None
    input_guardrails: list[ToolDefinition] = field(default_factory=list)
    output_guardrails: list[ToolDefinition] = field(default_factory=list)
    #: the MCP pool's generation the tools were listed at (None: no MCP tools)
    mcp_generation: int | None = None
    #: the prompt's typed output (None: the side answers in free text)
    output: OutputSpec | None = None
    _by_level: dict[str | None, list[dict[str, Any]]] = field(default_factory=dict)
    _index: dict[str | None, dict[str, dict[str, Any]]] = field(default_factory=dict)

    @property
    def ondemand(self) -> bool:
        return self.catalogue is not None

    def tools_at(self, level: str | None, names: list[str] | None = None) -> list[dict[str, Any]]:
        """The offered tools adapted to a compatibility level (computed once per level),
        or just ``names`` of them (on-demand prompts)."""
        tools = self._by_level.get(level)
        if tools is None:
            tools = self.toolbox.offered if level is None else prepare_tools(self.toolbox.offered, level)  # type: ignore[arg-type]
            self._by_level[level] = tools
            self._index[level] = {t["function"]["name"]: t for t in tools if "function" in t}
        if names is None:
            return tools
        index = self._index[level]
        return [index[n] for n in names if n in index]


def _forget_project_modules(root: Path) -> None:
    """Drop the project's own helper modules from the import cache, so a reload reads the
    changed helpers too (definition files are always read afresh)."""
    inside = str(root.resolve()) + os.sep
    for name, module in list(sys.modules.items()):
        if (getattr(module, "__file__", None) or "").startswith(inside):
            sys.modules.pop(name, None)


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
        self._background: set[asyncio.Task[Any]] = set()
        #: every execution task started here (running or waiting for its thread)
        self._tasks: set[asyncio.Task[ExecutionResult]] = set()
        self._pending: dict[str, int] = {}
        #: threads this process holds across processes (see _claim_thread)
        self._claimed: set[str] = set()
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
        self._capabilities_file: Path | None = None
        #: MCP sessions, one per server, opened on first use and closed with the runtime
        self.mcp_pool: Any = None
        #: the code sandbox's warm processes (made by the first ``run_code``)
        self.sandbox_pool: Any = None
        #: tools registered from Python code at run time (the process-wide registry by default)
        self.plugins: PluginRegistry = plugins
        self._setups: dict[tuple[str, str, str | None], SideSetup] = {}
        self._providers: dict[str, ModelProvider] = {}
        self._by_model: dict[int, tuple[ModelDefinition, ModelProvider]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._lock_users: dict[str, int] = {}
        self._running: dict[str, asyncio.Task[ExecutionResult]] = {}
        self._executions: dict[str, Execution] = {}
        #: executions to roll back when they end (a message with busy="rollback" stopped them)
        self._roll_back: set[str] = set()
        self._closed = False
        #: who runs this runtime's executions, for crash recovery: host, process and a
        #: per-incarnation nonce (a restarted container often has the same host and pid)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"
        recovery.LIVE_OWNERS.add(self.owner)
        #: seconds without a heartbeat after which another host's running execution counts as dead
        #: (``STANDARDAGENTS_EXECUTION_LEASE``, default 30); its turns are then resumed here
        self.execution_lease = float(os.environ.get("STANDARDAGENTS_EXECUTION_LEASE") or 30.0)
        #: executions of gone processes this runtime claimed and is about to resume
        self._resuming: set[str] = set()
        self._heartbeat_task: asyncio.Task[None] | None = None
        #: tools queued on an idle thread, run first by the execution with that id
        self._queued_first: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        #: set by :meth:`stop_gracefully`: no new turns start here (a shutdown is under way)
        self.draining = False
        #: set by :meth:`hand_over`: cancelled executions end without settling (another
        #: process resumes them)
        self._handing_over = False

    # construction --------------------------------------------------------------------------
    @classmethod
    async def open(cls, project: str | Path | Registry | None = None, *, database_url: str | None = None,
                   store: Store | None = None, take_over: bool = True, **options: Any) -> Runtime:
        """Load a project (a folder or a ready Registry) and open its store; ``take_over``:
        resume the turns of gone processes now (a server passes False and calls
        :meth:`take_over` once its streams' relay and event log listen, so no event of a
        resumed turn is published before they do)."""
        from ..store import open_store

        if isinstance(project, Registry):
            registry = project
        elif project is not None:
            registry = load_project(project)
        else:
            registry = Registry()
        if store is None:
            root = registry.root if registry.root is not None else Path.cwd()
            store = open_store(database_url, project_dir=Path(root))
        await store.open()
        runtime = cls(registry, store, **options)
        if take_over:
            await runtime.take_over()
        if registry.root is not None:
            runtime._capabilities_file = Path(registry.root) / ".standardagents" / "capabilities.json"
            if runtime._capabilities_file.is_file():
                runtime.capabilities.import_capabilities(runtime._capabilities_file.read_text())
        return runtime

    async def aclose(self) -> None:
        """Cancel running executions, close providers and the store."""
        if self._closed:
            return
        self._closed = True
        recovery.LIVE_OWNERS.discard(self.owner)
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
        tasks = {*self._running.values(), *self._tasks, *self._background}
        for task in tasks:
            task.cancel()
        interrupted = False
        try:
            # asyncio.wait, not await: a cancellation of the caller stays the caller's
            await _ended(tasks)
        except asyncio.CancelledError:
            interrupted = True
        for thread_id in list(self._claimed):
            await recovery.release_thread(self, thread_id)
        if self._capabilities_file is not None:
            try:
                self._capabilities_file.parent.mkdir(parents=True, exist_ok=True)
                self._capabilities_file.write_text(self.capabilities.export_capabilities())
            except OSError:
                log.warning("could not save the capability latches to %s", self._capabilities_file)
        if self.mcp_pool is not None:
            try:
                await self.mcp_pool.aclose()
            except Exception:
                log.exception("closing MCP sessions failed")
        if self.sandbox_pool is not None:
            try:
                await self.sandbox_pool.close()
            except Exception:
                log.exception("closing the code sandbox failed")
        for provider in self._providers.values():
            try:
                await provider.aclose()
            except Exception:
                log.exception("closing a provider failed")
        await self.store.close()
        if interrupted:
            raise asyncio.CancelledError

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # resolution ----------------------------------------------------------------------------
    async def agent(self, name: str, namespace: str | None = None) -> AgentDefinition:
        return await self.registry.aget("agents", name, namespace)

    def provider_for(self, model: ModelDefinition) -> ModelProvider:
        """One shared provider per endpoint configuration."""
        cached = self._by_model.get(id(model))
        if cached is not None and cached[0] is model:
            return cached[1]
        provider = self._provider_for(model)
        self._by_model[id(model)] = (model, provider)
        return provider

    def _provider_for(self, model: ModelDefinition) -> ModelProvider:
        from ..exceptions import ProviderError
        from ..providers.factory import ProviderSpec, build_provider

        key = f"{model.provider}|{model.base_url}|{model.api_key_env}|{model.timeout}|{model.max_retries}|{sorted(model.headers.items())}"
        provider = self._providers.get(key)
        if provider is None:
            api_key = os.environ.get(model.api_key_env) if model.api_key_env else None
            # An unset key variable is not an error by itself: local endpoints need no key, and
            # the provider says clearly when a remote one does.
            spec = ProviderSpec(provider=model.provider, base_url=model.base_url, api_key=api_key,
                                api_key_env=model.api_key_env if api_key else None, timeout=model.timeout or 60.0, max_retries=model.max_retries,
                                headers=dict(model.headers), options=dict(model.options))
            try:
                provider = build_provider(spec)
            except ProviderError as exc:
                if exc.code != "missing_api_key":
                    raise
                where = (f"the environment variable {model.api_key_env} (its api_key_env) is not set"
                         if model.api_key_env else "set the key's variable and name it with api_key_env=... in define_model")
                raise ProviderError(f"no API key for model {model.name!r}: {where}", code="missing_api_key",
                                    retriable=False) from exc
            self._providers[key] = provider
        return provider

    def use_provider(self, model_name: str, provider: ModelProvider) -> None:
        """Route every request for a model definition to ``provider`` (tests, embedding)."""
        model = self.registry.get("models", model_name) if self.registry.has("models", model_name) else None
        if model is None:
            raise NotFoundError("model", model_name)
        key = f"{model.provider}|{model.base_url}|{model.api_key_env}|{model.timeout}|{model.max_retries}|{sorted(model.headers.items())}"
        self._providers[key] = provider
        self._by_model.clear()

    async def _model(self, name: str | None, namespace: str | None) -> ModelDefinition:
        override = self.model_override
        if isinstance(override, ModelDefinition):
            return override
        if isinstance(override, str):
            name = override
        return await self.registry.aget("models", name or DEFAULT_MODEL, namespace)

    async def side_setup(self, agent: AgentDefinition, side: Literal["a", "b"], namespace: str | None) -> SideSetup:
        key = (agent.name, side, namespace)
        setup = self._setups.get(key)
        if setup is None:
            setup = await self._build_setup(agent, side, namespace)
            self._setups[key] = setup
        return setup

    def invalidate(self) -> None:
        """Forget cached side setups (after the project changed)."""
        self._setups.clear()

    async def current_setup(self, setup: SideSetup) -> SideSetup:
        """``setup``, or a fresh one when its MCP servers' tool lists moved since it was built."""
        if setup.mcp_generation is None or self.mcp_pool is None or self.mcp_pool.generation == setup.mcp_generation:
            return setup
        self._setups.pop((setup.agent.name, setup.side, setup.namespace), None)
        return await self.side_setup(setup.agent, setup.side, setup.namespace)

    def reload_project(self) -> list[str]:
        """Load the project folder again; when it validates, the next step of every thread
        uses it (running steps finish on the old one). Returns the problems (empty when swapped).

        This loads on the calling thread; :meth:`areload_project` loads off the event loop."""
        registry, problems = self._load_again()
        if registry is not None:
            self._swap_registry(registry)
        return problems

    async def areload_project(self) -> list[str]:
        """:meth:`reload_project` with the loading (imports of every project file, which may
        be slow) on a worker thread, so streams and turns in progress keep running; the new
        registry is swapped in on the event loop."""
        registry, problems = await asyncio.to_thread(self._load_again)
        if registry is not None:
            self._swap_registry(registry)
        return problems

    def _load_again(self) -> tuple[Registry | None, list[str]]:
        """Validate and load the project folder (touches nothing of the running runtime)."""
        from ..project import validate_project

        root = self.registry.root
        if root is None:
            return None, ["this runtime was not opened from a project folder"]
        _forget_project_modules(Path(root))
        problems = [str(p) for p in validate_project(root) if not p.warning]
        if problems:
            log.warning("still serving the previous version of the project: %s", "; ".join(problems))
            return None, problems
        return load_project(root), []

    def _swap_registry(self, registry: Registry) -> None:
        registry.packages = registry.packages or self.registry.packages
        self.registry = registry
        self._setups.clear()
        self._by_model.clear()
        log.info("reloaded the project from %s", registry.root)
        self.bus.emit("project_reloaded", "", {"root": str(registry.root)})

    async def watch_project(self, *, debounce_ms: int = 300) -> None:
        """Reload the project whenever one of its files changes (until cancelled)."""
        from watchfiles import awatch

        root = self.registry.root
        if root is None:
            return
        async for _changes in awatch(Path(root) / "agents", debounce=debounce_ms, recursive=True):
            await self.areload_project()

    async def _build_setup(self, agent: AgentDefinition, side: Literal["a", "b"], namespace: str | None) -> SideSetup:
        cfg = agent.side(side)
        if cfg is None:
            raise DefinitionError([(f"side_{side}", "this side is not configured")], source=f"agent {agent.name!r}")
        prompt: PromptDefinition = await self.registry.aget("prompts", cfg.prompt, namespace)
        model = await self._model(prompt.model, namespace)
        fallbacks = [await self.registry.aget("models", fb, namespace) for fb in model.fallbacks]
        toolbox = Toolbox()
        session_names = {b.name for b in (cfg.session_tool(k) for k in ("stop", "fail", "status")) if b is not None}
        resolved: list[ToolDefinition] = []
        for name in prompt.tool_names():
            if name in session_names and not self.registry.has("tools", name, namespace):
                continue
            resolved.extend(await self._resolve_tools(name, namespace, agent))
        for tool in merge_toolsets(resolved):
            toolbox.tools[tool.name] = tool
        for kind in ("stop", "fail", "status"):
            binding = cfg.session_tool(kind)
            if binding is None:
                continue
            toolbox.session[binding.name] = kind
            if binding.name not in toolbox.tools:
                if self.registry.has("tools", binding.name, namespace):
                    toolbox.tools[binding.name] = await self.registry.aget("tools", binding.name, namespace)
                else:
                    toolbox.tools[binding.name] = session_tool(binding.name, kind, binding.message_property, binding.attachments_property)
        if cfg.stop_tool and cfg.stop_tool not in toolbox.tools and self.registry.has("tools", cfg.stop_tool, namespace):
            toolbox.tools[cfg.stop_tool] = await self.registry.aget("tools", cfg.stop_tool, namespace)
        catalogue = None
        if prompt.tool_discovery == "ondemand":
            from ..toolcalls import catalogue_text
            from .ondemand import load_tools_definition

            listed = [t.openai_tool() for n, t in toolbox.tools.items() if n not in toolbox.session]
            catalogue = catalogue_text(listed)
            loader = load_tools_definition([t["function"]["name"] for t in listed])
            toolbox.tools[loader.name] = loader
        toolbox.offered = [t.openai_tool() for t in toolbox.tools.values()]
        hooks = await self.hook_set(agent, prompt, namespace)
        static = None
        if prompt_is_static(prompt, self.registry, namespace):
            static = await render_prompt(prompt, None, self.registry, namespace)
            if catalogue:
                static = f"{static}\n\n{catalogue}" if static else catalogue
        guards: dict[str, list[ToolDefinition]] = {}
        for kind, names in (("input", [*agent.input_guardrails, *prompt.input_guardrails]),
                            ("output", [*agent.output_guardrails, *prompt.output_guardrails])):
            guards[kind] = [await self.registry.aget("tools", n, namespace) for n in dict.fromkeys(names)]
        mcp_generation = None
        if self.mcp_pool is not None and any(t.origin == "mcp" for t in toolbox.tools.values()):
            mcp_generation = self.mcp_pool.generation
        return SideSetup(agent, side, prompt, model, fallbacks, toolbox, hooks, namespace, static, catalogue,
                         guards["input"], guards["output"], mcp_generation,
                         output=output_spec(prompt.output_type) if prompt.output_type is not None else None)

    async def _resolve_tools(self, name: str, namespace: str | None, agent: AgentDefinition) -> list[ToolDefinition]:
        """The tools one entry of a prompt's ``tools`` names: a code or plugin tool, an
        agent exposed as a tool, or an MCP server's tools (``mcp:server``, ``mcp:server/tool``)."""
        if not self.registry.has("tools", name, namespace) and self.registry.has("agents", name, namespace):
            from .composition import agent_tool

            child = await self.registry.aget("agents", name, namespace)
            return [agent_tool(self, child, self.registry.namespace_of("agents", name, namespace))]
        servers = {e.name: e.value for e in self.registry.entries("mcp", namespace)}
        if servers and self.mcp_pool is None:
            from ..mcp import MCPPool

            self.mcp_pool = MCPPool(list(servers.values()))
        try:
            return await resolve_tool_name(name, registry=self.registry, namespace=namespace, pool=self.mcp_pool,
                                           plugins=self.plugins, servers=servers)
        except NotFoundError as exc:
            raise NotFoundError("tool", name, f"named by agent {agent.name!r}: {exc}") from None

    async def _resolve_tool(self, name: str, namespace: str | None, agent: AgentDefinition) -> ToolDefinition:
        """One tool by its final name (as a model calls it)."""
        for tool in await self._resolve_tools(name, namespace, agent):
            if tool.name == name:
                return tool
        raise NotFoundError("tool", name, f"named by agent {agent.name!r}")

    async def hook_set(self, agent: AgentDefinition, prompt: PromptDefinition | None, namespace: str | None) -> HookSet:
        """The active hooks: the prompt's list, else the agent's, with provenance."""
        hooks = HookSet()
        if prompt is not None and prompt.hooks is not None:
            ids, source = prompt.hooks, {"kind": "prompt", "promptName": prompt.name}
        else:
            ids, source = agent.hooks, {"kind": "agent", "agentName": agent.name}
        own = [(await self.registry.aget("hooks", hook_id, namespace), source) for hook_id in ids]
        before, after = await self.parent_hooks(agent, prompt, namespace)
        for definition, src in (*before, *own, *after):
            hooks.add(definition, src)
        return hooks

    async def parent_hooks(self, agent: AgentDefinition, prompt: PromptDefinition | None, namespace: str | None) -> tuple[list[Any], list[Any]]:
        """Hooks required by child agents that ``prompt`` exposes as tools."""
        before: list[Any] = []
        after: list[Any] = []
        if prompt is None:
            return before, after
        for name in prompt.tool_names():
            entry = self.registry.find("agents", name, namespace)
            if entry is None:
                continue
            child: AgentDefinition = await self.registry.aget("agents", name, namespace)
            if child.type != "dual_ai" or not child.parent_hooks:
                continue
            for req in child.parent_hooks:
                definition = await self.registry.aget("hooks", req.hook, entry.package)
                src: dict[str, Any] = {"kind": "child", "relationshipName": name, "agentName": child.name}
                if entry.package is not None:
                    pkg = self.registry.packages.get(entry.package)
                    src["package"] = getattr(pkg, "signature", None) or {"packageId": entry.package}
                (before if req.stage == "before_parent" else after).append((definition, src))
        return before, after

    async def render_system(self, setup: SideSetup, state: ThreadState) -> str:
        text = await render_prompt(setup.prompt, state, self.registry, setup.namespace)
        if setup.catalogue:
            text = f"{text}\n\n{setup.catalogue}" if text else setup.catalogue
        return text

    # threads -------------------------------------------------------------------------------
    async def create_thread(self, agent: str, *, user_id: str | None = None, title: str | None = None,
                            metadata: dict[str, Any] | None = None, parent_id: str | None = None,
                            namespace: str | None = None, thread_id: str | None = None) -> ThreadRecord:
        """Create a thread and run ``after_thread_created`` (``thread_id``: an id the client chose)."""
        definition = await self.agent(agent, namespace)
        package = self.registry.namespace_of("agents", agent, namespace)
        thread = ThreadRecord(agent=definition.name, user_id=user_id, title=title, metadata=dict(metadata or {}),
                              parent_id=parent_id, package=package)
        if thread_id:
            thread.id = thread_id
        thread = await self.store.create_thread(thread)
        self.bus.emit("thread_created", thread.id, {"thread": thread.to_dict()})
        state = ThreadState(self, thread, definition, package)
        hooks = (await self.side_setup(definition, "a", package)).hooks
        state._hooks = hooks
        if hooks.has("after_thread_created"):
            await hooks.notify("after_thread_created", state)
        return thread

    async def _prompt_for(self, agent: AgentDefinition, side: Literal["a", "b"], namespace: str | None) -> PromptDefinition | None:
        cfg = agent.side(side)
        if cfg is None or not self.registry.has("prompts", cfg.prompt, namespace):
            return None
        return await self.registry.aget("prompts", cfg.prompt, namespace)

    async def get_thread(self, thread_id: str) -> ThreadRecord:
        thread = await self.store.get_thread(thread_id)
        if thread is None:
            raise NotFoundError("thread", thread_id)
        return thread

    async def state(self, thread_id: str) -> ThreadState:
        """A ThreadState for a thread (with the running execution, if any)."""
        thread = await self.get_thread(thread_id)
        agent = await self.agent(thread.agent, thread.package) if self.registry.has("agents", thread.agent, thread.package) else None
        running = self._executions.get(thread_id)
        st = ThreadState(self, thread, agent, thread.package, running.ex if running else None)
        if agent is not None:
            st._hooks = await self.hook_set(agent, await self._prompt_for(agent, "a", thread.package), thread.package)
        return st

    async def _hooks_of(self, state: ThreadState) -> HookSet:
        if state._hooks is None:
            if state.agent is None:
                state._hooks = HookSet()
            else:
                side = state.execution.side if state.execution else "a"
                setup = await self.side_setup(state.agent, side, state.namespace)
                state._hooks = setup.hooks
        return state._hooks

    # messages ------------------------------------------------------------------------------
    async def _before_create(self, state: ThreadState, hooks: HookSet, msg: Message, strict: bool) -> Message:
        if not hooks.has("before_create_message"):
            return msg
        result = await hooks.transform("before_create_message", state, msg, strict=strict)
        if isinstance(result, dict):
            result = Message.from_dict({**msg.to_dict(), **result})
        if not isinstance(result, Message):
            return msg
        result.thread_id = state.thread_id
        return result

    async def create_messages(self, state: ThreadState, messages: list[Message], *, execution: ExecutionRecord | None = None,
                              tool_results: list[dict[str, Any]] | None = None, hooks: HookSet | None = None) -> list[Message]:
        """Store messages from the engine in one transaction: hooks before and after, the
        live history, events. A failing ``before_create_message`` keeps the last good message."""
        hooks = hooks or await self._hooks_of(state)
        prepared = [await self._before_create(state, hooks, m, False) for m in messages]
        if execution is not None:
            execution.updated_at = now_ms()
            execution.step_count = state.execution.step_count if state.execution else execution.step_count
        stored = await self.store.commit_step(messages=prepared, tool_results=tool_results or [], execution=execution)
        ex = state.execution
        bus = self.bus
        listening = bus.has_subscribers(state.thread_id)
        for m in stored:
            if ex is not None:
                ex.message_history.append(m)
                ex.written.append(m.id)
            if listening and not m.silent:
                bus.emit("message_created", state.thread_id, {"message": m.to_dict()})
        if hooks.has("after_create_message"):
            for m in stored:
                await hooks.notify("after_create_message", state, m)
        return stored

    async def engine_create_message(self, state: ThreadState, msg: Message, *, injected: bool) -> Message:
        hooks = await self._hooks_of(state)
        try:
            prepared = await self._before_create(state, hooks, msg, injected)
        except Exception as exc:
            raise InjectionRejected(f"before_create_message rejected the message: {exc}") from exc
        stored = await self.create_messages(state, [prepared], hooks=_without(hooks, "before_create_message"))
        return stored[0]

    async def engine_update_message(self, state: ThreadState, message_id: str, updates: dict[str, Any]) -> Message:
        hooks = await self._hooks_of(state)
        if hooks.has("before_update_message"):
            updates = await hooks.transform("before_update_message", state, dict(updates), message_id)
        message = await self.store.update_message(message_id, dict(updates))
        ex = state.execution
        if ex is not None:
            for i, m in enumerate(ex.message_history):
                if m.id == message_id:
                    ex.message_history[i] = message
                    ex.history_version += 1
                    break
        if not message.silent:
            self.bus.emit("message_updated", state.thread_id, {"message": message.to_dict()})
        await hooks.notify("after_update_message", state, message)
        return message

    # tool results --------------------------------------------------------------------------
    async def store_tool_outcomes(self, state: ThreadState, outcomes: list[ToolOutcome], side: Literal["a", "b"] | None,
                                  hooks: HookSet, *, execution: ExecutionRecord | None = None,
                                  sides: list[Literal["a", "b"] | None] | None = None) -> list[Message]:
        """Tool messages and result rows for a step, in call order, in one transaction
        (``sides``: each outcome's own side, when they differ)."""
        messages: list[Message] = []
        rows: list[dict[str, Any]] = []
        tid = state.thread_id
        for i, out in enumerate(outcomes):
            res = out.result
            meta: dict[str, Any] = {"durationMs": round(out.duration_ms, 3)}
            if out.repaired:
                meta["repaired"] = True
                meta["repairNotes"] = out.notes
            if out.approval is not None:
                meta["approval"] = out.approval
            msg = Message(thread_id=tid, role="tool", content=res.content, tool_call_id=out.call.id, name=out.call.name,
                          side=side if sides is None else sides[i], tool_status=res.status,
                          attachments=list(res.attachments), metadata=meta)
            messages.append(msg)
            rows.append({"id": new_id("tr_"), "thread_id": tid, "message_id": msg.id, "tool_call_id": out.call.id,
                         "tool_name": out.call.name, "arguments": out.call.arguments, "status": res.status,
                         "result": res.result, "error": res.error, "stack": res.stack, "attachments": list(res.attachments),
                         "metadata": meta, "created_at": now_ms()})
        stored = await self.create_messages(state, messages, execution=execution, tool_results=rows, hooks=hooks)
        listening = self.bus.has_subscribers(tid)
        for out in outcomes:
            if not listening:
                if hooks.has("tool_call_done"):
                    await hooks.notify("tool_call_done", state, out.call, out.result)
                continue
            limit = self.event_detail_limit
            data: dict[str, Any] = {"id": out.call.id, "name": out.call.name, "status": out.result.status,
                                    "arguments": clip(out.call.arguments, limit), "result": clip(out.result.result, limit),
                                    "durationMs": round(out.duration_ms, 3)}
            if out.repaired:
                data["repaired"] = True
            if out.result.status == "error":
                data["error"] = out.result.error
            self.bus.emit("tool_call_done", tid, data)
            if hooks.has("tool_call_done"):
                await hooks.notify("tool_call_done", state, out.call, out.result)
        return stored

    async def run_queued_call(self, state: ThreadState, name: str, args: dict[str, Any], setup: SideSetup | None,
                              side: Literal["a", "b"] | None, *, execution: ExecutionRecord | None = None) -> ToolResult:
        """Store a synthetic assistant call, run it, store its result."""
        import json as _json

        call = ToolCall(new_id("call_"), name, _json.dumps(args))
        hooks = setup.hooks if setup else await self._hooks_of(state)
        toolbox = setup.toolbox if setup else Toolbox()
        if name not in toolbox.tools:
            toolbox = Toolbox(dict(toolbox.tools), toolbox.offered, toolbox.session)
            if state.agent is not None:
                toolbox.tools[name] = await self._resolve_tool(name, state.namespace, state.agent)
        await self.create_messages(state, [Message(thread_id=state.thread_id, role="assistant", tool_calls=[call], side=side,
                                                   metadata={"queued": True})], execution=execution, hooks=hooks)
        self.bus.emit("tool_call_started", state.thread_id, {"id": call.id, "name": name, "progress": None,
                                                             "arguments": clip(call.arguments, self.event_detail_limit)})
        await hooks.notify("tool_call_started", state, call, None)
        outcome = await run_tool_call(state, call, toolbox, hooks, default_timeout=self.tool_timeout)
        await self.store_tool_outcomes(state, [outcome], side, hooks, execution=execution)
        return outcome.result

    async def engine_run_queued_tool(self, state: ThreadState, name: str, args: dict[str, Any]) -> asyncio.Task[ExecutionResult]:
        """A tool queued from outside a turn starts an execution (behind a running one): the
        tool runs first, stored as a call and its result, then the agent's turn goes on."""
        if state.agent is None:
            raise NotFoundError("agent", state.agent_id)
        await self._resolve_tool(name, state.namespace, state.agent)  # an unknown name fails here, not mid-turn
        execution_id = new_id("exe_")
        self._queued_first[execution_id] = [(name, args)]
        try:
            return await self.start(state.thread_id, execution_id=execution_id)
        except BaseException:
            self._queued_first.pop(execution_id, None)
            raise

    async def engine_invoke_tool(self, state: ThreadState, name: str, args: dict[str, Any]) -> ToolResult:
        import json as _json

        if state.agent is None:
            raise NotFoundError("agent", state.agent_id)
        tool = await self._resolve_tool(name, state.namespace, state.agent)
        call = ToolCall(new_id("call_"), name, _json.dumps(args))
        outcome = await run_tool_call(state, call, Toolbox({name: tool}), HookSet(), default_timeout=self.tool_timeout)
        return outcome.result

    async def repair_transcript(self, state: ThreadState, *, reason: str = "no result was recorded for this call") -> int:
        """Give every tool call without a result an error result, so requests stay valid."""
        history = state.execution.message_history if state.execution else await state.get_messages()
        answered = {m.tool_call_id for m in history if m.role == "tool"}
        outcomes = []
        for m in history:
            if m.role == "assistant" and m.tool_calls:
                for call in m.tool_calls:
                    if call.id not in answered:
                        outcomes.append((m.side, ToolOutcome(call, ToolResult("error", error=f"Error: {reason}"), None)))
        if outcomes:  # one transaction for all of them: the transcript is whole or untouched
            await self.store_tool_outcomes(state, [out for _side, out in outcomes], None, HookSet(),
                                           sides=[side for side, _out in outcomes])
        return len(outcomes)

    def on_session_status(self, state: ThreadState, payload: dict[str, Any]) -> None:
        """A child's sessionStatus call: recorded on its parent's subagent registry."""
        from .composition import record_status

        record_status(self, state, payload)

    async def schedule_effect(self, state: ThreadState, name: str, args: dict[str, Any], *, delay: float = 0.0) -> str:
        from .effects import schedule

        return await schedule(self, state, name, args, delay)

    # executions ----------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _lock(self, thread_id: str) -> AsyncIterator[None]:
        """Hold the thread's in-process lock. The lock lives only while an execution holds or
        waits for it, so a long-lived process keeps no lock per thread it ever ran."""
        lock = self._locks.get(thread_id)
        if lock is None:
            lock = self._locks[thread_id] = asyncio.Lock()
        self._lock_users[thread_id] = self._lock_users.get(thread_id, 0) + 1
        try:
            async with lock:
                yield
        finally:
            left = self._lock_users.pop(thread_id) - 1
            if left:
                self._lock_users[thread_id] = left
            else:
                self._locks.pop(thread_id, None)

    def is_running(self, thread_id: str) -> bool:
        return thread_id in self._running

    @overload
    async def send(self, thread_id: str, content: str | None = None, *, role: str = ...,
                   attachments: list[dict[str, Any]] | None = ..., parts: list[dict[str, Any]] | None = ...,
                   side: Literal["a", "b"] | None = ..., metadata: dict[str, Any] | None = ...,
                   start_side: Literal["a", "b"] = ..., silent: bool = ..., output_type: type[_T],
                   output_retries: int | None = ...,
                   usage_limits: UsageLimits | dict[str, Any] | None = ...) -> ExecutionResult[_T]: ...

    @overload
    async def send(self, thread_id: str, content: str | None = None, *, role: str = ...,
                   attachments: list[dict[str, Any]] | None = ..., parts: list[dict[str, Any]] | None = ...,
                   side: Literal["a", "b"] | None = ..., metadata: dict[str, Any] | None = ...,
                   start_side: Literal["a", "b"] = ..., silent: bool = ..., output_type: Any = ...,
                   output_retries: int | None = ...,
                   usage_limits: UsageLimits | dict[str, Any] | None = ...) -> ExecutionResult[Any]: ...

    async def send(self, thread_id: str, content: str | None = None, *, role: str = "user",
                   attachments: list[dict[str, Any]] | None = None, parts: list[dict[str, Any]] | None = None,
                   side: Literal["a", "b"] | None = None, metadata: dict[str, Any] | None = None,
                   start_side: Literal["a", "b"] = "a", silent: bool = False, output_type: Any = None,
                   output_retries: int | None = None,
                   usage_limits: UsageLimits | dict[str, Any] | None = None) -> ExecutionResult[Any]:
        """Store a message and run the agent until its turn ends; returns how it ended.

        ``output_type`` makes the turn's final answer a validated value of that type
        (``result.value``), overriding the prompt's own; ``usage_limits`` caps what the turn
        may spend (its fields override the agent's)."""
        task = await self.start(thread_id, content, role=role, attachments=attachments, parts=parts, side=side,
                                metadata=metadata, start_side=start_side, silent=silent, output_type=output_type,
                                output_retries=output_retries, usage_limits=usage_limits)
        return await task

    async def start(self, thread_id: str, content: str | None = None, *, role: str = "user",
                    attachments: list[dict[str, Any]] | None = None, parts: list[dict[str, Any]] | None = None,
                    side: Literal["a", "b"] | None = None, metadata: dict[str, Any] | None = None,
                    start_side: Literal["a", "b"] = "a", silent: bool = False,
                    execution_id: str | None = None, output_type: Any = None,
                    output_retries: int | None = None,
                    usage_limits: UsageLimits | dict[str, Any] | None = None,
                    busy: BusyPolicy | None = None,
                    sampling: dict[str, Any] | None = None,
                    client_tools: ClientTools | None = None) -> asyncio.Task[ExecutionResult]:
        """Start (or queue behind the running one) an execution; returns its task.

        ``execution_id`` lets a caller know the id before the execution starts (it is the
        ``executionId`` of its events). ``busy`` says what the message does when the thread
        runs a turn (the agent's ``busy`` when not given; see :mod:`.busy`): a refused one
        raises ``ThreadBusyError``. ``sampling`` (``temperature``, ``top_p``, ``max_tokens``,
        ``stop``, ``seed``) overrides the model's settings for this turn. ``client_tools`` are
        tools the caller runs itself: a call of one pauses the turn until
        :meth:`submit_tool_results` (see :mod:`.client_tools`)."""
        if self.draining:
            raise ShuttingDownError()
        options = TurnOptions.build(output_type=output_type, output_retries=output_retries, usage_limits=usage_limits,
                                    sampling=sampling, client_tools=client_tools)
        thread = await self.get_thread(thread_id)
        agent = await self.agent(thread.agent, thread.package)
        if client_tools is not None:
            await self.check_client_tools(agent, thread.package, client_tools)
        message = None
        if content is not None or parts or attachments:
            message = Message(thread_id=thread.id, role=role, content=content, parts=parts,  # type: ignore[arg-type]
                              attachments=list(attachments or []), side=side, metadata=dict(metadata or {}), silent=silent)
        claimed = queued = False
        policy = busy_policy.check_policy(busy or agent.busy)
        if message is not None:
            # Claim the thread now when it is free; when it is busy (here or in another
            # process) the message is stored in the inbox before anything waits, so a crash
            # or a shutdown meanwhile loses nothing and the caller need not wait for the turn.
            if self._pending.get(thread.id, 0) > 0:
                queued = True
            else:
                claimed = await recovery.try_claim(self, thread.id)
                queued = not claimed
            if queued and policy == "reject":
                busy_policy.refuse(thread.id)
            if queued:
                execution_id = execution_id or new_id("exe_")
                entry = {"owner": self.owner, "queuedAt": now_ms(), "startSide": start_side,
                         "executionId": execution_id, "message": message.to_dict()}
                if options is not None:
                    entry[OPTIONS_KEY] = options.state  # the turn keeps them if another process runs it
                await self.store.set_env("inbox", thread.id, message.id, entry)
                self.bus.emit("message_queued", thread.id, {"executionId": execution_id, "messageId": message.id})
                if policy in ("interrupt", "rollback"):
                    await busy_policy.preempt(self, thread.id, rollback=policy == "rollback")
        return self._track(self._execute(thread, agent, message, start_side, execution_id, queued=queued,
                                         claimed=claimed, options=options), thread.id)

    def _track(self, coro: Any, thread_id: str) -> asyncio.Task[ExecutionResult]:
        """Run an execution task, counted as pending on its thread until it ends."""
        task: asyncio.Task[ExecutionResult] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        self._pending[thread_id] = self._pending.get(thread_id, 0) + 1

        def finished(t: asyncio.Task[ExecutionResult]) -> None:
            self._tasks.discard(t)
            left = self._pending.get(thread_id, 1) - 1
            if left > 0:
                self._pending[thread_id] = left
            else:
                self._pending.pop(thread_id, None)

        task.add_done_callback(finished)
        return task

    async def drain(self) -> None:
        """Wait until every started or queued execution (and recovered one) has ended."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _execute(self, thread: ThreadRecord, agent: AgentDefinition, message: Message | None,
                       start_side: Literal["a", "b"], execution_id: str | None = None,
                       resume: ExecutionRecord | None = None, queued: bool = False,
                       claimed: bool = False, options: TurnOptions | None = None) -> ExecutionResult:
        async with self._lock(thread.id):
            if not claimed:
                await self._claim_thread(thread.id)
            try:
                if queued:
                    # the thread may have changed while the message waited: deleted, or handed
                    # to another agent (the new agent answers)
                    current = await self.store.get_thread(thread.id)
                    if current is None:
                        return await self._drop_queued(thread, message, execution_id)
                    entry = await self.store.get_env("inbox", thread.id, message.id) if message is not None else {}
                    if not isinstance(entry, dict) or entry.get("owner", self.owner) != self.owner:
                        # another process took the message over (it thought this one gone)
                        # and delivers it: that delivery is the message's turn
                        return ExecutionResult(thread.id, execution_id or "", "cancelled", "delivered_elsewhere")
                    if (current.agent, current.package) != (thread.agent, thread.package):
                        agent = await self.agent(current.agent, current.package)
                    thread = current
                return await self._execute_locked(thread, agent, message, start_side, execution_id, resume, queued,
                                                  options)
            finally:
                await self._release_thread(thread.id)

    async def _drop_queued(self, thread: ThreadRecord, message: Message | None,
                           execution_id: str | None) -> ExecutionResult:
        """A queued message whose thread was deleted while it waited: nothing is written."""
        execution_id = execution_id or new_id("exe_")
        if message is not None:
            await self.store.delete_env("inbox", thread.id, message.id)
        error = "the thread was deleted before this message's turn"
        self.bus.emit("done", thread.id, {"stopReason": "cancelled", "executionId": execution_id,
                                          "outcome": "thread_deleted", "error": error})
        return ExecutionResult(thread.id, execution_id, "cancelled", "thread_deleted", error=error)

    async def _execute_locked(self, thread: ThreadRecord, agent: AgentDefinition, message: Message | None,
                              start_side: Literal["a", "b"], execution_id: str | None,
                              resume: ExecutionRecord | None, queued: bool,
                              options: TurnOptions | None = None) -> ExecutionResult:
        if resume is not None:
            try:
                return await approvals.resume(self, thread, agent, resume, options)
            except Exception as exc:
                return await self._failed_before_run(thread, resume, message, queued, exc)
        record = ExecutionRecord(thread_id=thread.id, side=start_side, state={"owner": self.owner})
        if options is not None:
            record.state[OPTIONS_KEY] = options.state  # kept for a resume after a crash
        if execution_id:
            record.id = execution_id
        ex = ExecutionState(id=record.id, side=start_side, queued_tools=self._queued_first.pop(record.id, []))
        state = ThreadState(self, thread, agent, thread.package, ex)
        execution = Execution(self, state, agent, record)
        if options is not None:
            options.apply(execution)
        task = asyncio.current_task()
        assert task is not None
        self._running[thread.id] = task
        self._executions[thread.id] = execution
        self._beat()
        try:
            ex.message_history = place_summaries(await self.store.list_messages(thread.id))
            if message is not None and ex.message_history and ex.message_history[-1].role == "tool":
                # a turn left waiting for client tool results, answered through the history
                # with a new message: the conversation moved on, the wait lapses
                for waiting in await self.store.list_executions(thread_id=thread.id, status="waiting"):
                    if waiting.state.get("waitingFor") == client_tools_mod.WAITING_FOR:
                        waiting.status = waiting.stop_reason = "cancelled"
                        waiting.updated_at = now_ms()
                        await self.store.save_execution(waiting)
            if _has_unanswered_calls(ex.message_history):
                for waiting in await self.store.list_executions(thread_id=thread.id, status="waiting"):
                    # a new message moves the conversation on: pending approvals lapse
                    waiting.status = "cancelled"
                    waiting.stop_reason = "cancelled"
                    waiting.updated_at = now_ms()
                    await self.store.save_execution(waiting)
                await self.repair_transcript(state, reason="the call was not approved before the conversation moved on"
                                             if message is not None else "no result was recorded for this call")
            if message is not None:
                setup = await self.side_setup(agent, start_side, thread.package)
                state._hooks = setup.hooks
                stored = await self.create_messages(state, [message], execution=record, hooks=setup.hooks)
                execution.user_message = stored[0]
                state._hooks = None
                if queued:
                    await self.store.delete_env("inbox", thread.id, message.id)
            else:
                await self.store.save_execution(record)
            self.bus.emit("execution_started", thread.id, {"executionId": record.id, "side": start_side})
        except asyncio.CancelledError:
            self._running.pop(thread.id, None)
            self._executions.pop(thread.id, None)
            raise
        except Exception as exc:  # any failure before the loop (a definition, a lazy import, the store)
            self._running.pop(thread.id, None)
            self._executions.pop(thread.id, None)
            return await self._failed_before_run(thread, record, message, queued, exc)
        try:
            result = await observe.run_execution(execution)
        finally:
            self._running.pop(thread.id, None)
            self._executions.pop(thread.id, None)
        if record.id in self._roll_back:
            self._roll_back.discard(record.id)
            if result.stop_reason == "cancelled":  # still holding the thread: nothing runs meanwhile
                await asyncio.shield(busy_policy.roll_back(self, state))
        if ex.queued_tools and result.stop_reason == "complete":
            # queued after the turn's last step: they start the next execution, not vanish
            follow_up = new_id("exe_")
            self._queued_first[follow_up], ex.queued_tools = ex.queued_tools, []
            await self.start(thread.id, execution_id=follow_up)
        if self.auto_titles and thread.title is None and result.stop_reason == "complete" and message is not None:
            task = asyncio.get_running_loop().create_task(self._title(thread, agent, message, result.text))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return result

    async def _failed_before_run(self, thread: ThreadRecord, record: ExecutionRecord, message: Message | None,
                                 queued: bool, exc: Exception) -> ExecutionResult:
        """End an execution that failed before its loop ran: the record settled as an error
        and exactly one ``done``, so no client or heartbeat thinks it still runs."""
        error = str(exc) if isinstance(exc, StandardAgentsError) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, StandardAgentsError):
            log.exception("execution %s of thread %s failed before it started", record.id, thread.id)
        self._running.pop(thread.id, None)
        self._executions.pop(thread.id, None)
        record.status = record.stop_reason = "error"
        record.error = error
        record.updated_at = now_ms()
        try:
            await asyncio.shield(self.store.save_execution(record))
            if queued and message is not None:
                # it would fail the same way after a restart: the error is its answer
                await asyncio.shield(self.store.delete_env("inbox", thread.id, message.id))
        except Exception:
            log.exception("could not settle execution %s", record.id)
        self.bus.emit("error", thread.id, {"message": error, "code": "error"})
        self.bus.emit("done", thread.id, {"stopReason": "error", "executionId": record.id, "outcome": "error", "error": error})
        return ExecutionResult(thread.id, record.id, "error", "error", error=error)

    async def _title(self, thread: ThreadRecord, agent: AgentDefinition, message: Message, reply: str | None) -> None:
        """Give an untitled thread a short title written by its agent's model (a side task)."""
        from ..toolcalls import ask

        try:
            setup = await self.side_setup(agent, "a", thread.package)
            prompt = f"User: {(message.content or '')[:2000]}\nAssistant: {(reply or '')[:2000]}"
            text = await ask(self.provider_for(setup.model), setup.model.model, prompt, max_tokens=24,
                             system="Write a title of at most six words for this conversation. Reply with the title only.")
            title = " ".join(text.strip().strip('"\'').split())[:80]
            if not title:
                return
            fresh = await self.store.get_thread(thread.id)
            if fresh is None or fresh.title:
                return
            updated = await self.store.update_thread(thread.id, title=title)
            thread.title = title
            self.bus.emit("thread_updated", thread.id, {"thread": updated.to_dict()})
        except Exception:
            log.warning("could not title thread %s", thread.id, exc_info=True)

    # crash recovery and cross-process claims (engine/recovery.py) ---------------------------
    async def recover(self) -> list[str]:
        """Settle what dead processes left behind (see :func:`.recovery.recover`)."""
        return await recovery.recover(self)

    async def _claim_thread(self, thread_id: str) -> None:
        await recovery.claim_thread(self, thread_id)

    async def _release_thread(self, thread_id: str) -> None:
        await recovery.release_thread(self, thread_id)

    def _beat(self) -> None:
        recovery.beat(self)

    async def take_over(self) -> list[str]:
        """Resume what gone processes left running, then keep looking on every heartbeat."""
        resumed = await self.recover()
        self._beat()  # the heartbeat also looks for turns of processes that died since
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
        options = TurnOptions.build(output_type=output_type, sampling=sampling, client_tools=client_tools)
        if client_tools is not None:
            record = await self.store.get_execution(execution_id)
            if record is not None:
                thread = await self.get_thread(record.thread_id)
                await self.check_client_tools(await self.agent(thread.agent, thread.package), thread.package,
                                              client_tools)
        return await client_tools_mod.submit_results(self, execution_id, results, options)

    async def stop(self, thread_id: str, *, timeout: float = 10.0,  # noqa: ASYNC109 - a bounded wait
                   rollback: bool = False) -> bool:
        """Cancel the running execution of a thread, here or in another process sharing the
        store; True when one was running and has ended.

        Another process is asked through the event bus (carried between workers by the
        PostgreSQL relay) and this waits up to ``timeout`` seconds for its ``done``."""
        task = self._running.get(thread_id)
        if task is not None:
            task.cancel()
            # asyncio.wait, not await: a cancellation of the caller stays the caller's
            await _ended({task})
            return True
        holder = await self.store.get_env("lock", "", thread_id)
        owner = holder.get("owner") if isinstance(holder, dict) else None
        if owner is None or owner == self.owner:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        with self.bus.subscribe(thread_id) as sub:
            self.bus.emit("stop_requested", thread_id, {"owner": owner, "rollback": rollback})
            # ended once that process no longer holds the thread (its claim goes right after
            # its ``done``); the thread's events wake this up, a slow poll covers their absence
            while (left := deadline - loop.time()) > 0:
                holder = await self.store.get_env("lock", "", thread_id)
                if not (isinstance(holder, dict) and holder.get("owner") == owner):
                    return True
                with contextlib.suppress(TimeoutError):
                    await sub.get(timeout=min(left, 0.25))
        return False

    def on_bus_event(self, event: Any) -> None:
        """A bus listener (attached with a cross-process relay): a ``stop_requested`` for a
        thread this process runs cancels that execution; turns another process handed over
        while shutting down are looked for (and resumed here) at once."""
        if event.type == HANDED_OVER and not event.local and not self.draining and not self._closed:
            recovering = asyncio.get_running_loop().create_task(self._recover_soon())
            self._background.add(recovering)
            recovering.add_done_callback(self._background.discard)
            return
        if event.type == "stop_requested" and event.data.get("owner") == self.owner:
            if event.data.get("rollback"):
                busy_policy.mark_rollback(self, event.thread_id)
            task = self._running.get(event.thread_id)
            if task is not None:
                task.cancel()

    async def _recover_soon(self) -> None:
        try:
            await self.recover()
        except Exception:
            log.warning("could not take over the turns another worker handed over", exc_info=True)

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
        running = {t for t in thread_ids if t in self._running}
        if len(running) < len(thread_ids):
            wanted = set(thread_ids)
            running.update(key for _scope_id, key, _value in await self.store.list_scope("lock") if key in wanted)
        return running

    def subscribe(self, thread_id: str | None = None, *, reasoning: bool = True, maxsize: int | None = None) -> Subscription:
        return self.bus.subscribe(thread_id, reasoning=reasoning, maxsize=maxsize)

    @overload
    async def run(self, agent: str, message: str | None = None, *, output_type: type[_T],
                  user_id: str | None = None, **kwargs: Any) -> ExecutionResult[_T]: ...

    @overload
    async def run(self, agent: str, message: str | None = None, *, output_type: Any = None,
                  user_id: str | None = None, **kwargs: Any) -> ExecutionResult[Any]: ...

    async def run(self, agent: str, message: str | None = None, *, output_type: Any = None,
                  user_id: str | None = None, **kwargs: Any) -> ExecutionResult[Any]:
        """Create a thread for ``agent``, send ``message`` and wait for the end of the turn
        (``output_type``: see :meth:`send`)."""
        TurnOptions.build(output_type=output_type, output_retries=kwargs.get("output_retries"),
                          usage_limits=kwargs.get("usage_limits"))
        thread = await self.create_thread(agent, user_id=user_id)
        return await self.send(thread.id, message, output_type=output_type, **kwargs)

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


async def _ended(tasks: set[asyncio.Task[Any]]) -> None:
    """Wait until tasks have ended without passing the caller's cancellation on to them, and
    consume their outcomes."""
    if tasks:
        await asyncio.wait(tasks)
    for task in tasks:
        if not task.cancelled():
            task.exception()


def _has_unanswered_calls(history: list[Message]) -> bool:
    """Whether some tool call in the history has no result (after a crash or a cancel)."""
    pending: set[str] = set()
    for m in history:
        if m.role == "assistant" and m.tool_calls:
            pending.update(c.id for c in m.tool_calls)
        elif m.role == "tool" and m.tool_call_id:
            pending.discard(m.tool_call_id)
    return bool(pending)


def _without(hooks: HookSet, name: str) -> HookSet:
    clone = HookSet(dict(hooks.by_name))
    clone.by_name.pop(name, None)
    return clone


_unused: Callable[..., Awaitable[Any]] | None = None
