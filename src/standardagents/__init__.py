"""standardagents: a Python runtime for the Standard Agents specification.

Write agents, prompts, tools, models, hooks and effects as Python, and run them for real:
threads against real model providers, durable storage, live events, and an HTTP server.

The names below are imported on first use (PEP 562), so ``import standardagents`` and every
command line start stay cheap; type checkers and editors see them through the
``TYPE_CHECKING`` imports.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .a2a_agents import define_a2a_agent
    from .credentials import Credential, CredentialError, CredentialGrant
    from .definitions import (
        AgentDefinition,
        AgentFields,
        ControllerDefinition,
        EffectDefinition,
        EndpointAccess,
        HookDefinition,
        HookName,
        ModelDefinition,
        ModelFields,
        PromptDefinition,
        PromptFields,
        PromptToolFields,
        SessionToolConfig,
        SessionToolFields,
        SideConfig,
        SideFields,
        ThreadEndpointDefinition,
        ToolDefinition,
        ToolOptions,
        UsageLimits,
        UserEndpointDefinition,
        define_agent,
        define_controller,
        define_effect,
        define_hook,
        define_model,
        define_prompt,
        define_thread_endpoint,
        define_tool,
        define_user_endpoint,
    )
    from .definitions.provider import (
        ProviderDefinition,
        ProviderFields,
        define_provider,
        map_reasoning_level,
        provider_const,
        provider_env,
        provider_value,
    )
    from .definitions.variables import NetworkPolicy, VariableDefinition, VariableType
    from .engine import ExecutionResult, Runtime, ThreadState
    from .engine.tool_state import (
        CodeUse,
        CredentialsUse,
        EffectsUse,
        EmptyUsesState,
        EnvUse,
        FilesUse,
        MessagesUse,
        NetworkUse,
        SkillsUse,
        SubagentsUse,
        ToolCapabilityError,
        ToolState,
        ToolsUse,
        ToolVariableError,
        ValuesUse,
    )
    from .events import Event, EventBus
    from .exceptions import (
        DefinitionError,
        InjectionRejected,
        ModelRetry,
        NotFoundError,
        ProjectError,
        ProviderError,
        StandardAgentsError,
    )
    from .fetch import FetchError, FetchResponse
    from .mcp import MCPServerDefinition, define_mcp_server
    from .project import load_project, validate_project
    from .records import Message, ThreadRecord, ToolCall, ToolResult, Usage
    from .registry import Registry
    from .skills import SkillFileInput, SkillMetadata, SkillsNamespace

__version__ = "0.1.0"

#: the module each public name comes from, as the imports above say
_EXPORTS: dict[str, tuple[str, ...]] = {
    ".a2a_agents": ("define_a2a_agent",),
    ".credentials": ("Credential", "CredentialError", "CredentialGrant"),
    ".definitions": (
        "AgentDefinition", "AgentFields", "ControllerDefinition", "EffectDefinition", "EndpointAccess",
        "HookDefinition", "HookName", "ModelDefinition", "ModelFields", "PromptDefinition", "PromptFields",
        "PromptToolFields", "SessionToolConfig", "SessionToolFields", "SideConfig", "SideFields",
        "ThreadEndpointDefinition", "ToolDefinition", "ToolOptions", "UsageLimits", "UserEndpointDefinition",
        "define_agent", "define_controller", "define_effect", "define_hook", "define_model", "define_prompt",
        "define_thread_endpoint", "define_tool", "define_user_endpoint",
    ),
    ".definitions.provider": (
        "ProviderDefinition", "ProviderFields", "define_provider", "map_reasoning_level", "provider_const",
        "provider_env", "provider_value",
    ),
    ".definitions.variables": ("NetworkPolicy", "VariableDefinition", "VariableType"),
    ".engine": ("ExecutionResult", "Runtime", "ThreadState"),
    ".engine.tool_state": (
        "CodeUse", "CredentialsUse", "EffectsUse", "EmptyUsesState", "EnvUse", "FilesUse", "MessagesUse", "NetworkUse",
        "SkillsUse", "SubagentsUse", "ToolCapabilityError", "ToolState", "ToolsUse", "ToolVariableError", "ValuesUse",
    ),
    ".fetch": ("FetchError", "FetchResponse"),
    ".events": ("Event", "EventBus"),
    ".exceptions": (
        "DefinitionError", "InjectionRejected", "ModelRetry", "NotFoundError", "ProjectError", "ProviderError",
        "StandardAgentsError",
    ),
    ".mcp": ("MCPServerDefinition", "define_mcp_server"),
    ".project": ("load_project", "validate_project"),
    ".records": ("Message", "ThreadRecord", "ToolCall", "ToolResult", "Usage"),
    ".registry": ("Registry",),
    ".skills": ("SkillFileInput", "SkillMetadata", "SkillsNamespace"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "AgentDefinition",
    "AgentFields",
    "CodeUse",
    "ControllerDefinition",
    "Credential",
    "CredentialError",
    "CredentialGrant",
    "CredentialsUse",
    "DefinitionError",
    "EffectDefinition",
    "EffectsUse",
    "EmptyUsesState",
    "EndpointAccess",
    "EnvUse",
    "Event",
    "EventBus",
    "ExecutionResult",
    "FetchError",
    "FetchResponse",
    "FilesUse",
    "HookDefinition",
    "HookName",
    "InjectionRejected",
    "MCPServerDefinition",
    "Message",
    "MessagesUse",
    "ModelDefinition",
    "ModelFields",
    "ModelRetry",
    "NetworkPolicy",
    "NetworkUse",
    "NotFoundError",
    "ProjectError",
    "PromptDefinition",
    "PromptFields",
    "PromptToolFields",
    "ProviderDefinition",
    "ProviderError",
    "ProviderFields",
    "Registry",
    "Runtime",
    "SessionToolConfig",
    "SessionToolFields",
    "SideConfig",
    "SideFields",
    "SkillFileInput",
    "SkillMetadata",
    "SkillsNamespace",
    "SkillsUse",
    "StandardAgentsError",
    "SubagentsUse",
    "ThreadEndpointDefinition",
    "ThreadRecord",
    "ThreadState",
    "ToolCall",
    "ToolCapabilityError",
    "ToolDefinition",
    "ToolOptions",
    "ToolResult",
    "ToolState",
    "ToolVariableError",
    "ToolsUse",
    "Usage",
    "UsageLimits",
    "UserEndpointDefinition",
    "ValuesUse",
    "VariableDefinition",
    "VariableType",
    "__version__",
    "define_a2a_agent",
    "define_agent",
    "define_controller",
    "define_effect",
    "define_hook",
    "define_mcp_server",
    "define_model",
    "define_prompt",
    "define_provider",
    "define_thread_endpoint",
    "define_tool",
    "define_user_endpoint",
    "load_project",
    "map_reasoning_level",
    "provider_const",
    "provider_env",
    "provider_value",
    "validate_project",
]


def __getattr__(name: str) -> Any:
    """Import a public name (or a subpackage) the first time it is asked for."""
    module = _HOME.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
