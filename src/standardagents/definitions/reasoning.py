"""Reasoning effort as a portable setting: a level each provider maps to its own parameter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from ._base import Definition

__all__ = ["REASONING_LEVELS", "ReasoningConfig", "ReasoningLevel", "map_reasoning_level"]

ReasoningLevel = Literal["none", "minimal", "low", "medium", "high"]
#: the levels in increasing order of effort
REASONING_LEVELS: tuple[ReasoningLevel, ...] = ("none", "minimal", "low", "medium", "high")


class ReasoningConfig(Definition):
    """How hard a model should think: a portable ``level``, mapped by each provider to its
    own parameter (OpenAI ``reasoning_effort``, Anthropic's thinking budget, Gemini's
    thinking budget), or an explicit ``budget_tokens`` for the providers that take one.
    ``include`` asks for the reasoning text back where the API can send it."""

    level: ReasoningLevel | None = None
    budget_tokens: int | None = Field(default=None, ge=0)
    include: bool = True

    @model_validator(mode="after")
    def _something_asked(self) -> ReasoningConfig:
        if self.level is None and self.budget_tokens is None:
            raise ValueError("give a level (none, minimal, low, medium, high) or budget_tokens")
        return self


def map_reasoning_level(level: ReasoningLevel | None, table: Mapping[str, Any], default: Any = None) -> Any:
    """The value ``table`` gives ``level``. A level the table lacks takes its nearest
    neighbour in effort (the higher one on a tie), and a level other than ``none`` never
    becomes ``none``: ``minimal`` on an API that starts at ``low`` means ``low``. ``None``
    (no level), or no usable entry, gives ``default``."""
    if level is None or not table:
        return default
    if level in table:
        return table[level]
    here = REASONING_LEVELS.index(level)
    known = sorted((abs(REASONING_LEVELS.index(k) - here), -REASONING_LEVELS.index(k), k)
                   for k in table if k in REASONING_LEVELS and (k != "none" or level == "none"))
    if not known:
        return default
    return table[known[0][2]]
