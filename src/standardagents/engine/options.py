"""Per-call options of a turn: what a caller of ``send``/``run`` may set for one execution.

They are checked when the call is made (a bad ``output_type`` is refused before anything is
stored) and handed to the execution, where they take precedence over the definitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..definitions.limits import UsageLimits, usage_limits
from ..exceptions import StandardAgentsError
from .client_tools import ClientTools
from .output import OutputSpec, output_spec

if TYPE_CHECKING:
    from .loop import Execution

__all__ = ["TurnOptions"]


@dataclass(frozen=True)
class TurnOptions:
    """A call's own output type, retry budget, usage limits, sampling and client tools."""

    output: OutputSpec | None = None
    output_retries: int | None = None
    usage_limits: UsageLimits | None = None
    sampling: dict[str, Any] | None = None
    client_tools: ClientTools | None = None

    @classmethod
    def build(cls, *, output_type: Any = None, output_retries: int | None = None,
              usage_limits: UsageLimits | dict[str, Any] | None = None,
              sampling: dict[str, Any] | None = None,
              client_tools: ClientTools | None = None) -> TurnOptions | None:
        if output_retries is not None and (not isinstance(output_retries, int) or output_retries < 0):
            raise StandardAgentsError(f"output_retries must be a whole number of at least 0, not {output_retries!r}")
        if output_type is None and output_retries is None and usage_limits is None and not sampling \
                and client_tools is None:
            return None
        return cls(output_spec(output_type) if output_type is not None else None, output_retries,
                   _limits(usage_limits), _sampling(sampling), client_tools)

    def apply(self, execution: Execution) -> None:
        execution.output_override = self.output
        execution.output_retries = self.output_retries
        execution.usage_limits = self.usage_limits
        if self.sampling:
            execution.sampling = dict(self.sampling)
        if self.client_tools is not None:
            execution.client_tools = self.client_tools


_SAMPLING = ("temperature", "top_p", "max_tokens", "stop", "seed")


def _sampling(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """A call's sampling settings as model-request fields (``seed`` rides in the body)."""
    if not value:
        return None
    unknown = sorted(set(value) - set(_SAMPLING))
    if unknown:
        raise StandardAgentsError(f"unknown sampling settings {unknown}: use {list(_SAMPLING)}")
    fields = {k: v for k, v in value.items() if k != "seed" and v is not None}
    if value.get("seed") is not None:
        fields["extra_body"] = {"seed": value["seed"]}
    return fields


def _limits(value: UsageLimits | dict[str, Any] | None) -> UsageLimits | None:
    return usage_limits(value)
