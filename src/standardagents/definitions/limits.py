"""Usage limits: how much one turn (or one thread, over all its turns) may spend."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ._base import Definition, build

__all__ = ["UsageLimits", "usage_limits"]


class UsageLimits(Definition):
    """Caps checked before each model request (with the request's estimated input tokens) and
    after each response; a turn that would pass one ends with outcome ``usage_limit``.

    Unset fields do not limit. A *turn* is one execution (one ``send``/``run``); the
    ``thread_*`` fields count every turn of the thread, this one included. Costs are in USD
    and need a known price for the model (see ``ModelDefinition.prices``).
    """

    #: model requests per turn
    requests: int | None = Field(default=None, ge=1)
    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    total_tokens: int | None = Field(default=None, ge=0)
    #: tool calls per turn
    tool_calls: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    thread_input_tokens: int | None = Field(default=None, ge=0)
    thread_output_tokens: int | None = Field(default=None, ge=0)
    thread_total_tokens: int | None = Field(default=None, ge=0)
    thread_cost_usd: float | None = Field(default=None, ge=0)

    def merged(self, override: UsageLimits | None) -> UsageLimits:
        """These limits with every field ``override`` sets replaced by its value."""
        if override is None:
            return self
        return self.model_copy(update={k: v for k, v in override.model_dump(exclude={"source_file", "package"}).items()
                                       if v is not None})

    def any_thread_limit(self) -> bool:
        return any(v is not None for v in (self.thread_input_tokens, self.thread_output_tokens,
                                           self.thread_total_tokens, self.thread_cost_usd))


def usage_limits(value: UsageLimits | dict[str, Any] | None) -> UsageLimits | None:
    """Limits from a dict (snake_case or camelCase keys) or as they are; bad values raise
    one :class:`~standardagents.exceptions.DefinitionError` naming every field."""
    if value is None or isinstance(value, UsageLimits):
        return value
    if not isinstance(value, dict):
        from ..exceptions import DefinitionError

        raise DefinitionError([("usage_limits", f"must be an object of limits, not {value!r}")], source="usage_limits")
    result: UsageLimits = build(UsageLimits, value, [])
    return result
