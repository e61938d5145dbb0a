"""Client tools: tools the caller of a turn declares and runs itself.

A turn may be given client tools (function schemas) beside the agent's own tools. The model
sees both; the agent's own calls run here as usual, while calls of a client tool pause the
execution: it is stored as ``waiting`` (like an approval wait) with the calls the client must
answer, so the wait survives a restart and any worker can continue it. Submitting the
results (:func:`.client_results.submit_results`) stores them as the calls' tool results and continues the
same execution. Nothing here knows a wire protocol: the OpenAI doors (and later AG-UI's
front-end tools) only translate to and from this surface.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..exceptions import StandardAgentsError
from ..records import ExecutionRecord, ToolCall, new_id

if TYPE_CHECKING:
    from .ports import StoreHost

__all__ = ["WAITING_FOR", "ClientToolError", "ClientTools", "client_tools", "find_waiting", "forget_calls",
           "forget_thread", "unique_client_ids"]

#: the ``waitingFor`` mark of an execution paused for client tool results
WAITING_FOR = "client_tools"
#: call id -> (thread, execution) index, so results find their turn without a thread id
_INDEX_SCOPE, _INDEX_ID = "system", "client_tool_calls"

_CHOICES = ("none", "auto", "required")


class ClientToolError(StandardAgentsError):
    """Client tools or their results that cannot be used: a bad schema, a name clashing with
    one of the agent's tools, a ``tool_choice`` naming no tool, results of calls no turn waits for."""


@dataclass(frozen=True)
class ClientTools:
    """The client tools of a turn: function schemas (``{"type": "function", "function":
    {name, description, parameters}}``), the caller's ``tool_choice`` for the first model
    request of the turn (or of its continuation), and whether calls may come in parallel."""

    schemas: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None

    @property
    def names(self) -> set[str]:
        return {s["function"]["name"] for s in self.schemas}

    def to_state(self) -> dict[str, Any]:
        return {"schemas": self.schemas, "toolChoice": self.tool_choice, "parallelToolCalls": self.parallel_tool_calls}

    @classmethod
    def from_state(cls, data: Any) -> ClientTools | None:
        if not isinstance(data, dict):
            return None
        return cls(list(data.get("schemas") or []), data.get("toolChoice"), data.get("parallelToolCalls"))


def client_tools(schemas: Any, tool_choice: Any = None, parallel_tool_calls: Any = None) -> ClientTools:
    """Checked client tools (:class:`ClientToolError` naming what is wrong)."""
    if schemas is None:
        schemas = []
    if not isinstance(schemas, list):
        raise ClientToolError("tools must be a list of function tools")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, tool in enumerate(schemas):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            raise ClientToolError(f"tools[{i}] must be {{'type': 'function', 'function': {{'name', 'parameters'...}}}}")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise ClientToolError(f"tools[{i}].function.name must be a non-empty string")
        if name in seen:
            raise ClientToolError(f"tools[{i}]: the tool {name!r} is declared twice")
        seen.add(name)
        parameters = fn.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise ClientToolError(f"tools[{i}].function.parameters must be a JSON Schema object")
        clean: dict[str, Any] = {"name": name, "parameters": parameters or {"type": "object", "properties": {}}}
        if isinstance(fn.get("description"), str):
            clean["description"] = fn["description"]
        if isinstance(fn.get("strict"), bool):
            clean["strict"] = fn["strict"]
        out.append({"type": "function", "function": clean})
    if tool_choice is not None and tool_choice not in _CHOICES:
        named = tool_choice.get("function") if isinstance(tool_choice, dict) else None
        if not isinstance(tool_choice, dict) or tool_choice.get("type") != "function" or not isinstance(named, dict) \
                or not isinstance(named.get("name"), str):
            raise ClientToolError("tool_choice must be 'none', 'auto', 'required' or "
                                  "{'type': 'function', 'function': {'name': ...}}")
        tool_choice = {"type": "function", "function": {"name": named["name"]}}
    if parallel_tool_calls is not None and not isinstance(parallel_tool_calls, bool):
        raise ClientToolError("parallel_tool_calls must be a boolean")
    return ClientTools(out, tool_choice, parallel_tool_calls)


def check_against(client: ClientTools, agent_tools: set[str]) -> None:
    """Refuse client tools named like one of the agent's tools (whose call would be whose?),
    and a named ``tool_choice`` no tool answers to."""
    clash = sorted(client.names & agent_tools)
    if clash:
        raise ClientToolError(f"client tool {clash[0]!r} has the name of one of the agent's own tools; "
                              "rename it")
    choice = client.tool_choice
    if isinstance(choice, dict) and choice["function"]["name"] not in client.names | agent_tools:
        raise ClientToolError(f"tool_choice names the tool {choice['function']['name']!r}, which is "
                              "neither a client tool nor one of the agent's tools")


#: a model's call id shorter than this may repeat across threads (``call_0``): replaced
_UNIQUE_ENOUGH = 16


def unique_client_ids(calls: list[ToolCall], names: set[str]) -> list[ToolCall]:
    """The reply's calls, client calls with ids too short to be unique given new ones, so
    results find their turn by call id alone (some local models number their calls)."""
    return [ToolCall(new_id("call_"), c.name, c.arguments) if c.name in names and len(c.id or "") < _UNIQUE_ENOUGH
            else c for c in calls]


async def index_calls(rt: StoreHost, record: ExecutionRecord, call_ids: list[str]) -> None:
    for call_id in call_ids:
        await rt.store.set_env(_INDEX_SCOPE, _INDEX_ID, call_id, {"thread": record.thread_id, "execution": record.id})


async def forget_calls(rt: StoreHost, record: ExecutionRecord) -> None:
    """Drop the call-id index rows of a client wait that ended (answered, lapsed, deleted)."""
    for call in record.state.get("clientCalls", []):
        await rt.store.delete_env(_INDEX_SCOPE, _INDEX_ID, call["id"])


async def forget_thread(rt: StoreHost, thread_id: str) -> None:
    """Drop the index rows of the thread's client waits (before the thread is deleted: the
    index lives outside the thread's own rows)."""
    for record in await rt.store.list_executions(thread_id=thread_id, status="waiting"):
        if record.state.get("waitingFor") == WAITING_FOR:
            await forget_calls(rt, record)


async def find_waiting(rt: StoreHost, call_ids: list[str], thread_id: str | None = None) -> ExecutionRecord | None:
    """The execution waiting for the results of ``call_ids`` (on ``thread_id`` when given;
    else found through the calls' ids), or None."""
    if thread_id is None:
        for call_id in call_ids:
            entry = await rt.store.get_env(_INDEX_SCOPE, _INDEX_ID, call_id)
            if isinstance(entry, dict):
                thread_id = str(entry["thread"])
                break
        else:
            return None
    wanted = set(call_ids)
    for record in await rt.store.list_executions(thread_id=thread_id, status="waiting"):
        if record.state.get("waitingFor") != WAITING_FOR:
            continue
        if wanted & {c["id"] for c in record.state.get("clientCalls", [])}:
            return record
    return None
