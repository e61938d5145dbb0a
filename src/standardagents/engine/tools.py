"""Running one tool call: parse, validate, execute, normalise, and the tool hooks.

Every failure becomes an error result the model can read (unknown tool, bad arguments,
a raising tool); nothing here raises into the turn loop.
"""

from __future__ import annotations

import asyncio
import base64
import json
import traceback
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .. import observability as observe
from ..credentials import tool_running
from ..definitions import ToolDefinition, define_tool
from ..exceptions import ModelRetry
from ..records import Message, ToolCall, ToolResult
from ..toolcalls import parse_tool_arguments
from .context import dumps
from .tool_state import needs_tool_state, tool_state_for

if TYPE_CHECKING:
    from .hooks import HookSet
    from .state import ThreadState

__all__ = ["ToolOutcome", "Toolbox", "normalise_result", "recorded_results", "run_tool_call", "session_tool",
           "unanswered_calls"]

#: a source of recorded results for the turns started in this context (a replayed turn's
#: cassette): asked with the call and its arguments before a tool runs; a result it returns
#: is used instead of running the tool, None lets the tool run
recorded_results: ContextVar[Callable[[ToolCall, dict[str, Any]], Awaitable[ToolResult | None]] | None] = \
    ContextVar("recorded_results", default=None)


@dataclass
class Toolbox:
    """The tools one side's prompt offers, by name, and their chat-completions list."""

    tools: dict[str, ToolDefinition] = field(default_factory=dict)
    offered: list[dict[str, Any]] = field(default_factory=list)
    session: dict[str, str] = field(default_factory=dict)  # tool name -> "stop" | "fail" | "status"

    def names(self) -> list[str]:
        return list(self.tools)


@dataclass(slots=True)
class ToolOutcome:
    call: ToolCall
    result: ToolResult
    args: dict[str, Any] | None
    repaired: bool = False
    notes: list[str] = field(default_factory=list)
    duration_ms: float = 0.0
    #: the arguments could not be read at all (counts against the tool's retry budget)
    bad_arguments: bool = False
    #: the person's decision when the call waited for approval (``approved``, ``reason``)
    approval: dict[str, Any] | None = None


def session_tool(name: str, kind: str, message_property: str | None, attachments_property: str | None) -> ToolDefinition:
    """A stand-in for a session lifecycle tool the project did not define itself."""
    props: dict[str, Any] = {}
    if message_property:
        props[message_property] = {"type": "string", "description": "The message to report."}
    if attachments_property:
        props[attachments_property] = {"type": "array", "items": {"type": "string"}, "description": "Paths of files to attach."}
    what = {"stop": "Finish the session successfully", "fail": "End the session as failed", "status": "Report progress"}[kind]

    async def handler(args: dict[str, Any]) -> str:
        return "ok"

    return define_tool(name=name, description=f"{what}.", parameters={"type": "object", "properties": props}, execute=handler)


def normalise_result(value: Any) -> ToolResult:
    """A handler's return value as a ToolResult (str as is, others as JSON)."""
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult("success", "")
    if isinstance(value, str):
        return ToolResult("success", value)
    if isinstance(value, BaseModel):
        return ToolResult("success", value.model_dump_json())
    if isinstance(value, dict) and set(value) >= {"status"} and value.get("status") in ("success", "error") and set(value) <= {"status", "result", "error", "stack", "attachments"}:
        return ToolResult.from_dict(value)
    return ToolResult("success", dumps(value))


async def _store_attachments(state: ThreadState, result: ToolResult) -> ToolResult:
    """New files in a result (base64 ``data``) are written to the thread's files and
    replaced by references, so messages never carry file bodies."""
    if not result.attachments:
        return result
    refs: list[dict[str, Any]] = []
    for att in result.attachments:
        if isinstance(att, dict) and "data" in att:
            name = str(att.get("name") or att.get("path") or "attachment")
            path = str(att.get("path") or f"attachments/{name}")
            raw = base64.b64decode(att["data"]) if isinstance(att["data"], str) else bytes(att["data"])
            mime = att.get("mimeType") or att.get("mime_type")
            await state.write_file(path, raw, mime_type=mime)
            refs.append({"path": path, "name": name, "mimeType": mime, "size": len(raw)})
        else:
            refs.append(att)
    result.attachments = refs
    return result


def parse_arguments(text: str, tool: ToolDefinition | None) -> tuple[dict[str, Any] | None, str | None, bool, list[str]]:
    """Arguments as a dict, or a problem the model can act on.

    Almost-JSON is repaired and values are coerced to the tool's schema where the intent is
    plain (``"5"`` for an integer); text cut off mid-call is reported, never guessed at.
    """
    if tool is not None and tool.args_model is not None and text[:1] == "{":
        # Typed tools validate (and coerce) with their Pydantic model: strict JSON needs no more.
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value, None, False, []
    parsed = parse_tool_arguments(text, tool.parameters if tool else None)
    if parsed.value is None or parsed.error:
        problem = parsed.error or "arguments are not valid JSON"
        if parsed.truncated:
            problem = f"the arguments were cut off before the end ({problem}); send the complete call again, shorter if needed"
        return None, problem, False, list(parsed.notes)
    return parsed.value, None, parsed.repaired, list(parsed.notes)


async def run_tool_call(state: ThreadState, call: ToolCall, toolbox: Toolbox, hooks: HookSet, *,
                        default_timeout: float | None = None) -> ToolOutcome:
    """Execute one call and run its hooks; always returns an outcome."""
    if not observe.observed:
        return await _run_tool_call(state, call, toolbox, hooks, default_timeout)
    with observe.tool_call(call, toolbox.tools.get(call.name)) as probe:
        outcome = await _run_tool_call(state, call, toolbox, hooks, default_timeout)
        probe.outcome(outcome)
        return outcome


async def _run_tool_call(state: ThreadState, call: ToolCall, toolbox: Toolbox, hooks: HookSet,
                         default_timeout: float | None) -> ToolOutcome:
    loop = asyncio.get_running_loop()
    started = loop.time()
    tool = toolbox.tools.get(call.name)
    args: dict[str, Any] | None = None
    repaired = False
    notes: list[str] = []
    bad_arguments = False
    if tool is None:
        known = ", ".join(toolbox.names()) or "none"
        result = ToolResult("error", error=f"unknown tool {call.name!r}; available tools: {known}")
    else:
        args, problem, repaired, notes = parse_arguments(call.arguments, tool)
        if problem is not None:
            bad_arguments = True
            result = ToolResult("error", error=f"invalid arguments for {call.name}: {problem}. Send the arguments as one JSON object.")
        else:
            try:
                clean = tool.validate_arguments(args or {})
            except ValueError as exc:
                result = ToolResult("error", error=f"invalid arguments for {call.name}: {exc}")
            else:
                source = recorded_results.get()
                recorded = await source(call, args or {}) if source is not None else None
                try:
                    limit = tool.timeout or default_timeout
                    with tool_running(tool, call.id):  # a credential is handed only to its tools
                        if recorded is not None:
                            coro = _given(recorded)
                        else:  # a tool that declared what it needs gets a state held to it
                            given: Any = await tool_state_for(state, tool) if needs_tool_state(tool) else state
                            coro = tool.invoke(given, clean)
                        value = await (asyncio.wait_for(coro, limit) if limit else coro)
                    result = normalise_result(value)
                except ModelRetry as exc:
                    result = ToolResult("error", error=str(exc))
                except TimeoutError:
                    result = ToolResult("error", error=f"tool {call.name} timed out after {limit} s")
                except Exception as exc:
                    result = ToolResult("error", error=f"{type(exc).__name__}: {exc}", stack=traceback.format_exc(limit=8))
    if result.status == "success" and result.attachments:
        try:
            result = await _store_attachments(state, result)
        except Exception as exc:
            result = ToolResult("error", error=f"could not store the tool's attachments: {exc}")
    hook_name = "after_tool_call_success" if result.status == "success" else "after_tool_call_failure"
    if hooks.has(hook_name):
        result = _as_result(await hooks.transform(hook_name, state, result, call))
    if hooks.has("before_store_tool_result"):
        result = _as_result(await hooks.transform("before_store_tool_result", state, result, call))
    return ToolOutcome(call, result, args, repaired, notes, (loop.time() - started) * 1000, bad_arguments)


async def _given(result: ToolResult) -> ToolResult:
    """A recorded result in place of running the tool."""
    return result


def _as_result(value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, dict):
        return ToolResult.from_dict(value)
    return normalise_result(value)


def unanswered_calls(history: list[Message]) -> list[tuple[Message, ToolCall]]:
    """The tool calls of the history that have no result (after a crash, a cancel or a
    lapsed wait), each with the reply that made it, in order."""
    answered = {m.tool_call_id for m in history if m.role == "tool"}
    return [(m, call) for m in history if m.role == "assistant" and m.tool_calls
            for call in m.tool_calls if call.id not in answered]
