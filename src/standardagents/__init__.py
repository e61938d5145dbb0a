"""standardagents: a Python runtime for the Standard Agents specification.

Write agents, prompts, tools, models, hooks and effects as Python, and run them for real:
threads against real model providers, durable storage, live events, and an HTTP server.
"""

from __future__ import annotations

from .definitions import (
    AgentDefinition,
    ControllerDefinition,
    EffectDefinition,
    HookDefinition,
    ModelDefinition,
    PromptDefinition,
    SessionToolConfig,
    SideConfig,
    ThreadEndpointDefinition,
    ToolDefinition,
    define_agent,
    define_controller,
    define_effect,
    define_hook,
    define_model,
    define_prompt,
    define_thread_endpoint,
    define_tool,
)
from .engine import ExecutionResult, Runtime, ThreadState
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
from .project import load_project, validate_project
from .records import Message, ThreadRecord, ToolCall, ToolResult, Usage
from .registry import Registry

__version__ = "0.1.0"

__all__ = [
    "AgentDefinition",
    "ControllerDefinition",
    "DefinitionError",
    "EffectDefinition",
    "Event",
    "EventBus",
    "ExecutionResult",
    "HookDefinition",
    "InjectionRejected",
    "Message",
    "ModelDefinition",
    "ModelRetry",
    "NotFoundError",
    "ProjectError",
    "PromptDefinition",
    "ProviderError",
    "Registry",
    "Runtime",
    "SessionToolConfig",
    "SideConfig",
    "StandardAgentsError",
    "ThreadEndpointDefinition",
    "ThreadRecord",
    "ThreadState",
    "ToolCall",
    "ToolDefinition",
    "ToolResult",
    "Usage",
    "__version__",
    "define_agent",
    "define_controller",
    "define_effect",
    "define_hook",
    "define_model",
    "define_prompt",
    "define_thread_endpoint",
    "define_tool",
    "load_project",
    "validate_project",
]
