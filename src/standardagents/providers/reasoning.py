"""Reasoning levels mapped to each built-in API's own parameter.

A model's ``reasoning`` (a :class:`~standardagents.definitions.reasoning.ReasoningConfig`)
is portable; what goes on the wire is not: OpenAI-compatible endpoints take
``reasoning_effort``, Anthropic a ``thinking`` block with a token budget (and ``max_tokens``
above it), Gemini a ``thinkingConfig`` budget. The tables are data, so a test or a reader sees
exactly what each level means for each API. The built-in OpenAI and Anthropic providers are
built as subclasses that apply the mapping before the request is made, so nothing changes
for requests without reasoning.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from ..definitions.reasoning import ReasoningConfig, map_reasoning_level
from .base import ModelProvider, ModelRequest, ModelResponse, StreamDelta

__all__ = [
    "ANTHROPIC_THINKING_BUDGETS",
    "GEMINI_THINKING_BUDGETS",
    "OPENAI_REASONING_EFFORTS",
    "REASONING_MAPPERS",
    "anthropic_reasoning",
    "apply_reasoning",
    "gemini_thinking_config",
    "openai_reasoning",
    "with_reasoning",
]

#: OpenAI's ``reasoning_effort`` values are the levels themselves
OPENAI_REASONING_EFFORTS = {"none": "none", "minimal": "minimal", "low": "low", "medium": "medium", "high": "high"}
#: Anthropic's ``thinking.budget_tokens`` per level (the API's minimum is 1024)
ANTHROPIC_THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
#: Gemini's ``thinkingConfig.thinkingBudget`` per level (0 turns thinking off)
GEMINI_THINKING_BUDGETS = {"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 24576}
#: the output room Anthropic gets above a thinking budget when the model sets no max_tokens
_ANTHROPIC_ANSWER_ROOM = 4096


def _level_for_budget(budget: int) -> str:
    """The level whose Anthropic budget is nearest ``budget`` (for APIs that take levels only)."""
    if budget <= 0:
        return "none"
    return min(ANTHROPIC_THINKING_BUDGETS, key=lambda level: abs(ANTHROPIC_THINKING_BUDGETS[level] - budget))


def openai_reasoning(config: ReasoningConfig) -> dict[str, Any]:
    """The body fields of a chat-completions request for ``config``."""
    level = config.level or _level_for_budget(config.budget_tokens or 0)
    return {"reasoning_effort": map_reasoning_level(level, OPENAI_REASONING_EFFORTS)}  # type: ignore[arg-type]


def anthropic_reasoning(config: ReasoningConfig, max_tokens: int | None) -> tuple[dict[str, Any], int | None]:
    """The ``thinking`` body field for ``config`` and the ``max_tokens`` to send with it
    (the API wants it above the budget)."""
    if config.level == "none" and config.budget_tokens is None:
        return {"thinking": {"type": "disabled"}}, max_tokens
    budget = config.budget_tokens if config.budget_tokens is not None else map_reasoning_level(
        config.level, ANTHROPIC_THINKING_BUDGETS)
    budget = max(1024, int(budget))
    if max_tokens is None:
        max_tokens = budget + _ANTHROPIC_ANSWER_ROOM
    elif max_tokens <= budget:
        budget = max(1024, max_tokens - 1)
    return {"thinking": {"type": "enabled", "budget_tokens": budget}}, max_tokens


def gemini_thinking_config(config: ReasoningConfig) -> dict[str, Any]:
    """Gemini's ``thinkingConfig`` for ``config`` (wire names)."""
    budget = config.budget_tokens if config.budget_tokens is not None else map_reasoning_level(
        config.level, GEMINI_THINKING_BUDGETS)
    out: dict[str, Any] = {"thinkingBudget": int(budget)}
    if config.include and budget:
        out["includeThoughts"] = True
    return out


def _openai_request(request: ModelRequest) -> ModelRequest:
    assert request.reasoning is not None
    return dataclasses.replace(request, reasoning=None,
                               extra_body={**openai_reasoning(request.reasoning), **request.extra_body})


def _anthropic_request(request: ModelRequest) -> ModelRequest:
    assert request.reasoning is not None
    fields, max_tokens = anthropic_reasoning(request.reasoning, request.max_tokens)
    return dataclasses.replace(request, reasoning=None, max_tokens=max_tokens,
                               extra_body={**fields, **request.extra_body})


#: provider kind -> how a request with ``reasoning`` becomes one the built-in sends as is
REASONING_MAPPERS: dict[str, Callable[[ModelRequest], ModelRequest]] = {
    "openai": _openai_request,
    "anthropic": _anthropic_request,
}


def apply_reasoning(kind: str, request: ModelRequest) -> ModelRequest:
    """``request`` with its reasoning turned into ``kind``'s own fields (unchanged when it
    asks for none or ``kind`` maps nothing)."""
    mapper = REASONING_MAPPERS.get(kind)
    if request.reasoning is None or mapper is None:
        return request
    return mapper(request)


class _ReasoningMixin(ModelProvider):
    """Applies the mapping of ``reasoning_kind`` before the built-in makes the request."""

    reasoning_kind = ""

    async def request(self, request: ModelRequest) -> ModelResponse:
        if request.reasoning is not None:
            request = apply_reasoning(self.reasoning_kind, request)
        return await super().request(request)  # type: ignore[safe-super]

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta]:
        if request.reasoning is not None:
            request = apply_reasoning(self.reasoning_kind, request)
        return super().stream(request)


P = TypeVar("P", bound=ModelProvider)
_CLASSES: dict[tuple[type, str], Any] = {}


def with_reasoning(cls: type[P], kind: str) -> type[P]:
    """``cls`` extended to map reasoning as ``kind`` does (one subclass per pair, same name)."""
    made = _CLASSES.get((cls, kind))
    if made is None:
        made = _CLASSES[(cls, kind)] = type(cls.__name__, (_ReasoningMixin, cls),
                                            {"reasoning_kind": kind, "__module__": cls.__module__,
                                             "__qualname__": cls.__qualname__})
    return made
