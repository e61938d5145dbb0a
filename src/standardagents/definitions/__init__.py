"""The spec's definition types as Pydantic models, and the ``define_*`` functions.

Every ``define_*`` has a typed signature (``TypedDict`` + ``Unpack`` for the keyword forms,
``Literal`` for enumerations), so editors complete fields and type checkers flag misspelt
ones. A whole definition may also come as one dict, in snake_case or the spec's camelCase,
so a definition written in the spec's JSON shape loads unchanged.
"""

from ._base import Definition
from .agent import (
    AgentDefinition,
    AgentFields,
    AgentType,
    BusyPolicy,
    ParentHookFields,
    ParentHookRequirement,
    SessionToolConfig,
    SessionToolFields,
    SideConfig,
    SideFields,
    define_agent,
)
from .effect import EffectDefinition, define_effect
from .endpoint import (
    ControllerDefinition,
    EndpointAccess,
    EndpointOptions,
    ThreadEndpointDefinition,
    define_controller,
    define_thread_endpoint,
    get_endpoint_access,
    is_thread_endpoint,
)
from .hook import (
    HOOK_NAMES,
    THREAD_HOOK_NAMES,
    USER_HOOK_NAMES,
    HookDefinition,
    HookName,
    define_hook,
)
from .limits import UsageLimits
from .model import ModelDefinition, ModelFields, define_model
from .prompt import (
    PromptDefinition,
    PromptEnvPart,
    PromptFields,
    PromptIncludePart,
    PromptPart,
    PromptPartFields,
    PromptTextPart,
    PromptToolConfig,
    PromptToolFields,
    ToolChoice,
    ToolDiscovery,
    define_prompt,
)
from .tool import ToolDefinition, ToolOptions, define_tool

__all__ = [
    "HOOK_NAMES",
    "THREAD_HOOK_NAMES",
    "USER_HOOK_NAMES",
    "AgentDefinition",
    "AgentFields",
    "AgentType",
    "BusyPolicy",
    "ControllerDefinition",
    "Definition",
    "EffectDefinition",
    "EndpointAccess",
    "EndpointOptions",
    "HookDefinition",
    "HookName",
    "ModelDefinition",
    "ModelFields",
    "ParentHookFields",
    "ParentHookRequirement",
    "PromptDefinition",
    "PromptEnvPart",
    "PromptFields",
    "PromptIncludePart",
    "PromptPart",
    "PromptPartFields",
    "PromptTextPart",
    "PromptToolConfig",
    "PromptToolFields",
    "SessionToolConfig",
    "SessionToolFields",
    "SideConfig",
    "SideFields",
    "ThreadEndpointDefinition",
    "ToolChoice",
    "ToolDefinition",
    "ToolDiscovery",
    "ToolOptions",
    "UsageLimits",
    "define_agent",
    "define_controller",
    "define_effect",
    "define_hook",
    "define_model",
    "define_prompt",
    "define_thread_endpoint",
    "define_tool",
    "get_endpoint_access",
    "is_thread_endpoint",
]
