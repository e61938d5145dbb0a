"""Replaying a captured turn: its tools answer from a cassette, and (offline) its model too.

A tool call that matches a recorded call (same tool, same arguments, each recording used
once) gets the recorded result; another one runs the tool for real or fails, as the case
says, and is noted either way so the report can say which arguments changed. With the
model's replies recorded, the turn runs against :class:`ReplayModel`, a provider answering
them in order, so a replay needs no network and gives the same turn every time.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ..definitions import ModelDefinition
from ..exceptions import ProviderError
from ..providers.base import ModelProvider, ModelRequest, ModelResponse
from ..records import ToolCall, ToolResult, Usage

__all__ = ["REPLAY_MODEL", "ReplayModel", "ToolCassette", "install_replay_model", "replies"]

#: the model definition a replayed turn runs with (added to the runtime's registry)
REPLAY_MODEL = "eval_replay"

#: the recorded replies of the case running in this context (a list consumed in order)
replies: ContextVar[list[dict[str, Any]] | None] = ContextVar("eval_replies", default=None)


def _arguments(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


@dataclass
class ToolCassette:
    """The recorded tool calls of a captured turn, each answered once."""

    recorded: list[dict[str, Any]]
    unmatched: str = "run"
    used: set[int] = field(default_factory=set)
    #: calls that matched no recording: ``tool``, ``arguments``, ``recorded`` (same tool's)
    misses: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, call: ToolCall, args: dict[str, Any]) -> ToolResult | None:
        same_tool = []
        for index, item in enumerate(self.recorded):
            if item.get("name") != call.name:
                continue
            if index not in self.used:
                same_tool.append(item)
            if index not in self.used and _arguments(item.get("arguments")) == args:
                self.used.add(index)
                if item.get("status") == "error":
                    return ToolResult("error", error=str(item.get("error") or "error"))
                return ToolResult("success", item.get("result") or "")
        self.misses.append({"tool": call.name, "arguments": args,
                            "recorded": _arguments(same_tool[0].get("arguments")) if same_tool else None})
        if self.unmatched == "fail":
            return ToolResult("error", error=f"replay: no recorded call of {call.name} with these arguments")
        return None


class ReplayModel(ModelProvider):
    """Answers with the recorded replies of the case running in the current context."""

    name = "replay"

    async def request(self, request: ModelRequest) -> ModelResponse:
        queue = replies.get()
        if not queue:
            raise ProviderError("replay: the recording has no more model replies (the turn went further than the "
                                "captured one)", retriable=False)
        item = queue.pop(0)
        calls = [ToolCall(id=str(c.get("id") or f"call_{i + 1}"), name=str(c["name"]),
                          arguments=c["arguments"] if isinstance(c.get("arguments"), str)
                          else json.dumps(c.get("arguments") or {}))
                 for i, c in enumerate(item.get("toolCalls") or ())]
        usage = item.get("usage")
        return ModelResponse(text=item.get("text") or "", tool_calls=calls, reasoning=item.get("reasoning"),
                             usage=Usage(**{k: v for k, v in usage.items() if k in Usage.__slots__})
                             if isinstance(usage, dict) else None,
                             finish_reason="tool_calls" if calls else "stop", model=REPLAY_MODEL)


def install_replay_model(rt: Any) -> None:
    """Add the replay model to the runtime's registry and route it to :class:`ReplayModel`
    (once; the unique base URL keeps its provider apart from every real one)."""
    if rt.registry.has("models", REPLAY_MODEL):
        return
    rt.registry.add("models", REPLAY_MODEL, ModelDefinition(name=REPLAY_MODEL, provider="test", model="replay",
                                                            base_url="replay://cassette"))
    rt.use_provider(REPLAY_MODEL, ReplayModel())
