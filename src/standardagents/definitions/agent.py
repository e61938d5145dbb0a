"""Agent definitions: who talks (one AI side with a person, or two AI sides) and when to stop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Required, TypedDict, Unpack

from pydantic import Field, field_validator

from ._base import Definition, build, check_snake_case
from .limits import UsageLimits
from .memory import AgentMemory, AgentMemoryFields

__all__ = [
    "AgentDefinition",
    "AgentFields",
    "AgentType",
    "ParentHookFields",
    "ParentHookRequirement",
    "SessionToolConfig",
    "SessionToolFields",
    "SideConfig",
    "SideFields",
    "define_agent",
]

#: the two conversation shapes of the spec
AgentType = Literal["ai_human", "dual_ai"]
#: what a message sent while the thread runs a turn does: wait its turn (``enqueue``), be
#: refused (``reject``), stop the running turn keeping its partial work (``interrupt``), or stop
#: it and remove what it wrote (``rollback``); the new message runs after the stopped turn
BusyPolicy = Literal["enqueue", "reject", "interrupt", "rollback"]


class SessionToolConfig(Definition):
    """Which tool drives a session lifecycle action, and which arguments carry its payload."""

    name: str
    message_property: str | None = None
    attachments_property: str | None = None


class SessionToolFields(TypedDict, total=False):
    """``SessionToolConfig`` as a dict, for type checkers and editors."""

    name: Required[str]
    message_property: str | None
    attachments_property: str | None


SessionToolBinding = str | SessionToolConfig
#: what a side's session_* field accepts when written by hand
SessionToolInput = str | SessionToolFields | SessionToolConfig


class SideConfig(Definition):
    """One side of a conversation: its prompt, stop conditions and limits."""

    label: str | None = None
    prompt: str
    stop_on_response: bool = True
    stop_tool: str | None = None
    stop_tool_response_property: str | None = None
    max_steps: int | None = Field(default=None, ge=1)
    session_stop: SessionToolBinding | None = None
    session_fail: SessionToolBinding | None = None
    session_status: SessionToolBinding | None = None

    def session_tool(self, kind: Literal["stop", "fail", "status"]) -> SessionToolConfig | None:
        """The lifecycle binding in its object form (a plain name becomes a config)."""
        value = {"stop": self.session_stop, "fail": self.session_fail, "status": self.session_status}[kind]
        if value is None:
            return None
        if isinstance(value, str):
            return SessionToolConfig(name=value)
        return value


class SideFields(TypedDict, total=False):
    """``SideConfig`` as a dict: one key per field, so a misspelt key is a type error."""

    label: str | None
    prompt: Required[str]
    stop_on_response: bool
    stop_tool: str | None
    stop_tool_response_property: str | None
    max_steps: int | None
    session_stop: SessionToolInput | None
    session_fail: SessionToolInput | None
    session_status: SessionToolInput | None


class ParentHookRequirement(Definition):
    """A hook a child agent requires on each direct parent while the relationship exists."""

    hook: str
    reason: str = Field(min_length=1)
    stage: Literal["before_parent", "after_parent"] = "after_parent"


class ParentHookFields(TypedDict, total=False):
    """``ParentHookRequirement`` as a dict."""

    hook: Required[str]
    reason: Required[str]
    stage: Literal["before_parent", "after_parent"]


class AgentDefinition(Definition):
    """The spec's ``AgentDefinition``, field for field.

    A new field goes here and, with the same name and type, in :class:`AgentFields` (the
    keyword arguments of :func:`define_agent`); a test keeps the two in step.
    """

    name: str
    title: str | None = None
    type: AgentType = "ai_human"
    max_session_turns: int | None = Field(default=None, ge=1)
    side_a: SideConfig
    side_b: SideConfig | None = None
    expose_as_tool: bool = False
    primary: bool = True
    tool_description: str | None = None
    description: str | None = None
    icon: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    tenvs: dict[str, Any] | None = None
    package_name: str | None = None
    version: str | None = None
    author: str | None = None
    license: str | None = None
    hooks: list[str] = Field(default_factory=list)
    parent_hooks: list[ParentHookRequirement] = Field(default_factory=list)
    input_guardrails: list[str] = Field(default_factory=list)
    output_guardrails: list[str] = Field(default_factory=list)
    #: what one turn (and the whole thread) may spend; a call's own limits override these
    usage_limits: UsageLimits | None = None
    busy: BusyPolicy = "enqueue"
    #: whether any reader of a thread may re-run a step with another model or system prompt
    #: (``allowOverrides``); otherwise only admins and a ``--dev`` server may, since the
    #: prompt is the operator's policy and the model a cost decision
    allow_overrides: bool = False
    #: what a turn does when it goes on (after an approval, client results or a crash) and the
    #: agent's definitions changed since it started (a deploy meanwhile): ``continue`` on the
    #: new ones (noted on the execution record) or ``end`` the turn with a reason saying so
    on_definition_change: Literal["continue", "end"] = "continue"
    #: long-term memory across this user's threads: tools, automatic recall, working memory
    #: (:class:`AgentMemory`; None: the agent remembers nothing beyond its thread)
    memory: AgentMemory | None = None
    #: who may decide this agent's paused calls (``approvers``): ``owner`` (the thread's),
    #: ``admin``, ``user:ID``, ``role:NAME`` (a role the identity provider gives) or
    #: ``claim:NAME=VALUE``; anyone else is refused (403). A person at the command line decides
    #: as the operator.
    approvers: list[str] = Field(default_factory=lambda: ["owner", "admin"])
    #: seconds a paused call waits for its decision; after that deciding it is refused (None:
    #: as long as its resume token lives)
    approval_expires_in: float | None = Field(default=None, gt=0)

    @field_validator("approvers")
    @classmethod
    def _approvers(cls, value: list[str]) -> list[str]:
        for rule in value:
            kind, _, rest = rule.partition(":")
            if rule not in ("owner", "admin") and not (kind in ("user", "role") and rest) \
                    and not (kind == "claim" and "=" in rest and rest.split("=", 1)[0]):
                raise ValueError(f"{rule!r} is not an approver: owner, admin, user:ID, role:NAME or claim:NAME=VALUE")
        return value

    def side(self, which: Literal["a", "b"]) -> SideConfig | None:
        return self.side_a if which == "a" else self.side_b


#: a list of names; typed as a list or tuple, not any sequence, so that a lone string (a
#: sequence of letters) is a type error rather than one name per character
Names = list[str] | tuple[str, ...]


class AgentFields(TypedDict, total=False):
    """The keyword arguments of :func:`define_agent`, one per field of :class:`AgentDefinition`.

    ``name`` and ``side_a`` are required at run time; they are not ``Required`` here because
    the same function also takes a whole definition as one dict (the spec's JSON shape).
    Sides are plain ``SideFields`` (not a union) so a misspelt key inside one is reported by
    name; pass built ``SideConfig`` objects through the dict form.
    """

    name: str
    title: str | None
    type: AgentType
    max_session_turns: int | None
    side_a: SideFields
    side_b: SideFields
    expose_as_tool: bool
    primary: bool
    tool_description: str | None
    description: str | None
    icon: str | None
    env: Mapping[str, str]
    tenvs: Mapping[str, Any] | None
    package_name: str | None
    version: str | None
    author: str | None
    license: str | None
    hooks: Names
    parent_hooks: Sequence[ParentHookFields]
    input_guardrails: Names
    output_guardrails: Names
    usage_limits: UsageLimits | Mapping[str, Any] | None
    busy: BusyPolicy
    allow_overrides: bool
    on_definition_change: Literal["continue", "end"]
    memory: AgentMemoryFields | AgentMemory | None
    approvers: Names
    approval_expires_in: float | None


def _get(data: dict[str, Any], snake: str, camel: str) -> Any:
    return data.get(snake, data.get(camel))


def _side_problems(side: Any, where: str) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if isinstance(side, SideConfig):
        side = side.model_dump()
    if not isinstance(side, dict):
        return problems
    stop_tool = _get(side, "stop_tool", "stopTool")
    prop = _get(side, "stop_tool_response_property", "stopToolResponseProperty")
    if stop_tool and not prop:
        problems.append((f"{where}.stop_tool_response_property", "required when stop_tool is set (stopTool needs stopToolResponseProperty)"))
    return problems


def define_agent(definition: Mapping[str, Any] | None = None, /, **fields: Unpack[AgentFields]) -> AgentDefinition:
    """Validate an agent; every problem is reported at once, naming its field.

    Keywords are typed (an editor completes them, a type checker flags a misspelt one); a
    whole definition may instead come as one dict, in snake_case or the spec's camelCase.
    """
    data: dict[str, Any] = {**(definition or {}), **fields}
    problems: list[tuple[str, str]] = []
    name = data.get("name")
    if isinstance(name, str):
        bad = check_snake_case(name)
        if bad:
            problems.append(("name", bad))
    kind = data.get("type", "ai_human")
    side_b = _get(data, "side_b", "sideB")
    if kind == "dual_ai" and side_b is None:
        problems.append(("side_b", "a dual_ai agent needs side_b (sideB): the second AI participant"))
    if _get(data, "expose_as_tool", "exposeAsTool") and not _get(data, "tool_description", "toolDescription"):
        problems.append(("tool_description", "required when expose_as_tool is true (exposeAsTool needs toolDescription)"))
    if kind != "dual_ai" and _get(data, "parent_hooks", "parentHooks"):
        problems.append(("parent_hooks", "parent hooks apply only to dual_ai agents composed as child tools"))
    problems += _side_problems(_get(data, "side_a", "sideA"), "side_a")
    problems += _side_problems(side_b, "side_b")
    return build(AgentDefinition, data, problems)
