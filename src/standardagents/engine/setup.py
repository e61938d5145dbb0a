"""Setup resolution: what one side of an agent needs per step (prompt, model, tools, hooks,
guardrails, the static system prompt), resolved once per project version and cached, and the
model providers, one per endpoint configuration.

A :class:`Setups` belongs to one ``Runtime``; it reads the runtime's current registry, MCP
pool and plugins, so a reloaded project is seen by the next setup it builds.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..definitions import AgentDefinition, ModelDefinition, PromptDefinition, ToolDefinition
from ..exceptions import DefinitionError, NotFoundError
from ..project import DEFAULT_MODEL, load_project
from ..providers.base import ModelProvider
from ..registry import Registry
from ..toolsets import merge_toolsets, resolve_tool_name
from .context import extension_tools, prompt_is_static, render_prompt
from .digest import definitions_digest
from .hooks import HookSet
from .output import output_spec
from .side import SideSetup
from .tools import Toolbox, session_tool

if TYPE_CHECKING:
    from .hosts import SetupHost
    from .state import ThreadState

__all__ = ["Setups", "SideSetup"]

log = logging.getLogger("standardagents.runtime")


def _forget_project_modules(root: Path) -> None:
    """Drop the project's own helper modules from the import cache, so a reload reads the
    changed helpers too (definition files are always read afresh)."""
    inside = str(root.resolve()) + os.sep
    for name, module in list(sys.modules.items()):
        if (getattr(module, "__file__", None) or "").startswith(inside):
            sys.modules.pop(name, None)


class Setups:
    """The side setups and model providers of one runtime, each made once and reused until
    the project is reloaded (the per-step path only looks them up)."""

    def __init__(self, rt: SetupHost) -> None:
        self.rt = rt
        self._setups: dict[tuple[str, str, str | None], SideSetup] = {}
        self._digests: dict[tuple[str, str | None], str] = {}
        self._providers: dict[str, ModelProvider] = {}
        self._by_model: dict[int, tuple[ModelDefinition, ModelProvider]] = {}
        #: model name -> the provider installed for it with :meth:`use_provider`
        self._installed: dict[str, ModelProvider] = {}

    async def aclose(self) -> None:
        """Close every provider made here."""
        for provider in self._providers.values():
            try:
                await provider.aclose()
            except Exception:
                log.exception("closing a provider failed")

    def provider_for(self, model: ModelDefinition) -> ModelProvider:
        """One shared provider per endpoint configuration (the one installed for the model's
        name, if any: it answers every variant of the definition, such as the copy without
        retries of its own that a shared rate limit calls)."""
        cached = self._by_model.get(id(model))
        if cached is not None and cached[0] is model:
            return cached[1]
        provider = self._installed.get(model.name) or self._provider_for(model)
        self._by_model[id(model)] = (model, provider)
        return provider

    def _provider_for(self, model: ModelDefinition) -> ModelProvider:
        from ..exceptions import ProviderError
        from ..providers.factory import ProviderSpec, build_provider

        key = _endpoint_key(model)
        provider = self._providers.get(key)
        if provider is None:
            api_key = os.environ.get(model.api_key_env) if model.api_key_env else None
            # An unset key variable is not an error by itself: local endpoints need no key, and
            # the provider says clearly when a remote one does.
            spec = ProviderSpec(provider=model.provider, base_url=model.base_url, api_key=api_key,
                                api_key_env=model.api_key_env if api_key else None, timeout=model.timeout or 60.0, max_retries=model.max_retries,
                                headers=dict(model.headers), options=dict(model.options))
            try:
                provider = build_provider(spec)
            except ProviderError as exc:
                if exc.code != "missing_api_key":
                    raise
                where = (f"the environment variable {model.api_key_env} (its api_key_env) is not set"
                         if model.api_key_env else "set the key's variable and name it with api_key_env=... in define_model")
                raise ProviderError(f"no API key for model {model.name!r}: {where}", code="missing_api_key",
                                    retriable=False) from exc
            self._providers[key] = provider
        return provider

    def use_provider(self, model_name: str, provider: ModelProvider) -> None:
        """Route every request for a model definition to ``provider`` (tests, embedding)."""
        model = self.rt.registry.get("models", model_name) if self.rt.registry.has("models", model_name) else None
        if model is None:
            raise NotFoundError("model", model_name)
        self._providers[_endpoint_key(model)] = provider
        self._installed[model.name] = provider
        self._by_model.clear()

    async def model(self, name: str | None, namespace: str | None) -> ModelDefinition:
        override = self.rt.model_override
        if isinstance(override, ModelDefinition):
            return override
        if isinstance(override, str):
            name = override
        return await self.rt.registry.aget("models", name or DEFAULT_MODEL, namespace)

    async def side_setup(self, agent: AgentDefinition, side: Literal["a", "b"], namespace: str | None) -> SideSetup:
        key = (agent.name, side, namespace)
        setup = self._setups.get(key)
        if setup is None:
            setup = await self._build(agent, side, namespace)
            self._setups[key] = setup
        return setup

    def invalidate(self) -> None:
        """Forget cached side setups (after the project changed)."""
        self._setups.clear()
        self._digests.clear()

    async def definitions_digest(self, agent: AgentDefinition, namespace: str | None) -> str:
        """The digest of what a turn of ``agent`` runs on (every side's setup), kept on its
        execution record to tell, when the turn goes on later, whether a deploy changed it."""
        key = (agent.name, namespace)
        found = self._digests.get(key)
        if found is None:
            sides = [side for side in ("a", "b") if agent.side(side) is not None]
            found = self._digests[key] = definitions_digest(
                [await self.side_setup(agent, side, namespace) for side in sides])  # type: ignore[arg-type]
        return found

    async def current_setup(self, setup: SideSetup) -> SideSetup:
        """``setup``, or a fresh one when its MCP servers' tool lists moved since it was built."""
        if setup.mcp_generation is None or self.rt.mcp_pool is None or self.rt.mcp_pool.generation == setup.mcp_generation:
            return setup
        self._setups.pop((setup.agent.name, setup.side, setup.namespace), None)
        return await self.side_setup(setup.agent, setup.side, setup.namespace)

    def load_again(self) -> tuple[Registry | None, list[str]]:
        """Validate and load the project folder (touches nothing of the running runtime)."""
        from ..project import validate_project

        root = self.rt.registry.root
        if root is None:
            return None, ["this runtime was not opened from a project folder"]
        _forget_project_modules(Path(root))
        problems = [str(p) for p in validate_project(root) if not p.warning]
        if problems:
            log.warning("still serving the previous version of the project: %s", "; ".join(problems))
            return None, problems
        return load_project(root), []

    def swap_registry(self, registry: Registry) -> None:
        registry.packages = registry.packages or self.rt.registry.packages
        self.rt.registry = registry
        self._setups.clear()
        self._by_model.clear()
        log.info("reloaded the project from %s", registry.root)
        self.rt.bus.emit("project_reloaded", "", {"root": str(registry.root)})

    async def _build(self, agent: AgentDefinition, side: Literal["a", "b"], namespace: str | None) -> SideSetup:
        cfg = agent.side(side)
        if cfg is None:
            raise DefinitionError([(f"side_{side}", "this side is not configured")], source=f"agent {agent.name!r}")
        prompt: PromptDefinition = await self.rt.registry.aget("prompts", cfg.prompt, namespace)
        model = await self.model(prompt.model, namespace)
        fallbacks = [await self.rt.registry.aget("models", fb, namespace) for fb in model.fallbacks]
        toolbox = Toolbox()
        session_names = {b.name for b in (cfg.session_tool(k) for k in ("stop", "fail", "status")) if b is not None}
        resolved: list[ToolDefinition] = []
        for name in prompt.tool_names():
            if name in session_names and not self.rt.registry.has("tools", name, namespace):
                continue
            resolved.extend(await self.resolve_tools(name, namespace, agent))
        for tool in merge_toolsets(resolved):
            toolbox.tools[tool.name] = tool
        for kind in ("stop", "fail", "status"):
            binding = cfg.session_tool(kind)
            if binding is None:
                continue
            toolbox.session[binding.name] = kind
            if binding.name not in toolbox.tools:
                if self.rt.registry.has("tools", binding.name, namespace):
                    toolbox.tools[binding.name] = await self.rt.registry.aget("tools", binding.name, namespace)
                else:
                    toolbox.tools[binding.name] = session_tool(binding.name, kind, binding.message_property, binding.attachments_property)
        if cfg.stop_tool and cfg.stop_tool not in toolbox.tools and self.rt.registry.has("tools", cfg.stop_tool, namespace):
            toolbox.tools[cfg.stop_tool] = await self.rt.registry.aget("tools", cfg.stop_tool, namespace)
        skills_block: str | None = None
        if prompt.skills:
            from ..sandbox.tool import RUN_CODE_TOOL
            from ..skills import LOAD_SKILL_TOOL, fixed_catalogue, load_skill_tool

            if LOAD_SKILL_TOOL in toolbox.tools:
                raise DefinitionError([("skills", f"the prompt also offers a tool named {LOAD_SKILL_TOOL!r}, "
                                                  "the tool that loads skills: rename that tool")],
                                      source=prompt.source_file or f"prompt {prompt.name!r}")
            toolbox.tools[LOAD_SKILL_TOOL] = load_skill_tool(prompt.skills, workspace=RUN_CODE_TOOL in toolbox.tools)
            skills_block = fixed_catalogue(self.rt.registry, namespace, prompt.skills)
        catalogue = None
        if prompt.tool_discovery == "ondemand":
            from ..toolcalls import catalogue_text
            from .ondemand import load_tools_definition

            listed = [t.openai_tool() for n, t in toolbox.tools.items() if n not in toolbox.session]
            catalogue = catalogue_text(listed)
            loader = load_tools_definition([t["function"]["name"] for t in listed])
            toolbox.tools[loader.name] = loader
        for tool in extension_tools(self.rt, agent):  # memory's tools, when the agent sets memory
            toolbox.tools.setdefault(tool.name, tool)
        toolbox.offered = [t.openai_tool() for t in toolbox.tools.values()]
        hooks = await self.hook_set(agent, prompt, namespace)
        static = None
        # a skills list that could match a thread's installed skills is rendered per turn
        # (render_system); one naming only the project's skills is part of the static prompt
        if (not prompt.skills or skills_block is not None) and prompt_is_static(prompt, self.rt.registry, namespace):
            static = await render_prompt(prompt, None, self.rt.registry, namespace)
            if catalogue:
                static = f"{static}\n\n{catalogue}" if static else catalogue
            if skills_block:
                static = f"{static}\n\n{skills_block}" if static else skills_block
        guards: dict[str, list[ToolDefinition]] = {}
        for kind, names in (("input", [*agent.input_guardrails, *prompt.input_guardrails]),
                            ("output", [*agent.output_guardrails, *prompt.output_guardrails])):
            guards[kind] = [await self.rt.registry.aget("tools", n, namespace) for n in dict.fromkeys(names)]
        mcp_generation = None
        if self.rt.mcp_pool is not None and any(t.origin == "mcp" for t in toolbox.tools.values()):
            mcp_generation = self.rt.mcp_pool.generation
        return SideSetup(agent, side, prompt, model, fallbacks, toolbox, hooks, namespace, static, catalogue,
                         guards["input"], guards["output"], mcp_generation,
                         output=output_spec(prompt.output_type) if prompt.output_type is not None else None)

    async def resolve_tools(self, name: str, namespace: str | None, agent: AgentDefinition) -> list[ToolDefinition]:
        """The tools one entry of a prompt's ``tools`` names: a code or plugin tool, an
        agent exposed as a tool, or an MCP server's tools (``mcp:server``, ``mcp:server/tool``)."""
        if not self.rt.registry.has("tools", name, namespace) and self.rt.registry.has("agents", name, namespace):
            from .composition import agent_tool

            child = await self.rt.registry.aget("agents", name, namespace)
            return [agent_tool(self.rt, child, self.rt.registry.namespace_of("agents", name, namespace))]
        servers = {e.name: e.value for e in self.rt.registry.entries("mcp", namespace)}
        if servers and self.rt.mcp_pool is None:
            from ..mcp import MCPPool

            self.rt.mcp_pool = MCPPool(list(servers.values()))
        try:
            return await resolve_tool_name(name, registry=self.rt.registry, namespace=namespace, pool=self.rt.mcp_pool,
                                           plugins=self.rt.plugins, servers=servers)
        except NotFoundError as exc:
            raise NotFoundError("tool", name, f"named by agent {agent.name!r}: {exc}") from None

    async def resolve_tool(self, name: str, namespace: str | None, agent: AgentDefinition) -> ToolDefinition:
        """One tool by its final name (as a model calls it)."""
        for tool in await self.resolve_tools(name, namespace, agent):
            if tool.name == name:
                return tool
        raise NotFoundError("tool", name, f"named by agent {agent.name!r}")

    async def hook_set(self, agent: AgentDefinition, prompt: PromptDefinition | None, namespace: str | None) -> HookSet:
        """The active hooks: the prompt's list, else the agent's, with provenance."""
        hooks = HookSet()
        if prompt is not None and prompt.hooks is not None:
            ids, source = prompt.hooks, {"kind": "prompt", "promptName": prompt.name}
        else:
            ids, source = agent.hooks, {"kind": "agent", "agentName": agent.name}
        own = [(await self.rt.registry.aget("hooks", hook_id, namespace), source) for hook_id in ids]
        before, after = await self.parent_hooks(agent, prompt, namespace)
        for definition, src in (*before, *own, *after):
            hooks.add(definition, src)
        return hooks

    async def parent_hooks(self, agent: AgentDefinition, prompt: PromptDefinition | None, namespace: str | None) -> tuple[list[Any], list[Any]]:
        """Hooks required by child agents that ``prompt`` exposes as tools."""
        before: list[Any] = []
        after: list[Any] = []
        if prompt is None:
            return before, after
        for name in prompt.tool_names():
            entry = self.rt.registry.find("agents", name, namespace)
            if entry is None:
                continue
            child: AgentDefinition = await self.rt.registry.aget("agents", name, namespace)
            if child.type != "dual_ai" or not child.parent_hooks:
                continue
            for req in child.parent_hooks:
                definition = await self.rt.registry.aget("hooks", req.hook, entry.package)
                src: dict[str, Any] = {"kind": "child", "relationshipName": name, "agentName": child.name}
                if entry.package is not None:
                    pkg = self.rt.registry.packages.get(entry.package)
                    src["package"] = getattr(pkg, "signature", None) or {"packageId": entry.package}
                (before if req.stage == "before_parent" else after).append((definition, src))
        return before, after

    async def render_system(self, setup: SideSetup, state: ThreadState) -> str:
        text = await render_prompt(setup.prompt, state, self.rt.registry, setup.namespace)
        if setup.catalogue:
            text = f"{text}\n\n{setup.catalogue}" if text else setup.catalogue
        if setup.prompt.skills:
            # the enabled skills' names and descriptions, read once per turn
            block = await state.skills.catalogue(setup.prompt.skills)
            if block:
                text = f"{text}\n\n{block}" if text else block
        return text


def _endpoint_key(model: ModelDefinition) -> str:
    """What makes two model definitions share one provider: their endpoint's configuration."""
    return (f"{model.provider}|{model.base_url}|{model.api_key_env}|{model.timeout}|{model.max_retries}|"
            f"{sorted(model.headers.items())}")
