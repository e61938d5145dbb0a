"""Prompt definitions: the system prompt a side runs with, its tools, hooks and model."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol, Required, TypedDict, Unpack

from pydantic import Field, field_validator

from ._base import Definition, build, check_snake_case

__all__ = [
    "PromptDefinition",
    "PromptEnvPart",
    "PromptFields",
    "PromptIncludePart",
    "PromptPart",
    "PromptPartFields",
    "PromptTextPart",
    "PromptToolConfig",
    "PromptToolFields",
    "ToolChoice",
    "ToolDiscovery",
    "define_prompt",
]

#: how a prompt's tools are offered: all at once, or loaded by the model on demand
ToolDiscovery = Literal["all", "ondemand"]
#: whether the model may, must or must not call a tool
ToolChoice = Literal["auto", "required", "none"]


class PromptTextPart(Definition):
    """Literal text."""

    type: Literal["text"] = "text"
    text: str


class PromptIncludePart(Definition):
    """The rendered text of another prompt."""

    type: Literal["include"] = "include"
    prompt: str


class PromptEnvPart(Definition):
    """An env value, looked up at render time (thread, then user, agent, instance)."""

    type: Literal["env"] = "env"
    key: str
    default: str | None = None


PromptPart = PromptTextPart | PromptIncludePart | PromptEnvPart


class _TextPartFields(TypedDict, total=False):
    type: Literal["text"]
    text: Required[str]


class _IncludePartFields(TypedDict):
    type: Literal["include"]
    prompt: str


class _EnvPartFields(TypedDict, total=False):
    type: Required[Literal["env"]]
    key: Required[str]
    default: str | None


#: one part of a structured prompt, as written by hand
PromptPartFields = str | _TextPartFields | _IncludePartFields | _EnvPartFields | PromptPart


class PromptToolConfig(Definition):
    """A tool reference with per-prompt options (used for agents exposed as tools)."""

    name: str
    description: str | None = None
    include_text_response: bool = True
    include_tool_calls: bool = False
    include_errors: bool = True
    init_user_message_property: str | None = None
    enabled: bool = True


class PromptToolFields(TypedDict, total=False):
    """``PromptToolConfig`` as a dict."""

    name: Required[str]
    description: str | None
    include_text_response: bool
    include_tool_calls: bool
    include_errors: bool
    init_user_message_property: str | None
    enabled: bool


class PromptDefinition(Definition):
    """A system prompt and what goes with it.

    ``hooks`` left as ``None`` falls back to the agent's hook list; a list (even empty)
    replaces it, as the spec's hook provenance rules say. A new field goes here and in
    :class:`PromptFields`; a test keeps the two in step.
    """

    name: str
    description: str | None = None
    prompt: str | list[PromptPart] = ""
    model: str | None = None
    tools: list[str | PromptToolConfig] = Field(default_factory=list)
    hooks: list[str] | None = None
    tool_discovery: ToolDiscovery = "all"
    compaction_threshold: float | None = Field(default=None, gt=0, le=1)
    input_guardrails: list[str] = Field(default_factory=list)
    output_guardrails: list[str] = Field(default_factory=list)
    #: characters of streamed reply checked at a time by output guardrails
    guardrail_chunk_size: int = Field(default=200, ge=1)
    parallel_tool_calls: bool = True
    tool_choice: ToolChoice | None = None
    max_tool_retries: int = Field(default=3, ge=0)
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    #: the type of the side's final answer (a Pydantic model, dataclass, TypedDict, a list or
    #: union of those, or a JSON Schema dict); the turn then ends with a validated value
    output_type: Any = None
    #: how many times an answer that does not validate is sent back with its errors
    output_retries: int = Field(default=2, ge=0)
    #: the skills the model may load: names, ``prefix*`` or ``*`` (every skill the thread can
    #: use); the model sees their names and descriptions and loads the rest on demand
    skills: list[str] | None = None

    @field_validator("skills")
    @classmethod
    def _skills(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        out: list[str] = []
        for entry in value:
            name = entry.strip()
            if not name or "*" in name[:-1] or any(c.isspace() for c in name):
                raise ValueError(f"{entry!r} is not a skill name, a name ending in * or *")
            if name not in out:
                out.append(name)
        return out

    @field_validator("output_type")
    @classmethod
    def _output_type(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, dict):
            import jsonschema

            try:
                jsonschema.validators.validator_for(value).check_schema(value)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"not a valid JSON Schema: {exc.message}") from exc
            return value
        if isinstance(value, str | int | float | bool):
            raise ValueError("must be a type (a Pydantic model, dataclass, TypedDict, list or union of those) "
                             "or a JSON Schema object")
        from pydantic import TypeAdapter

        try:
            TypeAdapter(value).json_schema()
        except Exception as exc:  # pydantic raises several kinds for types it cannot handle
            raise ValueError(f"{value!r} cannot be validated: {exc}") from exc
        return value

    @field_validator("prompt", mode="before")
    @classmethod
    def _parts(cls, value: Any) -> Any:
        if isinstance(value, list):
            out = []
            for part in value:
                if isinstance(part, str):
                    out.append({"type": "text", "text": part})
                elif isinstance(part, dict) and part.get("type") == "text" and "content" in part and "text" not in part:
                    out.append({"type": "text", "text": part["content"]})
                else:
                    out.append(part)
            return out
        return value

    def tool_names(self) -> list[str]:
        """Names of enabled tools, in order."""
        return [t if isinstance(t, str) else t.name for t in self.tools if isinstance(t, str) or t.enabled]

    def tool_config(self, name: str) -> PromptToolConfig | None:
        for t in self.tools:
            if isinstance(t, PromptToolConfig) and t.name == name:
                return t
        return None

    def includes(self) -> list[str]:
        if isinstance(self.prompt, str):
            return []
        return [p.prompt for p in self.prompt if isinstance(p, PromptIncludePart)]


#: one entry of a prompt's ``tools``: a name, an options dict, or a built config
PromptToolEntry = str | PromptToolFields | PromptToolConfig


class _ToolCollection(Protocol):
    """Any sized, iterable collection of tool entries except a string.

    ``str`` does not satisfy it: its ``__contains__`` takes only strings, where this asks
    for any object, so ``tools="calculate"`` is a type error rather than one tool per letter.
    A ``list[str]`` or ``list[PromptToolConfig]`` variable does satisfy it (lists are
    invariant, so ``list[PromptToolEntry]`` alone would refuse them).
    """

    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[PromptToolEntry]: ...
    def __contains__(self, value: object, /) -> bool: ...


#: a prompt's tools: list and tuple literals are checked entry by entry (a misspelt option
#: key is named), any other non-string collection of entries is accepted as it is
PromptTools = list[PromptToolEntry] | tuple[PromptToolEntry, ...] | _ToolCollection


class PromptFields(TypedDict, total=False):
    """The keyword arguments of :func:`define_prompt`, one per field of :class:`PromptDefinition`."""

    name: str
    description: str | None
    prompt: str | Sequence[PromptPartFields]
    model: str | None
    tools: PromptTools
    hooks: Sequence[str] | None
    tool_discovery: ToolDiscovery
    compaction_threshold: float | None
    input_guardrails: Sequence[str]
    output_guardrails: Sequence[str]
    guardrail_chunk_size: int
    parallel_tool_calls: bool
    tool_choice: ToolChoice | None
    max_tool_retries: int
    temperature: float | None
    max_tokens: int | None
    #: a type (Pydantic model, dataclass, TypedDict, a list or union of those) or a JSON Schema
    output_type: Any
    output_retries: int
    #: skill names, ``prefix*`` or ``*``: the skills the model may load on demand
    skills: Sequence[str] | None


def define_prompt(definition: Mapping[str, Any] | None = None, /, **fields: Unpack[PromptFields]) -> PromptDefinition:
    """Validate a prompt; every problem is reported at once, naming its field.

    Keywords are typed; a whole definition may instead come as one dict (the spec's shape).
    """
    data: dict[str, Any] = {**(definition or {}), **fields}
    problems: list[tuple[str, str]] = []
    name = data.get("name")
    if isinstance(name, str) and (bad := check_snake_case(name)):
        problems.append(("name", bad))
    return build(PromptDefinition, data, problems)
