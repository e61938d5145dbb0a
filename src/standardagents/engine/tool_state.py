"""The state a tool that declares what it needs receives: :class:`ToolState`, and the
Protocols a type checker sees it through.

A tool that declares ``uses`` gets a state narrowed to those capabilities (reaching for
another raises :class:`ToolCapabilityError`, which the model reads as the tool's error); its
``variables`` are resolved before it runs; its ``tenvs`` back ``get_env``; and ``network``
gives it ``fetch``. A tool that declares nothing gets the thread's full :class:`ThreadState`
as before, unless strict mode is on (:func:`set_strict_uses`, or
``STANDARDAGENTS_STRICT_TOOL_USES=1``), where a project or packed tool that declares nothing
uses nothing.

For a type checker, each capability is a Protocol (``FilesUse``, ``NetworkUse``, ...); a tool
whose state parameter is typed with one (or with a Protocol combining several) declares those
capabilities by that annotation, and mypy flags a method of a capability it did not take.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..exceptions import StandardAgentsError
from ..files import FileChunk, FileStats, FindResult, GrepResult, ReaddirResult
from ..records import LogRecord, Message, ToolResult
from ..sandbox.types import CodeExecutionResult, Language

if TYPE_CHECKING:
    from ..credentials import Credential
    from ..definitions import ToolDefinition
    from ..fetch import FetchLike, FetchResponse
    from ..skills import SkillsNamespace
    from ..store.records import SubagentRecord
    from .state import ExecutionState, ThreadState

__all__ = [
    "CodeUse",
    "CredentialsUse",
    "EffectsUse",
    "EmptyUsesState",
    "EnvUse",
    "FilesUse",
    "MessagesUse",
    "NetworkUse",
    "SkillsUse",
    "SubagentsUse",
    "ToolCapabilityError",
    "ToolState",
    "ToolVariableError",
    "ToolsUse",
    "UsesAwareExecute",
    "UsesConstrainedState",
    "ValuesUse",
    "resolve_variables",
    "set_strict_uses",
    "strict_uses",
    "tool_state_for",
]


class ToolCapabilityError(StandardAgentsError):
    """A tool reached for a state capability it did not declare in ``uses``."""


class ToolVariableError(StandardAgentsError):
    """A tool's variable has no value anywhere and no default, or a value of the wrong type."""


#: which ThreadState members each capability opens
_MEMBERS: dict[str, tuple[str, ...]] = {
    "messages": ("get_messages", "get_message", "inject_message", "update_message", "execution"),
    "files": ("write_file", "read_file", "list_files", "delete_file", "stat", "readdir", "find", "grep",
              "read_file_chunk", "read_file_stream"),
    "env": ("get_env", "set_env"),
    "values": ("get_value", "set_value", "list_values"),
    "subagents": ("list_subagents", "get_subagent"),
    "code": ("run_code",),
    "network": ("fetch",),
    "tools": ("queue_tool", "invoke_tool"),
    "effects": ("schedule_effect",),
    "credentials": ("credential",),
    "skills": ("skills",),
}
_CAPABILITY_OF = {member: cap for cap, members in _MEMBERS.items() for member in members}
#: what every tool may read: who and where it runs, and its own log and events
_ALWAYS = frozenset({"thread", "agent", "namespace", "thread_id", "agent_id", "user_id", "created_at", "metadata",
                     "parent_id", "threadId", "agentId", "userId", "emit", "log", "get_logs"})

_strict = os.environ.get("STANDARDAGENTS_STRICT_TOOL_USES", "").strip().lower() in ("1", "true", "yes", "on")


def set_strict_uses(enabled: bool) -> None:
    """Strict mode: a project or packed tool that declares no ``uses`` gets a state with no
    capability (identity, ``log`` and ``emit`` only) instead of the full ``ThreadState``."""
    global _strict
    _strict = enabled


def strict_uses() -> bool:
    return _strict


class ToolState:
    """A thread's state as one call of one tool may use it (the spec's ``UsesConstrainedState``).

    ``variables`` holds the tool's resolved variables. Members of capabilities the tool did
    not declare raise :class:`ToolCapabilityError`; ``runtime`` is never reachable from a
    tool that declared its uses."""

    __slots__ = ("_allowed", "_fetch", "_inner", "_tool", "tool_name", "variables")

    def __init__(self, inner: ThreadState, tool: ToolDefinition, allowed: frozenset[str] | None,
                 variables: dict[str, Any]) -> None:
        self._inner = inner
        self._tool = tool
        self._allowed = allowed  # None: every capability (the tool declared no uses)
        self._fetch: FetchLike | None = None
        self.tool_name = tool.name
        self.variables: Mapping[str, Any] = variables

    def __repr__(self) -> str:
        uses = "all" if self._allowed is None else ", ".join(sorted(self._allowed)) or "none"
        return f"ToolState(tool={self.tool_name!r}, thread={self._inner.thread_id!r}, uses={uses})"

    def __getattr__(self, name: str) -> Any:
        if name in _ALWAYS:
            return getattr(self._inner, name)
        capability = _CAPABILITY_OF.get(name)
        if capability is None:
            if self._allowed is None and not name.startswith("_"):
                return getattr(self._inner, name)
            raise AttributeError(f"a tool's state has no {name!r}"
                                 + (" (a tool that declares its uses cannot reach the runtime)" if name == "runtime" else ""))
        self._check(capability, name)
        return getattr(self._inner, name)

    def _check(self, capability: str, member: str) -> None:
        if self._allowed is not None and capability not in self._allowed:
            declared = ", ".join(sorted(self._allowed)) or "nothing"
            raise ToolCapabilityError(f"tool {self.tool_name!r} did not declare the {capability!r} capability "
                                      f"(state.{member}); it declares {declared}. Add {capability!r} to the tool's uses.")

    # env: the tool's tenvs come after every other source ------------------------------------
    async def get_env(self, key: str, default: Any = None) -> Any:
        self._check("env", "get_env")
        value = await self._inner.get_env(key)
        if value is None:
            value = self._tool.tenvs.get(key)
        return default if value is None else value

    # values: the thread's user's values -------------------------------------------------------
    async def get_value(self, key: str, default: Any = None) -> Any:
        """A value of the thread's user (``default`` when unset or the thread has no user)."""
        self._check("values", "get_value")
        user = self._inner.user_id
        value = await self._inner.runtime.store.get_user_value(user, key) if user else None
        return default if value is None else value

    async def set_value(self, key: str, value: Any) -> None:
        self._check("values", "set_value")
        user = self._inner.user_id
        if not user:
            raise StandardAgentsError(f"tool {self.tool_name!r}: this thread has no user to keep the value {key!r} for")
        await self._inner.runtime.store.set_user_value(user, key, value)

    async def list_values(self) -> dict[str, Any]:
        self._check("values", "list_values")
        user = self._inner.user_id
        return await self._inner.runtime.store.list_user_values(user) if user else {}

    # network ----------------------------------------------------------------------------------
    @property
    def fetch(self) -> FetchLike:
        """The HTTP client this call may use, held to the tool's ``network`` declaration."""
        self._check("network", "fetch")
        if self._tool.network is None:
            raise ToolCapabilityError(f"tool {self.tool_name!r} names no hosts it may fetch from (network=...)")
        if self._fetch is None:
            from ..fetch import create_fetch

            self._fetch = create_fetch(self._inner, self._tool.name, self._tool.network)
        return self._fetch


async def resolve_variables(state: ThreadState, tool: ToolDefinition) -> dict[str, Any]:
    """The tool's variables, each from the first env source that sets it (thread, user,
    instance, the agent's env, the tool's tenvs), else its default; raises
    :class:`ToolVariableError` naming the tool, the variable and where it looked."""
    if not tool.variables:
        return {}
    store = state.runtime.store
    thread_id, user_id = state.thread_id, state.user_id
    agent_env = state.agent.env if state.agent is not None else {}
    out: dict[str, Any] = {}
    for name, var in tool.variables.items():
        key = var.env_key or name
        sources = [(f"thread {thread_id}", "thread", thread_id)]
        if user_id:
            sources.append((f"user {user_id}", "user", user_id))
        sources.append(("instance", "instance", ""))
        value: Any = None
        where = ""
        for label, scope, scope_id in sources:
            value = await store.get_env(scope, scope_id, key)
            if value is not None:
                where = f"the {label} env"
                break
        if value is None and agent_env.get(key) is not None:
            value, where = agent_env[key], "the agent's env"
        if value is None and tool.tenvs.get(key) is not None:
            value, where = tool.tenvs[key], "the tool's tenvs"
        if value is None:
            if var.has_default:
                out[name] = var.default
                continue
            if var.optional:
                out[name] = None
                continue
            looked = ", ".join([label for label, _, _ in sources] + ["the agent's env", "the tool's tenvs"])
            raise ToolVariableError(f"tool {tool.name!r} needs the variable {name!r} ({var.type}"
                                    f"{', env key ' + repr(key) if key != name else ''}) and none is set: looked in "
                                    f"{looked}, and it has no default. Set it with set_env (thread, user or instance scope).")
        from ..definitions.variables import coerce_variable

        try:
            out[name] = coerce_variable(var.type, value)
        except ValueError as exc:
            raise ToolVariableError(f"tool {tool.name!r}: the variable {name!r} from {where} is not a {var.type}: "
                                    f"{exc}") from None
    return out


async def tool_state_for(state: ThreadState, tool: ToolDefinition) -> ToolState:
    """The state one call of ``tool`` receives (variables resolved)."""
    allowed = frozenset(tool.uses) if tool.uses is not None else None
    if allowed is None and _strict and (tool.source_file is not None or tool.package is not None):
        allowed = frozenset()
    return ToolState(state, tool, allowed, await resolve_variables(state, tool))


def needs_tool_state(tool: ToolDefinition) -> bool:
    """Whether a call of ``tool`` gets a :class:`ToolState` instead of the thread's state (a
    flag decided when the tool was defined, so a tool that declares nothing pays one read)."""
    if tool._wraps_state:
        return True
    return _strict and (tool.wants_state or tool.call_style == "state_args") and (
        tool.source_file is not None or tool.package is not None)


# Typing: one Protocol per capability ----------------------------------------------------------
class EmptyUsesState(Protocol):
    """What every tool's state has (the spec's ``EmptyUsesState``): who and where it runs,
    its resolved variables, and its own log and events."""

    @property
    def thread_id(self) -> str: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def user_id(self) -> str | None: ...
    @property
    def metadata(self) -> dict[str, Any]: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def variables(self) -> Mapping[str, Any]: ...
    async def log(self, message: str, *, level: str = "info", data: dict[str, Any] | None = None) -> None: ...
    async def emit(self, event: str, data: Any = None) -> None: ...
    async def get_logs(self, limit: int = 100, offset: int = 0) -> list[LogRecord]: ...


class FilesUse(EmptyUsesState, Protocol):
    async def write_file(self, path: str, data: bytes | str, *, mime_type: str | None = None) -> Any: ...
    async def read_file(self, path: str) -> bytes | None: ...
    async def list_files(self, prefix: str = "") -> list[Any]: ...
    async def delete_file(self, path: str) -> bool: ...
    async def stat(self, path: str) -> FileStats | None: ...
    async def readdir(self, path: str = "/") -> ReaddirResult: ...
    async def find(self, pattern: str, *, limit: int = 1000) -> FindResult: ...
    async def grep(self, pattern: str, *, glob: str | None = None, ignore_case: bool = False,
                   max_matches: int = 1000) -> GrepResult: ...
    async def read_file_chunk(self, path: str, offset: int = 0, length: int = 1 << 20) -> FileChunk | None: ...
    def read_file_stream(self, path: str, *, chunk_size: int = 1 << 20, offset: int = 0,
                         length: int | None = None) -> AsyncIterator[FileChunk]: ...


class MessagesUse(EmptyUsesState, Protocol):
    @property
    def execution(self) -> ExecutionState | None: ...
    async def get_messages(self, limit: int | None = None, offset: int = 0, *, include_silent: bool = True,
                           newest_first: bool = False) -> list[Message]: ...
    async def get_message(self, message_id: str) -> Message | None: ...
    async def inject_message(self, content: str | None = None, *, role: str = "user", silent: bool = False,
                             side: Literal["a", "b"] | None = None, attachments: list[dict[str, Any]] | None = None,
                             metadata: dict[str, Any] | None = None, name: str | None = None) -> Message: ...
    async def update_message(self, message_id: str, updates: dict[str, Any]) -> Message: ...


class EnvUse(EmptyUsesState, Protocol):
    async def get_env(self, key: str, default: Any = None) -> Any: ...
    async def set_env(self, key: str, value: Any, *, scope: str = "thread") -> None: ...


class ValuesUse(EmptyUsesState, Protocol):
    async def get_value(self, key: str, default: Any = None) -> Any: ...
    async def set_value(self, key: str, value: Any) -> None: ...
    async def list_values(self) -> dict[str, Any]: ...


class SubagentsUse(EmptyUsesState, Protocol):
    async def list_subagents(self) -> list[SubagentRecord]: ...
    async def get_subagent(self, subagent_id: str) -> SubagentRecord | None: ...


class CodeUse(EmptyUsesState, Protocol):
    async def run_code(self, code: str, *, language: Language = "python", timeout: float = ...,  # noqa: ASYNC109
                       memory_limit: int = ..., network: bool = False,
                       files: list[str] | None = None) -> CodeExecutionResult: ...


class NetworkUse(EmptyUsesState, Protocol):
    @property
    def fetch(self) -> FetchLike: ...


class ToolsUse(EmptyUsesState, Protocol):
    async def invoke_tool(self, name: str, args: dict[str, Any] | None = None) -> ToolResult: ...
    async def queue_tool(self, name: str, args: dict[str, Any] | None = None) -> Any: ...


class EffectsUse(EmptyUsesState, Protocol):
    async def schedule_effect(self, name: str, args: dict[str, Any] | None = None, *, delay: float = 0.0) -> str: ...


class CredentialsUse(EmptyUsesState, Protocol):
    async def credential(self, name: str, *, scope: str | None = None) -> Credential: ...


class SkillsUse(EmptyUsesState, Protocol):
    @property
    def skills(self) -> SkillsNamespace: ...


for _protocol, _uses in ((EmptyUsesState, ()), (FilesUse, ("files",)), (MessagesUse, ("messages",)),
                         (EnvUse, ("env",)), (ValuesUse, ("values",)), (SubagentsUse, ("subagents",)),
                         (CodeUse, ("code",)), (NetworkUse, ("network",)), (ToolsUse, ("tools",)),
                         (EffectsUse, ("effects",)), (CredentialsUse, ("credentials",)), (SkillsUse, ("skills",))):
    _protocol.__sa_uses__ = frozenset(_uses)  # type: ignore[attr-defined]  # read by define_tool

#: the state a tool's handler is typed with (the spec's ``UsesConstrainedState``); compose the
#: capability Protocols for several (the spec's ``ResolveUsesState``)
UsesConstrainedState = ToolState
#: a handler that receives a narrowed state (the spec's ``UsesAwareExecute``)
UsesAwareExecute = Callable[..., Any]

# FetchResponse is named in the docs of NetworkUse users
if TYPE_CHECKING:
    _ = FetchResponse
