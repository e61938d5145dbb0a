"""Guardrails: tools marked ``guardrail=True`` that vet a turn's input or output.

A guardrail returns ``{"tripwire": bool, "info": ...}``. Input guardrails see the user's
message before the model does; output guardrails see the reply as it streams, in chunks,
so a tripped reply is cut off before a client receives the offending part.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..definitions import ToolDefinition
from ..records import ToolResult

if TYPE_CHECKING:
    from .state import ThreadState

__all__ = ["DEFAULT_CHUNK", "GuardrailTripped", "OutputGuard", "Trip", "run_guardrails"]

#: characters of new reply text between two output-guardrail checks
DEFAULT_CHUNK = 200


@dataclass(slots=True)
class Trip:
    """A guardrail that tripped, with what it said."""

    guardrail: str
    info: Any
    kind: str


class GuardrailTripped(Exception):
    """Internal signal: an output guardrail tripped; ``approved`` is the text already released."""

    def __init__(self, trip: Trip, approved: str) -> None:
        super().__init__(f"guardrail {trip.guardrail} tripped")
        self.trip = trip
        self.approved = approved


def _verdict(value: Any) -> tuple[bool, Any]:
    if isinstance(value, ToolResult):
        if value.status == "error":
            return True, {"error": value.error}
        value = value.result
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return False, value
    if isinstance(value, dict):
        return bool(value.get("tripwire")), value.get("info")
    return bool(value), None


async def run_guardrails(state: ThreadState, tools: list[ToolDefinition], text: str, kind: str) -> Trip | None:
    """Run each guardrail on ``text``; the first that trips wins. A guardrail that raises
    counts as tripped: failing closed is the safe reading of a broken check. Each one run is
    noted on the execution for the step records."""
    ex = state.execution
    for tool in tools:
        props = tool.parameters.get("properties", {})
        args: dict[str, Any] = {"text": text}
        if "kind" in props:
            args["kind"] = kind
        try:
            clean = tool.validate_arguments(args)
            tripped, info = _verdict(await tool.invoke(state, clean))
        except Exception as exc:
            tripped, info = True, {"error": f"{type(exc).__name__}: {exc}"}
        if ex is not None:
            ex.note_guardrail(tool.name, kind, tripped)
        if tripped:
            return Trip(tool.name, info, kind)
    return None


class OutputGuard:
    """Holds streamed reply text back until the output guardrails have passed it."""

    def __init__(self, state: ThreadState, tools: list[ToolDefinition], release: Callable[[str], None],
                 chunk_size: int = DEFAULT_CHUNK) -> None:
        self.state = state
        self.tools = tools
        self.release = release
        self.chunk_size = max(1, chunk_size)
        self.approved: list[str] = []
        self.pending: list[str] = []
        self.pending_len = 0

    async def feed(self, piece: str) -> None:
        self.pending.append(piece)
        self.pending_len += len(piece)
        if self.pending_len >= self.chunk_size:
            await self.check()

    async def check(self) -> None:
        """Vet everything so far; release the pending text, or raise GuardrailTripped."""
        if not self.pending:
            return
        text = "".join(self.approved) + "".join(self.pending)
        trip = await run_guardrails(self.state, self.tools, text, "output")
        if trip is not None:
            raise GuardrailTripped(trip, "".join(self.approved))
        for piece in self.pending:
            self.release(piece)
        self.approved.extend(self.pending)
        self.pending = []
        self.pending_len = 0
