"""Per-call options of a turn: what a caller of ``send``/``run`` may set for one execution.

They are checked when the call is made (a bad ``output_type`` is refused before anything is
stored) and handed to the execution, where they take precedence over the definitions.

They are also kept with the execution record (and with a message waiting in a busy thread's
inbox), so a turn that pauses for an approval, is resumed after a crash or runs later from
the inbox keeps them: :meth:`TurnOptions.state` writes them, :meth:`TurnOptions.from_state`
reads them back.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..definitions.limits import UsageLimits, usage_limits
from ..exceptions import StandardAgentsError
from .client_tools import ClientTools
from .output import OutputSpec, output_spec, spec_from_state
from .overrides import SideOverride

if TYPE_CHECKING:
    from .loop import Execution

__all__ = ["STATE_KEY", "TurnOptions"]

#: where an execution record's state (and an inbox entry) keeps a call's own options
STATE_KEY = "options"


@dataclass(frozen=True)
class TurnOptions:
    """A call's own output type, retry budget, usage limits, sampling, client tools and
    side override (model, system prompt)."""

    output: OutputSpec | None = None
    output_retries: int | None = None
    usage_limits: UsageLimits | None = None
    sampling: dict[str, Any] | None = None
    client_tools: ClientTools | None = None
    override: SideOverride | None = None

    @classmethod
    def build(cls, *, output_type: Any = None, output_retries: int | None = None,
              usage_limits: UsageLimits | dict[str, Any] | None = None,
              sampling: dict[str, Any] | None = None,
              client_tools: ClientTools | None = None,
              override: SideOverride | None = None) -> TurnOptions | None:
        if output_retries is not None and (not isinstance(output_retries, int) or output_retries < 0):
            raise StandardAgentsError(f"output_retries must be a whole number of at least 0, not {output_retries!r}")
        if output_type is None and output_retries is None and usage_limits is None and not sampling \
                and client_tools is None and override is None:
            return None
        return cls(output_spec(output_type) if output_type is not None else None, output_retries,
                   _limits(usage_limits), _sampling(sampling), client_tools, override)

    @cached_property
    def state(self) -> dict[str, Any]:
        """These options as JSON, for the execution record (computed once per call)."""
        kept: dict[str, Any] = {}
        if self.output is not None:
            kept["outputType"] = self.output.state
        if self.output_retries is not None:
            kept["outputRetries"] = self.output_retries
        if self.usage_limits is not None:
            kept["usageLimits"] = self.usage_limits.model_dump(exclude={"source_file", "package"}, exclude_none=True)
        if self.sampling:
            kept["sampling"] = self.sampling
        if self.client_tools is not None:
            kept["clientTools"] = self.client_tools.to_state()
        if self.override is not None:
            kept["override"] = self.override.to_state()
        return kept

    @classmethod
    def from_state(cls, kept: Any) -> TurnOptions | None:
        """The options :attr:`state` wrote (``None`` when there were none). What cannot be
        read back is left out rather than failing the turn: the definitions apply to it."""
        if not isinstance(kept, dict) or not kept:
            return None
        output = spec_from_state(kept.get("outputType"))
        retries = kept.get("outputRetries")
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            retries = None
        try:
            limits = usage_limits(kept.get("usageLimits")) if isinstance(kept.get("usageLimits"), dict) else None
        except StandardAgentsError:
            limits = None
        sampling = kept.get("sampling") if isinstance(kept.get("sampling"), dict) else None
        client = ClientTools.from_state(kept.get("clientTools"))
        override = SideOverride.from_state(kept.get("override"))
        if output is None and retries is None and limits is None and not sampling and client is None \
                and override is None:
            return None
        options = cls(output, retries, limits, sampling or None, client, override)
        options.__dict__["state"] = kept  # already JSON: written back as it was read
        return options

    def over(self, base: TurnOptions | None) -> TurnOptions:
        """These options on top of ``base`` (a paused turn's own): each one set here wins."""
        if base is None:
            return self
        return TurnOptions(self.output or base.output,
                           self.output_retries if self.output_retries is not None else base.output_retries,
                           self.usage_limits or base.usage_limits, self.sampling or base.sampling,
                           self.client_tools or base.client_tools, self.override or base.override)

    def apply(self, execution: Execution) -> None:
        execution.output_override = self.output
        execution.output_retries = self.output_retries
        execution.usage_limits = self.usage_limits
        if self.sampling:
            execution.sampling = dict(self.sampling)
        if self.client_tools is not None:
            execution.client_tools = self.client_tools
        if self.override is not None:
            execution.override = self.override
        execution.options = self


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


# limits given as a dict, validated once per distinct dict (a caller repeats its limits; the
# definitions are frozen, so one instance serves every turn)
_LIMITS: dict[Any, UsageLimits] = {}
_LIMITS_MAX = 256


def _limits(value: UsageLimits | dict[str, Any] | None) -> UsageLimits | None:
    if not isinstance(value, dict):
        return usage_limits(value)
    try:
        key: Any = tuple(sorted((k, type(v).__name__, v) for k, v in value.items()))
        hash(key)
    except TypeError:  # an unhashable value: validation says what is wrong with it
        return usage_limits(value)
    known = _LIMITS.get(key)
    if known is None:
        known = usage_limits(value)
        if known is not None:
            if len(_LIMITS) >= _LIMITS_MAX:
                _LIMITS.clear()
            _LIMITS[key] = known
    return known
