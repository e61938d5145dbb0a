"""``ThreadState``: what tools, hooks and endpoints see of a thread, and ``ExecutionState``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..exceptions import StandardAgentsError
from ..files import FileChunk, FileStats, FindResult, GrepResult, ReaddirResult, check_regex
from ..records import Fence, LogRecord, Message, ThreadRecord, ToolResult
from ..sandbox.types import DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT, CodeExecutionResult, Language

if TYPE_CHECKING:
    from ..credentials import Credential
    from ..definitions import AgentDefinition
    from ..events import EventBus
    from ..registry import Registry
    from ..skills import SkillsNamespace
    from ..store.base import Store
    from ..store.records import SubagentRecord
    from .results import ExecutionResult

__all__ = ["ExecutionState", "StateHost", "ThreadState"]


@dataclass
class ExecutionState:
    """The live state of a running execution (the spec's ``ExecutionState``)."""

    id: str
    side: Literal["a", "b"] = "a"
    step_count: int = 0
    side_steps: dict[str, int] = field(default_factory=lambda: {"a": 0, "b": 0})
    session_turns: int = 0
    stopped: bool = False
    stopped_by: Literal["a", "b"] | None = None
    stop_reason: str | None = None
    outcome: str | None = None
    message_history: list[Message] = field(default_factory=list)
    #: bumped when a message of the history is replaced (not appended), to drop derived caches
    history_version: int = 0
    forced_side: Literal["a", "b"] | None = None
    queued_tools: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: ids of the messages this execution stored (what a rollback removes)
    written: list[str] = field(default_factory=list)
    #: on-demand prompts: tools loaded so far (carried ones first), and tools called this turn
    loaded_tools: list[str] = field(default_factory=list)
    used_tools: list[str] = field(default_factory=list)
    status: str | None = None
    result: dict[str, Any] | None = None
    #: hooks and guardrails run since the last model step was recorded (None until one runs);
    #: the next step's record takes them, each entry naming the step it ran in
    hooks_run: list[dict[str, Any]] | None = None
    guardrails_run: list[dict[str, Any]] | None = None
    #: what this execution's writes are conditional on (its id and the epoch it was claimed at)
    fence: Fence | None = None
    #: per side, the system prompt and tool schemas the last step recorded (a step's record
    #: carries them only when they changed, so the first step of a turn holds them once)
    sent_content: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def note_hook(self, hook: str, event: str, seconds: float, outcome: str, error: str | None = None) -> None:
        """A hook ran: ``outcome`` is ``ok``, ``changed`` (a transforming hook returned a new
        value) or ``error``."""
        entry: dict[str, Any] = {"name": hook, "event": event, "durationMs": round(seconds * 1000, 3),
                                 "outcome": outcome, "step": self.step_count}
        if error is not None:
            entry["error"] = error[:300]
        if self.hooks_run is None:
            self.hooks_run = []
        self.hooks_run.append(entry)

    def note_guardrail(self, name: str, kind: str, tripped: bool) -> None:
        """A guardrail vetted text; an output guardrail checks a streamed reply several times,
        listed once per step (tripped if any check tripped)."""
        if self.guardrails_run is None:
            self.guardrails_run = []
        for entry in self.guardrails_run:
            if entry["name"] == name and entry["kind"] == kind and entry["step"] == self.step_count:
                entry["tripped"] = entry["tripped"] or tripped
                return
        self.guardrails_run.append({"name": name, "kind": kind, "tripped": tripped, "step": self.step_count})

    def take_checks(self) -> dict[str, list[dict[str, Any]]] | None:
        """The hooks and guardrails noted so far, for a step's record; the notes start afresh."""
        hooks, guards = self.hooks_run, self.guardrails_run
        if hooks is None and guards is None:
            return None
        self.hooks_run = self.guardrails_run = None
        taken: dict[str, list[dict[str, Any]]] = {}
        if hooks:
            taken["hooks"] = hooks
        if guards:
            taken["guardrails"] = guards
        return taken

    def force_side(self, side: Literal["a", "b"]) -> None:
        """Make ``side`` play the next turn (dual_ai)."""
        self.forced_side = side

    # spec-style aliases
    @property
    def stepCount(self) -> int:
        return self.step_count

    @property
    def messageHistory(self) -> list[Message]:
        return self.message_history


class StateHost(Protocol):
    """What a :class:`ThreadState` asks of the runtime it belongs to: the store and bus its
    reads and events go through, the registry, and the engine's operations on the thread
    (hooks run around them). Named here, beside the state it serves, so the engine's layers
    hold for annotations too."""

    @property
    def store(self) -> Store: ...

    @property
    def bus(self) -> EventBus: ...

    @property
    def registry(self) -> Registry: ...

    async def engine_create_message(self, state: ThreadState, msg: Message, *, injected: bool) -> Message: ...

    async def engine_update_message(self, state: ThreadState, message_id: str, updates: dict[str, Any]) -> Message: ...

    async def engine_run_queued_tool(self, state: ThreadState, name: str,
                                     args: dict[str, Any]) -> asyncio.Task[ExecutionResult]: ...

    async def engine_invoke_tool(self, state: ThreadState, name: str, args: dict[str, Any]) -> ToolResult: ...

    async def schedule_effect(self, state: ThreadState, name: str, args: dict[str, Any], *, delay: float = 0.0) -> str: ...


class ThreadState:
    """A thread as user code sees it: identity, messages, files, env, events, execution.

    Created per execution (or per endpoint call); cheap to build.
    """

    def __init__(self, runtime: StateHost, thread: ThreadRecord, agent: AgentDefinition | None,
                 namespace: str | None = None, execution: ExecutionState | None = None) -> None:
        self.runtime = runtime
        self.thread = thread
        self.agent = agent
        self.namespace = namespace
        self.execution = execution
        self._hooks: Any = None

    # identity ------------------------------------------------------------------------------
    @property
    def thread_id(self) -> str:
        return self.thread.id

    @property
    def agent_id(self) -> str:
        return self.thread.agent

    @property
    def user_id(self) -> str | None:
        return self.thread.user_id

    @property
    def created_at(self) -> int:
        return self.thread.created_at

    @property
    def metadata(self) -> dict[str, Any]:
        return self.thread.metadata

    @property
    def parent_id(self) -> str | None:
        return self.thread.parent_id

    # messages ------------------------------------------------------------------------------
    async def get_messages(self, limit: int | None = None, offset: int = 0, *, include_silent: bool = True,
                           newest_first: bool = False) -> list[Message]:
        """Stored messages in order (oldest first unless ``newest_first``)."""
        return await self.runtime.store.list_messages(self.thread.id, limit=limit, offset=offset,
                                                      include_silent=include_silent, newest_first=newest_first)

    async def get_message(self, message_id: str) -> Message | None:
        return await self.runtime.store.get_message(message_id)

    async def inject_message(self, content: str | None = None, *, role: str = "user", silent: bool = False,
                             side: Literal["a", "b"] | None = None, attachments: list[dict[str, Any]] | None = None,
                             metadata: dict[str, Any] | None = None, name: str | None = None) -> Message:
        """Add a message now. ``before_create_message`` may rewrite it; if that hook raises,
        :class:`~standardagents.exceptions.InjectionRejected` is raised and nothing is stored.
        During an execution the message joins ``execution.message_history`` at once."""
        msg = Message(thread_id=self.thread.id, role=role, content=content, silent=silent, side=side,  # type: ignore[arg-type]
                      attachments=list(attachments or []), metadata=dict(metadata or {}), name=name)
        return await self.runtime.engine_create_message(self, msg, injected=True)

    async def update_message(self, message_id: str, updates: dict[str, Any]) -> Message:
        """Change a stored message; ``before/after_update_message`` hooks run."""
        return await self.runtime.engine_update_message(self, message_id, updates)

    # tools ---------------------------------------------------------------------------------
    async def queue_tool(self, name: str, args: dict[str, Any] | None = None) -> asyncio.Task[ExecutionResult] | None:
        """Run a tool as if the model had called it. Inside a running execution (a tool or a
        hook of it) it runs at the execution's next step. Anywhere else (an endpoint, a
        script) it starts an execution, after the thread's running one if any: the tool
        runs first, its call and result are stored, and the agent's turn goes on with a
        model step. That execution's task is returned (await it for the turn's result).
        An unknown tool name raises ``NotFoundError`` before anything starts."""
        if self.execution is not None and not self.execution.stopped:
            self.execution.queued_tools.append((name, dict(args or {})))
            return None
        return await self.runtime.engine_run_queued_tool(self, name, dict(args or {}))

    async def invoke_tool(self, name: str, args: dict[str, Any] | None = None) -> ToolResult:
        """Run a tool now and return its result; nothing is stored."""
        return await self.runtime.engine_invoke_tool(self, name, dict(args or {}))

    # files ---------------------------------------------------------------------------------
    async def write_file(self, path: str, data: bytes | str, *, mime_type: str | None = None) -> Any:
        raw = data.encode() if isinstance(data, str) else data
        return await self.runtime.store.write_file(self.thread.id, path, raw, mime_type=mime_type)

    async def read_file(self, path: str) -> bytes | None:
        return await self.runtime.store.read_file(self.thread.id, path)

    async def list_files(self, prefix: str = "") -> list[Any]:
        return await self.runtime.store.list_files(self.thread.id, prefix)

    async def delete_file(self, path: str) -> bool:
        return await self.runtime.store.delete_file(self.thread.id, path)

    async def stat(self, path: str) -> FileStats | None:
        """A file's size, type and times, or ``is_directory`` for a path with files under it."""
        return await self.runtime.store.stat_path(self.thread.id, path)

    async def readdir(self, path: str = "/") -> ReaddirResult:
        """The immediate children of a directory (subdirectories first); raises
        ``FileNotFoundError`` when nothing lies under ``path``."""
        result = await self.runtime.store.readdir(self.thread.id, path)
        if result is None:
            raise FileNotFoundError(f"thread {self.thread.id!r} has no directory {path!r}")
        return result

    async def find(self, pattern: str, *, limit: int = 1000) -> FindResult:
        """Files whose path matches a glob: ``*`` and ``?`` within a segment, ``**`` across."""
        return await self.runtime.store.find_files(self.thread.id, pattern, limit=limit)

    async def grep(self, pattern: str, *, glob: str | None = None, ignore_case: bool = False,
                   max_matches: int = 1000) -> GrepResult:
        """Lines matching a regular expression across the thread's text files, with each
        file's path and line number; ``glob`` narrows the files. A bad pattern raises
        ``ValueError``."""
        check_regex(pattern)
        return await self.runtime.store.grep_files(self.thread.id, pattern, ignore_case=ignore_case,
                                                   glob=glob, max_matches=max_matches)

    async def read_file_chunk(self, path: str, offset: int = 0, length: int = 1 << 20) -> FileChunk | None:
        """Part of a large file without loading it whole; ``None`` when there is no file."""
        if offset < 0 or length < 1:
            raise ValueError(f"offset must be >= 0 and length >= 1 (got {offset}, {length})")
        return await self.runtime.store.read_file_chunk(self.thread.id, path, offset, length)

    async def read_file_stream(self, path: str, *, chunk_size: int = 1 << 20, offset: int = 0,
                               length: int | None = None) -> AsyncIterator[FileChunk]:
        """A file in chunks of ``chunk_size`` bytes (from ``offset``, ``length`` bytes in
        all when given); raises ``FileNotFoundError`` when there is no file."""
        end = None if length is None else offset + length
        while True:
            want = chunk_size if end is None else min(chunk_size, end - offset)
            if want <= 0:
                return
            chunk = await self.read_file_chunk(path, offset, want)
            if chunk is None:
                raise FileNotFoundError(f"thread {self.thread.id!r} has no file {path!r}")
            if chunk.data:
                yield chunk
            if chunk.eof or not chunk.data:
                return
            offset += chunk.length

    # code ----------------------------------------------------------------------------------
    async def run_code(self, code: str, *, language: Language = "python", timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 (a limit the sandbox enforces)
                       memory_limit: int = DEFAULT_MEMORY_LIMIT, network: bool = False,
                       files: list[str] | None = None) -> CodeExecutionResult:
        """Run code in the sandbox (Python on Pyodide, or JavaScript/TypeScript, on Deno),
        never in this process. The thread's files (all, or those matching ``files``) are its
        workspace, and what the code changes there is written back. Ends ``completed``,
        ``error``, ``timeout`` or ``killed`` (memory over ``memory_limit`` bytes); raises
        ``SandboxUnavailable`` when the sandbox extra is missing."""
        from ..sandbox.thread import run_thread_code

        return await run_thread_code(self, code, language=language, timeout=timeout, memory_limit=memory_limit,
                                     network=network, files=files)

    # skills --------------------------------------------------------------------------------
    @cached_property
    def skills(self) -> SkillsNamespace:
        """The skills this thread can use (the project's or its package's, its user's, its
        own): list, read, install from files, remove. Installed ones are read from the store
        once per ``ThreadState``, that is once per turn."""
        from ..skills import SkillsNamespace

        return SkillsNamespace(self)

    # env -----------------------------------------------------------------------------------
    async def get_env(self, key: str, default: Any = None) -> Any:
        """An env value: thread, then user, then instance, then the agent's ``env``."""
        store = self.runtime.store
        value = await store.get_env("thread", self.thread.id, key)
        if value is None and self.thread.user_id:
            value = await store.get_env("user", self.thread.user_id, key)
        if value is None:
            value = await store.get_env("instance", "", key)
        if value is None and self.agent is not None:
            value = self.agent.env.get(key)
        return default if value is None else value

    async def set_env(self, key: str, value: Any, *, scope: str = "thread") -> None:
        """Write an env value in the ``thread``, ``user`` or ``instance`` scope (the runtime's
        own scopes are not writable from here)."""
        if scope not in ("thread", "user", "instance"):
            raise StandardAgentsError(f"set_env: unknown scope {scope!r}; use thread, user or instance")
        scope_id = self.thread.id if scope == "thread" else (self.thread.user_id or "") if scope == "user" else ""
        await self.runtime.store.set_env(scope, scope_id, key, value)

    # credentials ---------------------------------------------------------------------------
    async def credential(self, name: str, *, scope: str | None = None) -> Credential:
        """The credential ``name`` the thread's user granted to the tool running now (with
        ``scope`` among its scopes, when given): its ``secret`` is for the API the tool calls,
        never for the model. Raises ``CredentialError`` (the tool's error result, which the
        model can explain) when it is absent, expired, revoked or not granted to this tool.
        Every call is audited in the thread's logs, without the secret."""
        from ..credentials import use_credential

        return await use_credential(self, name, scope=scope)

    # events and logs -----------------------------------------------------------------------
    async def emit(self, event: str, data: Any = None) -> None:
        """Send a custom event to the thread's live clients."""
        payload = data if isinstance(data, dict) else {"value": data}
        self.runtime.bus.emit(event, self.thread.id, json.loads(json.dumps(payload, default=str)))

    async def log(self, message: str, *, level: str = "info", data: dict[str, Any] | None = None) -> None:
        record = await self.runtime.store.add_log(LogRecord(self.thread.id, level, message, data))
        self.runtime.bus.emit("log", self.thread.id, {"level": level, "message": message, "data": data, "id": record.id})

    async def get_logs(self, limit: int = 100, offset: int = 0) -> list[LogRecord]:
        return await self.runtime.store.list_logs(self.thread.id, limit=limit, offset=offset)

    # effects -------------------------------------------------------------------------------
    async def schedule_effect(self, name: str, args: dict[str, Any] | None = None, *, delay: float = 0.0) -> str:
        """Persist an effect to run ``delay`` seconds from now; returns its id."""
        return await self.runtime.schedule_effect(self, name, dict(args or {}), delay=delay)

    # subagents ----------------------------------------------------------------------------
    async def list_subagents(self) -> list[SubagentRecord]:
        """This thread's subagent runs, oldest first: child thread id, status and result."""
        return await self.runtime.store.list_subagents(self.thread.id)

    async def get_subagent(self, subagent_id: str) -> SubagentRecord | None:
        """One of this thread's subagent runs, by its id or its child thread's id."""
        for link in await self.runtime.store.list_subagents(self.thread.id):
            if subagent_id in (link.id, link.child_thread_id):
                return link
        return None

    # spec-style aliases --------------------------------------------------------------------
    @property
    def threadId(self) -> str:
        return self.thread.id

    @property
    def agentId(self) -> str:
        return self.thread.agent

    @property
    def userId(self) -> str | None:
        return self.thread.user_id
