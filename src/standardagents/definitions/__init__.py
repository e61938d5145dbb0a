"""The spec's definition types as Pydantic models, and the ``define_*`` functions.

Every definition accepts Python's snake_case field names and the spec's camelCase ones, so a
definition written in the spec's JSON shape loads unchanged.
"""

from ._base import Definition
from .agent import (
    AgentDefinition,
    ParentHookRequirement,
    SessionToolConfig,
    SideConfig,
    define_agent,
)
from .effect import EffectDefinition, define_effect
from .endpoint import (
    ControllerDefinition,
    EndpointAccess,
    ThreadEndpointDefinition,
    define_controller,
    define_thread_endpoint,
    get_endpoint_access,
    is_thread_endpoint,
)
from .hook import HOOK_NAMES, THREAD_HOOK_NAMES, USER_HOOK_NAMES, HookDefinition, define_hook
from .model import ModelDefinition, define_model
from .prompt import (
    PromptDefinition,
    PromptEnvPart,
    PromptIncludePart,
    PromptPart,
    PromptTextPart,
    PromptToolConfig,
    define_prompt,
)
from .tool import ToolDefinition, define_tool

__all__ = [
    "HOOK_NAMES",
    "THREAD_HOOK_NAMES",
    "USER_HOOK_NAMES",
    "AgentDefinition",
    "ControllerDefinition",
    "Definition",
    "EffectDefinition",
    "EndpointAccess",
    "HookDefinition",
    "ModelDefinition",
    "ParentHookRequirement",
    "PromptDefinition",
    "PromptEnvPart",
    "PromptIncludePart",
    "PromptPart",
    "PromptTextPart",
    "PromptToolConfig",
    "SessionToolConfig",
    "SideConfig",
    "ThreadEndpointDefinition",
    "ToolDefinition",
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
