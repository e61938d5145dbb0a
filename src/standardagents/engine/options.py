"""Per-call options of a turn: what a caller of ``send``/``run`` may set for one execution.

They are checked when the call is made (a bad ``output_type`` is refused before anything is
stored) and handed to the execution, where they take precedence over the definitions.

They are also kept with the execution record (and with a message waiting in a busy thread's
inbox), so a turn that pauses for an approval, is resumed after a crash or runs later from
the inbox keeps them: :meth:`TurnOptions.state` writes them, :meth:`TurnOptions.from_state`
reads them back.

A door (the REST API, the OpenAI door, a protocol door) or :meth:`Runtime.start` asks for a
turn with one :class:`TurnRequest`: the message, where it goes, and these options, all typed,
so a misspelt option is a type error rather than a silently ignored keyword.
:class:`StartOptions` types the same fields as keyword arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, TypedDict

from ..definitions import BusyPolicy
from ..definitions.limits import UsageLimits, usage_limits
from ..exceptions import StandardAgentsError
from .client_tools import ClientTools
from .output import OutputSpec, output_spec, spec_from_state
from .overrides import SideOverride

__all__ = ["STATE_KEY", "RunOptions", "StartOptions", "TurnOptions", "TurnRequest"]

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


class RunOptions(TypedDict, total=False):
    """The options of a turn but its output type (documented on :meth:`Runtime.start`), as
    keyword arguments: :meth:`Runtime.run` takes ``output_type`` on its own, typed."""

    role: str
    attachments: list[dict[str, Any]] | None
    parts: list[dict[str, Any]] | None
    side: Literal["a", "b"] | None
    metadata: dict[str, Any] | None
    start_side: Literal["a", "b"]
    silent: bool
    output_retries: int | None
    usage_limits: UsageLimits | dict[str, Any] | None
    busy: BusyPolicy | None
    sampling: dict[str, Any] | None
    client_tools: ClientTools | None
    model: str | None
    system: str | None


class StartOptions(RunOptions, total=False):
    """The options of a turn (documented on :meth:`Runtime.start`) as keyword arguments,
    typed for editors and type checkers: a misspelt option is an error before anything runs.
    They are the fields of :class:`TurnRequest` but its content and execution id."""

    output_type: Any


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnRequest:
    """One turn as a caller asks for it: the message (``content``, ``role``, ``attachments``,
    ``parts``, ``side``, ``metadata``, ``silent``; none of them: a turn without a new
    message), the side that starts, what a busy thread does with it (``busy``), the id its
    execution takes (``execution_id``; one is made when not given), and the turn's own
    options (output type and retries, usage limits, sampling, client tools, a model or system
    prompt in place of the starting side's). Every door builds one and hands it to
    :meth:`Runtime.begin`; the options are checked there, before anything is stored."""

    content: str | None = None
    role: str = "user"
    attachments: list[dict[str, Any]] | None = None
    parts: list[dict[str, Any]] | None = None
    side: Literal["a", "b"] | None = None
    metadata: dict[str, Any] | None = None
    start_side: Literal["a", "b"] = "a"
    silent: bool = False
    execution_id: str | None = None
    output_type: Any = None
    output_retries: int | None = None
    usage_limits: UsageLimits | dict[str, Any] | None = None
    busy: BusyPolicy | None = None
    sampling: dict[str, Any] | None = None
    client_tools: ClientTools | None = None
    model: str | None = None
    system: str | None = None

    def turn_options(self) -> TurnOptions | None:
        """The options the execution keeps (checked: a bad one raises here); None when the
        request sets none."""
        override = None if self.model is None and self.system is None else SideOverride(
            self.start_side, self.model, self.system)
        return TurnOptions.build(output_type=self.output_type, output_retries=self.output_retries,
                                 usage_limits=self.usage_limits, sampling=self.sampling,
                                 client_tools=self.client_tools, override=override)

    @property
    def has_message(self) -> bool:
        """Whether the turn starts with a new message (else it runs on the thread as it is)."""
        return self.content is not None or bool(self.parts) or bool(self.attachments)
