"""Loading an agents project folder into a :class:`~standardagents.registry.Registry`.

A project is a folder with ``agents/agents``, ``agents/prompts``, ``agents/tools``,
``agents/models``, ``agents/hooks``, ``agents/effects`` and ``agents/api``. Each Python file
there is imported and the definitions it holds are registered under their names.
Every problem (a file that fails to import, a definition that does not validate, a
duplicate name, a reference to something that does not exist) is collected and reported
together, each with its file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .definitions import (
    AgentDefinition,
    ControllerDefinition,
    EffectDefinition,
    HookDefinition,
    ModelDefinition,
    PromptDefinition,
    ThreadEndpointDefinition,
    ToolDefinition,
    UserEndpointDefinition,
    define_model,
)
from .definitions.authorization import AuthorizationDefinition
from .definitions.provider import ProviderDefinition
from .definitions.schedule import ScheduleDefinition
from .definitions.user_endpoint import routes_collide
from .definitions.webhook import WebhookDefinition
from .exceptions import DefinitionError, ProjectError
from .registry import Registry

__all__ = ["DEFAULT_MODEL", "Problem", "build_registry", "default_model", "exec_module", "import_file", "load_project",
           "load_project_problems", "problems_reaching", "validate_project"]

DEFAULT_MODEL = "default"

_FOLDERS: dict[str, tuple[str, type]] = {
    "agents": ("agents", AgentDefinition),
    "prompts": ("prompts", PromptDefinition),
    "tools": ("tools", ToolDefinition),
    "models": ("models", ModelDefinition),
    "hooks": ("hooks", HookDefinition),
    "effects": ("effects", EffectDefinition),
    "providers": ("providers", ProviderDefinition),
    "authorizations": ("authorization", AuthorizationDefinition),
    "schedules": ("schedules", ScheduleDefinition),
    "webhooks": ("webhooks", WebhookDefinition),
}


@dataclass(slots=True)
class Problem:
    """One problem found in a project, with the file it is in."""

    file: str
    message: str
    warning: bool = False
    #: the file itself failed to import (its definitions are missing, not wrong)
    broken: bool = False
    #: for a reference to nothing: the name referred to
    ref: str = ""

    def __str__(self) -> str:
        return f"{self.file}: {self.message}" if self.file else self.message


@dataclass
class LoadResult:
    registry: Registry
    problems: list[Problem] = field(default_factory=list)


def default_model() -> ModelDefinition:
    """The model used when a prompt names none: a real endpoint when the environment
    points at one (``OPENAI_API_KEY`` or ``OPENAI_BASE_URL``), else the offline test model."""
    name = os.environ.get("STANDARDAGENTS_MODEL")
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return define_model(name=DEFAULT_MODEL, provider="openai", model=name or os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
                            base_url=os.environ.get("OPENAI_BASE_URL"), api_key_env="OPENAI_API_KEY")
    return define_model(name=DEFAULT_MODEL, provider="test", model=name or "offline")


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def import_file(path: Path, namespace: str = "sa_project") -> ModuleType:
    """Import one project file under a private, stable module name."""
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    mod_name = f"_{namespace}_{path.stem.replace('.', '_').replace('[', '_').replace(']', '_').replace('*', 'all')}_{digest}"
    return exec_module(mod_name, path)


def exec_module(name: str, path: Path, *, package_dir: Path | None = None) -> ModuleType:
    """Import ``path`` as module ``name`` (a package when ``package_dir`` is given); a module
    that fails to import leaves nothing behind in ``sys.modules``."""
    spec = importlib.util.spec_from_file_location(
        name, path, submodule_search_locations=[str(package_dir)] if package_dir is not None else None)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def definitions_in(module: ModuleType, cls: type) -> list[Any]:
    """The definitions of type ``cls`` a module holds: ``default`` if set, else every one."""
    default = getattr(module, "default", None)
    if isinstance(default, cls):
        return [default]
    seen: list[Any] = []
    for value in vars(module).values():
        if isinstance(value, cls) and not any(value is s for s in seen):
            seen.append(value)
    return seen


def _name_of(kind: str, definition: Any) -> str:
    return str(definition.id if kind == "hooks" else definition.name)


def _describe_error(exc: BaseException, file: Path) -> str:
    """What went wrong in a user's file, at the user's line: never a line of the import
    machinery or of a library the file called."""
    if isinstance(exc, DefinitionError):
        return "; ".join(f"{w}: {m}" if w else m for w, m in exc.problems)
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        if exc.filename and Path(exc.filename).resolve() != file.resolve():
            return f"{type(exc).__name__} in {exc.filename}, line {exc.lineno}: {exc.msg}"
        return f"line {exc.lineno}: {type(exc).__name__}: {exc.msg}"
    target = str(file.resolve())
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if str(Path(f.filename).resolve()) == target]
    where = f"line {frames[-1].lineno}: " if frames else ""
    return f"{where}{type(exc).__name__}: {exc}"


def load_project(path: str | Path, *, strict: bool = True, agent: str | None = None) -> Registry:
    """Load a project folder. With ``strict``, raise :class:`ProjectError` listing every problem
    (with ``agent``, only the problems in the files that agent reaches: a broken file elsewhere
    does not stop it)."""
    result = _load(Path(path))
    errors = [p for p in result.problems if not p.warning]
    if agent is not None:
        errors = problems_reaching(result.registry, errors, agent)
    if strict and errors:
        raise ProjectError([(p.file, p.message) for p in errors], source=str(path))
    return result.registry


def load_project_problems(path: str | Path) -> tuple[Registry, list[Problem]]:
    """A project's registry (everything that loaded) and its problems, without raising."""
    result = _load(Path(path))
    return result.registry, result.problems


def validate_project(path: str | Path) -> list[Problem]:
    """Every problem in a project (errors and warnings), without raising."""
    return _load(Path(path)).problems


def _load(root: Path) -> LoadResult:
    root = root.resolve()
    registry = Registry()
    registry.root = root
    result = LoadResult(registry)
    base = root / "agents"
    if not root.is_dir():
        result.problems.append(Problem(str(root), "project folder does not exist"))
        return result
    if not base.is_dir():
        result.problems.append(Problem(str(root), "not an agents project: there is no agents/ folder"))
        return result
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    origins: dict[tuple[str, str], str] = {}
    for kind, (folder, cls) in _FOLDERS.items():
        directory = base / folder
        if not directory.is_dir():
            continue
        for file in sorted(directory.rglob("*.py")):
            if file.name.startswith("_"):
                continue
            rel = _rel(file, root)
            try:
                module = import_file(file)
            except BaseException as exc:  # a user's file may raise anything on import
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                result.problems.append(Problem(rel, _describe_error(exc, file), broken=True))
                continue
            found = definitions_in(module, cls)
            if not found:
                result.problems.append(Problem(rel, f"defines no {kind[:-1]} (expected a value made with define_{kind[:-1]})", warning=True))
            for definition in found:
                name = _name_of(kind, definition)
                key = (kind, name)
                if key in origins:
                    result.problems.append(Problem(rel, f"duplicate {kind[:-1]} name {name!r} (also defined in {origins[key]})"))
                    continue
                origins[key] = rel
                registry.add(kind, name, definition.model_copy(update={"source_file": rel}), source=rel)
    if not registry.has("models", DEFAULT_MODEL):
        registry.add("models", DEFAULT_MODEL, default_model(), source="(built-in)")
    add_builtin_tools(registry)
    result.problems.extend(register_providers(registry))
    _load_endpoints(base / "api", root, registry, result)
    from .skills import add_skills_folder

    for bad_skill in add_skills_folder(registry, base / "skills", lambda file: _rel(file, root)):
        result.problems.append(Problem(bad_skill.file, bad_skill.message, warning=bad_skill.warning))
    from .mcp import load_mcp_servers

    servers, mcp_problems = load_mcp_servers(root)
    result.problems.extend(mcp_problems)
    for server in servers:
        registry.add("mcp", server.name, server, source=server.source_file)
    from .packages.discover import load_packages_into

    result.problems.extend(load_packages_into(registry, root))
    # a name whose file failed to import is already reported there: no knock-on "unknown" errors
    broken = {_stem(p.file) for p in result.problems if p.broken}
    result.problems.extend(p for p in check_references(registry) if not _is_knock_on(p, broken))
    return result


def problems_reaching(registry: Registry, problems: list[Problem], agent: str) -> list[Problem]:
    """The problems that stand in the way of running ``agent``: those in the files it reaches
    (its prompts, tools, models, hooks and the agents it calls), and the files that failed to
    import where something it names should have been defined."""
    files: set[str] = set()
    missing: set[str] = set()
    seen: set[tuple[str, str]] = set()
    uses_skills = False

    def visit(kind: str, name: str) -> Any:
        if (kind, name) in seen:
            return None
        seen.add((kind, name))
        entry = registry.find(kind, name)
        if entry is None or entry.value is None:
            missing.add(name)
            return None
        if entry.source:
            files.add(entry.source)
        return entry.value

    def visit_agent(name: str) -> None:
        found = visit("agents", name)
        if found is None:
            return
        for side in (found.side_a, found.side_b):
            if side is not None:
                visit_prompt(side.prompt)
        for hook in (*found.hooks, *(r.hook for r in found.parent_hooks)):
            visit("hooks", hook)
        for tool in (*found.input_guardrails, *found.output_guardrails):
            visit("tools", tool)

    def visit_model(name: str) -> None:
        found = visit("models", name)
        for fallback in getattr(found, "fallbacks", ()):
            visit_model(fallback)

    def visit_prompt(name: str) -> None:
        nonlocal uses_skills
        found = visit("prompts", name)
        if found is None:
            return
        visit_model(found.model or DEFAULT_MODEL)
        if found.skills:
            uses_skills = True
        for include in found.includes():
            visit_prompt(include)
        for hook in found.hooks or []:
            visit("hooks", hook)
        for tool in (*found.tool_names(), *found.input_guardrails, *found.output_guardrails):
            if registry.has("agents", tool) and not registry.has("tools", tool):
                visit_agent(tool)
            elif tool.startswith("mcp:"):
                visit("mcp", tool[4:].split("/", 1)[0])
            elif not registry.has("mcp", tool):
                visit("tools", tool)

    visit_agent(agent)
    return [p for p in problems
            if not p.file or p.file in files or (p.broken and _stem(p.file) in missing)
            or (uses_skills and _is_skill_file(p.file))]


def _is_skill_file(file: str) -> bool:
    """A file of the project's skills (a prompt that enables skills reaches them all)."""
    return Path(file).parts[:2] == ("agents", "skills")


def _stem(file: str) -> str:
    return Path(file).name.split(".", 1)[0]


def _is_knock_on(problem: Problem, broken: set[str]) -> bool:
    return bool(problem.ref) and problem.ref in broken


def _load_endpoints(api: Path, root: Path, registry: Registry, result: LoadResult) -> None:
    if not api.is_dir():
        return
    for file in sorted(api.rglob("*.py")):
        if file.name.startswith("_"):
            continue
        rel = _rel(file, root)
        try:
            module = import_file(file, "sa_api")
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            result.problems.append(Problem(rel, _describe_error(exc, file), broken=True))
            continue
        route = str(file.relative_to(api).with_suffix(""))
        user = definitions_in(module, UserEndpointDefinition)
        thread = definitions_in(module, ThreadEndpointDefinition)
        ctrl = definitions_in(module, ControllerDefinition)
        if user:
            other = next((e for e in registry.all_entries("user_endpoints") if routes_collide(e.name, route)), None)
            if other is not None:
                result.problems.append(Problem(rel, f"user endpoint {route!r} has the same route as {other.name!r} "
                                                    f"(defined in {other.source}): rename or remove one"))
            else:
                registry.add("user_endpoints", route, user[0], source=rel)
        elif thread:
            registry.add("thread_endpoints", route, thread[0], source=rel)
        elif ctrl:
            registry.add("controllers", route, ctrl[0], source=rel)
        else:
            result.problems.append(Problem(rel, "defines no endpoint (expected define_controller, define_thread_endpoint "
                                                "or define_user_endpoint)"))


def check_references(registry: Registry, namespace: str | None = None) -> list[Problem]:
    """Every reference that points at nothing: prompts, tools, models, hooks, includes."""
    from .toolsets import plugins as plugin_tools

    problems: list[Problem] = []
    for entry in registry.entries("agents", namespace):
        agent = entry.value
        if agent is None or entry.package != namespace:
            continue
        src = entry.source or f"agent {agent.name}"
        for which, side in (("side_a", agent.side_a), ("side_b", agent.side_b)):
            if side is None:
                continue
            if not registry.has("prompts", side.prompt, namespace):
                problems.append(Problem(src, f"{which}.prompt: unknown prompt {side.prompt!r}", ref=side.prompt))
        for hook_id in agent.hooks:
            if not registry.has("hooks", hook_id, namespace):
                problems.append(Problem(src, f"hooks: unknown hook id {hook_id!r}", ref=hook_id))
        for req in agent.parent_hooks:
            if not registry.has("hooks", req.hook, namespace):
                problems.append(Problem(src, f"parent_hooks: unknown hook id {req.hook!r}", ref=req.hook))
        for g in (*agent.input_guardrails, *agent.output_guardrails):
            if not registry.has("tools", g, namespace):
                problems.append(Problem(src, f"guardrails: unknown tool {g!r}", ref=g))
    for entry in registry.entries("prompts", namespace):
        prompt = entry.value
        if prompt is None or entry.package != namespace:
            continue
        src = entry.source or f"prompt {prompt.name}"
        if prompt.model and not registry.has("models", prompt.model, namespace):
            problems.append(Problem(src, f"model: unknown model {prompt.model!r}", ref=prompt.model))
        for tool in prompt.tool_names():
            if registry.has("tools", tool, namespace):
                continue
            if registry.has("agents", tool, namespace):
                agent_entry = registry.find("agents", tool, namespace)
                agent = agent_entry.value if agent_entry else None
                if agent is not None and not agent.expose_as_tool:
                    problems.append(Problem(src, f"tools: agent {tool!r} is not exposed as a tool (set expose_as_tool)"))
                continue
            if registry.has("mcp", tool, namespace) or tool in plugin_tools:
                continue
            if tool.startswith("mcp:"):
                server = tool[4:].split("/", 1)[0]
                if not registry.has("mcp", server, namespace):
                    problems.append(Problem(src, f"tools: unknown MCP server {server!r} in {tool!r}", ref=server))
                continue
            if _is_session_tool(registry, tool, namespace):
                continue
            problems.append(Problem(src, f"tools: unknown tool {tool!r}", ref=tool))
        for hook_id in prompt.hooks or []:
            if not registry.has("hooks", hook_id, namespace):
                problems.append(Problem(src, f"hooks: unknown hook id {hook_id!r}", ref=hook_id))
        for inc in prompt.includes():
            if not registry.has("prompts", inc, namespace):
                problems.append(Problem(src, f"prompt: include of unknown prompt {inc!r}", ref=inc))
        for g in (*prompt.input_guardrails, *prompt.output_guardrails):
            if not registry.has("tools", g, namespace):
                problems.append(Problem(src, f"guardrails: unknown tool {g!r}", ref=g))
        if prompt.skills:
            from .skills import skills_of

            known = skills_of(registry).names(namespace)
            for name in prompt.skills:
                if not name.endswith("*") and name not in known:
                    problems.append(Problem(src, f"skills: no skill {name!r} in agents/skills/ (it can still be "
                                                 "installed into a thread or for a user at run time)", warning=True))
    for entry in registry.entries("models", namespace):
        model = entry.value
        if model is None or entry.package != namespace:
            continue
        for fb in model.fallbacks:
            if not registry.has("models", fb, namespace):
                problems.append(Problem(entry.source or "", f"fallbacks: unknown model {fb!r}", ref=fb))
    return problems


def _is_session_tool(registry: Registry, name: str, namespace: str | None) -> bool:
    """Session lifecycle tools may be left undefined: the engine supplies them."""
    for entry in registry.entries("agents", namespace):
        agent = entry.value
        if agent is None:
            continue
        for side in (agent.side_a, agent.side_b):
            if side is None:
                continue
            for kind in ("stop", "fail", "status"):
                cfg = side.session_tool(kind)
                if cfg is not None and cfg.name == name:
                    return True
    return False


def add_builtin_tools(registry: Registry) -> None:
    """Add the built-in ``run_code`` tool when a prompt lists it and the project defines no
    tool of that name (so a project that doesn't use it sees no change)."""
    from .sandbox.tool import RUN_CODE_TOOL, run_code_tool

    if registry.has("tools", RUN_CODE_TOOL):
        return
    for entry in registry.entries("prompts"):
        prompt = entry.value
        if isinstance(prompt, PromptDefinition) and RUN_CODE_TOOL in prompt.tool_names():
            registry.add("tools", RUN_CODE_TOOL, run_code_tool(), source="(built-in)")
            return


def build_registry(*definitions: Any) -> Registry:
    """A registry from definitions made in code (no project folder), checked like a project.

    Kinds are told by type; the built-in ``default`` model is added unless one is given.
    """
    registry = Registry()
    kinds: list[tuple[type, str]] = [(AgentDefinition, "agents"), (PromptDefinition, "prompts"), (ToolDefinition, "tools"),
                                     (ModelDefinition, "models"), (HookDefinition, "hooks"), (EffectDefinition, "effects")]
    from .mcp import MCPServerDefinition

    kinds.append((MCPServerDefinition, "mcp"))
    kinds.append((ProviderDefinition, "providers"))
    kinds += [(ScheduleDefinition, "schedules"), (WebhookDefinition, "webhooks")]
    kinds.append((AuthorizationDefinition, "authorizations"))
    problems: list[tuple[str, str]] = []
    for definition in definitions:
        for cls, kind in kinds:
            if isinstance(definition, cls):
                name = _name_of(kind, definition)
                if registry.has(kind, name):
                    problems.append((kind, f"duplicate {kind[:-1]} name {name!r}"))
                registry.add(kind, name, definition)
                break
        else:
            problems.append(("", f"not a definition: {definition!r}"))
    if not registry.has("models", DEFAULT_MODEL):
        registry.add("models", DEFAULT_MODEL, default_model(), source="(built-in)")
    add_builtin_tools(registry)
    problems += [(p.file, p.message) for p in register_providers(registry) if not p.warning]
    problems += [(p.file, p.message) for p in check_references(registry) if not p.warning]
    if problems:
        raise ProjectError(problems, source="definitions")
    return registry


def register_providers(registry: Registry) -> list[Problem]:
    """Make the project's provider definitions buildable by name (``define_model(provider=...)``),
    refusing built-in names, and warn about models naming a provider nobody defines."""
    from .definitions.provider import BUILTIN_PROVIDERS
    from .providers.defined import register_definition
    from .providers.factory import registered_providers

    problems: list[Problem] = []
    for entry in registry.all_entries("providers"):
        definition = entry.value
        if not isinstance(definition, ProviderDefinition):
            continue
        if definition.name in BUILTIN_PROVIDERS:
            problems.append(Problem(entry.source or "", f"name: {definition.name!r} is a built-in provider; give yours "
                                                        f"another name (extends={definition.name!r} builds on it)"))
            registry.remove("providers", entry.name, package=entry.package)
            continue
        register_definition(definition)
    known = set(registered_providers())
    for entry in registry.all_entries("models"):
        model = entry.value
        if isinstance(model, ModelDefinition) and model.provider not in known:
            problems.append(Problem(entry.source or "", f"provider: no provider {model.provider!r} is built in or "
                                                        f"defined in agents/providers/ (known: {', '.join(sorted(known))})",
                                    warning=True))
    return problems
