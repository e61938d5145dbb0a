"""The package's public surface: what ``import standardagents`` promises."""

from __future__ import annotations

import standardagents

PUBLIC = {
    # defining a project: every define_* a project file needs, with its typed fields
    "define_agent", "define_prompt", "define_model", "define_tool", "define_hook", "define_effect",
    "define_controller", "define_thread_endpoint", "define_user_endpoint", "define_mcp_server",
    "define_a2a_agent",
    "AgentFields", "SideFields", "SessionToolFields", "PromptFields", "PromptToolFields", "ModelFields",
    "ToolOptions", "HookName", "EndpointAccess",
    # the definitions those functions return
    "AgentDefinition", "PromptDefinition", "ModelDefinition", "ToolDefinition", "HookDefinition",
    "EffectDefinition", "ControllerDefinition", "ThreadEndpointDefinition", "UserEndpointDefinition",
    "MCPServerDefinition",
    "SideConfig", "SessionToolConfig", "UsageLimits",
    # running it
    "Runtime", "ThreadState", "ExecutionResult", "Registry", "load_project", "validate_project",
    "Event", "EventBus", "Message", "ThreadRecord", "ToolCall", "ToolResult", "Usage",
    # a user's credential grants, as tools receive them
    "CredentialGrant", "Credential", "CredentialError",
    # what a tool declares it needs, the state it gets, and its fetch
    "VariableDefinition", "VariableType", "NetworkPolicy", "ToolState", "EmptyUsesState", "FilesUse", "MessagesUse",
    "EnvUse", "ValuesUse", "SubagentsUse", "CodeUse", "NetworkUse", "ToolsUse", "EffectsUse", "CredentialsUse",
    "SkillsUse", "ToolCapabilityError", "ToolVariableError", "FetchError", "FetchResponse",
    # model providers a project defines
    "define_provider", "ProviderDefinition", "ProviderFields", "provider_const", "provider_env", "provider_value",
    "map_reasoning_level",
    # skills: what state.skills lists and installs
    "SkillMetadata", "SkillFileInput", "SkillsNamespace",
    # errors and signals
    "StandardAgentsError", "DefinitionError", "ProjectError", "NotFoundError", "ProviderError",
    "InjectionRejected", "ModelRetry",
    "__version__",
}


def test_the_root_exports_exactly_its_public_names():
    assert set(standardagents.__all__) == PUBLIC
    assert len(set(standardagents.__all__)) == len(standardagents.__all__)
    assert [name for name in standardagents.__all__ if getattr(standardagents, name, None) is None] == []


def test_every_define_function_a_project_file_needs_imports_from_the_package_root():
    from standardagents import define_mcp_server

    server = define_mcp_server("files", command="python", args=["-m", "files_server"])
    assert server.transport == "stdio"
    defines = {name for name in dir(standardagents) if name.startswith("define_")}
    assert defines == {name for name in PUBLIC if name.startswith("define_")}


def test_the_package_is_typed():
    from importlib.resources import files

    assert files("standardagents").joinpath("py.typed").is_file()
