"""Discovery and registration of packed packages.

Packages come from installed distributions (entry points in the ``standardagents`` group, or
the ``standardagent`` keyword) and from folders under a project's ``agents/packed/``. Only each
package's module is imported to read ``__meta``; its definitions load lazily, on first use,
and each arrives carrying its package signature.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import sys
import tomllib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..definitions import (
    Definition,
    define_agent,
    define_effect,
    define_hook,
    define_model,
    define_prompt,
    define_tool,
)
from ..definitions.user_endpoint import routes_collide
from ..exceptions import DefinitionError, ProjectError
from ..project import DEFAULT_MODEL, Problem, _load, check_references, default_model, exec_module
from ..registry import Entry, Registry
from .naming import identifier, module_name_for
from .pack import DEFINITION_TYPES as _TYPES
from .pack import EXPORT_KINDS
from .signature import PackageSource, ReadOnlySignature, make_signature

__all__ = [
    "ENTRY_POINT_GROUP",
    "KEYWORD",
    "PackageInfo",
    "discover_packages",
    "load_package_dir",
    "load_packages_into",
    "load_project_with_packages",
    "register_packages",
]

log = logging.getLogger("standardagents.packages")

ENTRY_POINT_GROUP = "standardagents"
KEYWORD = "standardagent"
Loader = Callable[[], Awaitable[Any]]



@dataclass
class PackageInfo:
    """One discovered package: its ``__meta``, where it came from, and its module of loaders."""

    package_id: str
    version: str
    source: PackageSource
    packed_at: int
    entry_agents: list[str]
    module: ModuleType
    location: Path | None = None
    dist_name: str | None = None
    description: str | None = None
    parent_hooks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: what each packed tool declares it touches (uses, variables, network), read from
    #: ``__meta`` so an operator sees it before any of the package's code runs
    tool_declarations: dict[str, dict[str, Any]] = field(default_factory=dict)
    signature: ReadOnlySignature = field(init=False)

    def __post_init__(self) -> None:
        self.signature = make_signature(self.package_id, self.version, self.source, self.packed_at)

    @property
    def module_name(self) -> str:
        return self.module.__name__

    @property
    def meta(self) -> dict[str, Any]:
        return dict(getattr(self.module, "__meta"))

    def loaders(self, kind: str) -> dict[str, Loader]:
        """The module's registry of loaders for ``kind`` (``threadEndpoints`` and
        ``userEndpoints`` are accepted too)."""
        table = getattr(self.module, kind, None)
        if table is None and kind == "thread_endpoints":
            table = getattr(self.module, "threadEndpoints", None)
        if table is None and kind == "user_endpoints":
            table = getattr(self.module, "userEndpoints", None)
        return dict(table) if isinstance(table, Mapping) else {}


def _info_from_module(module: ModuleType, source: PackageSource, location: Path | None,
                      dist_name: str | None) -> PackageInfo:
    meta = getattr(module, "__meta", None)
    where = str(location or module.__name__)
    if not isinstance(meta, Mapping):
        raise ProjectError([(where, "is not a packed agent package: its module exports no __meta")])
    problems = [(f"__meta.{key}", "is required") for key in ("packageId", "version", "entryAgents", "packedAt")
                if key not in meta]
    if problems:
        raise ProjectError(problems, source=where)
    return PackageInfo(
        package_id=str(meta["packageId"]), version=str(meta["version"]), source=source,
        packed_at=int(meta["packedAt"]), entry_agents=[str(a) for a in meta["entryAgents"]], module=module,
        location=location, dist_name=dist_name, description=meta.get("description"),
        parent_hooks={str(k): list(v) for k, v in (meta.get("parentHooks") or {}).items()},
        tool_declarations={str(k): dict(v) for k, v in (meta.get("toolDeclarations") or {}).items()
                           if isinstance(v, Mapping)},
    )


def _module_dir(folder: Path) -> Path | None:
    """The packed module inside a folder: the folder itself, or the one its pyproject names."""
    if (folder / "__init__.py").is_file():
        return folder
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError:
            data = {}
        targets = data.get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {})
        for pkg in targets.get("wheel", {}).get("packages", []):
            candidate = folder / pkg
            if (candidate / "__init__.py").is_file():
                return candidate
        name = data.get("project", {}).get("name")
        if name and (folder / module_name_for(name) / "__init__.py").is_file():
            return folder / module_name_for(name)
    for child in sorted(folder.iterdir()):
        init = child / "__init__.py"
        if init.is_file() and "__meta" in init.read_text(encoding="utf-8", errors="replace"):
            return child
    return None


def load_package_dir(folder: str | Path, source: PackageSource = "local") -> PackageInfo:
    """Import a packed package from a folder (a module folder or a packed distribution folder)."""
    folder = Path(folder).resolve()
    module_dir = _module_dir(folder) if folder.is_dir() else None
    if module_dir is None:
        raise ProjectError([(str(folder), "no packed module here (expected an __init__.py exporting __meta)")])
    digest = hashlib.sha1(str(module_dir).encode()).hexdigest()[:10]
    name = f"_sa_packed_{identifier(module_dir.name)}_{digest}"
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[loaded]
    try:
        module = exec_module(name, module_dir / "__init__.py", package_dir=module_dir)
    except ImportError as exc:
        raise ProjectError([(str(module_dir), f"cannot import this packed module: {exc}")]) from exc
    return _info_from_module(module, source, folder, None)


def _installed(problems: list[Problem]) -> list[PackageInfo]:
    found: list[PackageInfo] = []
    seen: set[str] = set()
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else None
        try:
            module = importlib.import_module(ep.module)
            found.append(_info_from_module(module, "installed", None, dist))
            seen.add(ep.module)
        except Exception as exc:  # an installed package may be broken in any way
            problems.append(Problem(f"installed package {dist or ep.module}", f"cannot be loaded: {exc}"))
    for dist_obj in importlib.metadata.distributions():
        keywords = dist_obj.metadata["Keywords"] or ""
        if KEYWORD not in {k.strip() for k in keywords.replace(";", ",").split(",")}:
            continue
        module_name = module_name_for(dist_obj.metadata["Name"] or "")
        if module_name in seen or importlib.util.find_spec(module_name) is None:
            continue
        seen.add(module_name)
        try:
            found.append(_info_from_module(importlib.import_module(module_name), "installed", None,
                                           dist_obj.metadata["Name"]))
        except Exception as exc:
            problems.append(Problem(f"installed package {dist_obj.metadata['Name']}", f"cannot be loaded: {exc}"))
    return found


def discover_packages(project_dir: str | Path | None = None, *, installed: bool = True,
                      problems: list[Problem] | None = None) -> list[PackageInfo]:
    """Every packed package: installed distributions, then the project's ``agents/packed/`` folders.

    A local package replaces an installed one with the same id (it is the one being worked on).
    Packages that cannot be loaded are skipped and reported to ``problems`` (or logged).
    """
    report: list[Problem] = [] if problems is None else problems
    found: dict[str, PackageInfo] = {}
    if installed:
        for info in _installed(report):
            found.setdefault(info.package_id, info)
    if project_dir is not None:
        packed = Path(project_dir) / "agents" / "packed"
        if packed.is_dir():
            for folder in sorted(p for p in packed.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
                try:
                    info = load_package_dir(folder, "local")
                except Exception as exc:
                    report.append(Problem(str(folder), f"cannot be loaded as a packed package: {exc}"))
                    continue
                found[info.package_id] = info
    if problems is None:
        for p in report:
            log.warning("%s", p)
    return list(found.values())


def _coerce(kind: str, name: str, value: Any) -> Any:
    """Accept the spec's plain shapes (dicts, the effect tuple) as well as definitions."""
    if isinstance(value, ModuleType):
        value = getattr(value, "default", value)
    if kind == "effects" and isinstance(value, tuple | list):
        parts = list(value)
        if len(parts) == 3:
            parts = [name, *parts]
        description, schema, handler = parts[1], parts[2], parts[3]
        return define_effect(name=name, description=description or "", args_schema=schema or {"type": "object"},
                             handler=handler)
    if isinstance(value, dict):
        data = {"name": name, **value} if kind != "hooks" else {"id": name, **value}
        maker: dict[str, Callable[..., Any]] = {"agents": define_agent, "prompts": define_prompt,
                                                "models": define_model, "hooks": define_hook}
        if kind in maker:
            return maker[kind](data)
        if kind == "tools":
            return define_tool(**data)
    return value


def _signed(loader: Loader, kind: str, name: str, info: PackageInfo) -> Loader:
    async def load() -> Any:
        value: Any = loader()
        if inspect.isawaitable(value):
            value = await value
        value = _coerce(kind, name, value)
        if not isinstance(value, _TYPES[kind]):
            raise DefinitionError([(f"{kind}.{name}", f"the loader returned {type(value).__name__}, not a {kind[:-1]} definition")],
                                  source=info.package_id)
        if kind not in ("thread_endpoints", "user_endpoints"):
            own = getattr(value, "id" if kind == "hooks" else "name", None)
            if own != name:
                raise DefinitionError([(f"{kind}.{name}", f"the loader returned a definition named {own!r}")],
                                      source=info.package_id)
        definition: Definition = value
        return definition.model_copy(update={"package": info.signature})

    return load


def _host_default(registry: Registry) -> Loader:
    async def load() -> Any:
        entry = registry.find("models", DEFAULT_MODEL)
        if entry is not None:
            return await registry.aget("models", DEFAULT_MODEL)
        return default_model()

    return load


def register_packages(registry: Registry, packages: Iterable[PackageInfo]) -> list[Problem]:
    """Add each package's definitions to ``registry`` as lazy entries in its namespace.

    Entry agents are marked as entry points. A package that names no model ``default`` gets the
    host's default model in its namespace (the runtime's built-in, not another definition).
    Returns the problems found: a repeated package id, entry agents the package does not
    export, packed thread endpoint keys that collide with local or other packed ones, and
    packed user endpoints on a route a local or other packed one has (those are left out).
    """
    problems: list[Problem] = []
    for info in packages:
        pid = info.package_id
        where = f"package {pid}"
        if pid in registry.packages:
            known = registry.packages[pid]
            same = (getattr(known, "source", None), getattr(known, "location", None), getattr(known, "dist_name", None))
            if same != (info.source, info.location, info.dist_name):
                problems.append(Problem(where, "is found twice; the first one found is used"))
            continue
        registry.packages[pid] = info
        for kind in EXPORT_KINDS:
            for name, loader in info.loaders(kind).items():
                if kind == "thread_endpoints":
                    for other in registry.all_entries("thread_endpoints"):
                        if other.name == name:
                            owner = "a local thread endpoint" if other.package is None else f"package {other.package}"
                            problems.append(Problem(where, f"thread endpoint {name!r} has the same key as {owner}"
                                                           " (rename one: both would mount at the same path)"))
                registry.add(kind, name, loader=_signed(loader, kind, name, info), package=pid,
                             entry_point=kind == "agents" and name in info.entry_agents, source=f"{pid}:{kind}/{name}")
        for name, loader in info.loaders("user_endpoints").items():
            taken = next((e for e in registry.all_entries("user_endpoints") if routes_collide(e.name, name)), None)
            if taken is not None:
                owner = f"the user endpoint {taken.name!r} of " + (
                    "the project" if taken.package is None else f"package {taken.package}")
                problems.append(Problem(where, f"user endpoint {name!r} has the same route as {owner}"
                                               " (rename one: both would mount at the same path)"))
                continue
            registry.add("user_endpoints", name, loader=_signed(loader, "user_endpoints", name, info), package=pid,
                         source=f"{pid}:user_endpoints/{name}")
        problems += _package_providers(registry, info)
        problems += _package_skills(registry, info)
        exported = info.loaders("agents")
        for agent in info.entry_agents:
            if agent not in exported:
                problems.append(Problem(where, f"entry agent {agent!r} is not exported in its agents registry"))
            else:
                problems += _name_clash(registry, pid, agent)
        if DEFAULT_MODEL not in info.loaders("models"):
            registry.add("models", DEFAULT_MODEL, loader=_host_default(registry), package=pid, source="(built-in)")
    return problems


def _load_now(loader: Loader) -> Any:
    """Run a loader that does not wait (a packed module's loaders import and return)."""
    pending = loader()
    if not inspect.iscoroutine(pending):
        return pending
    try:
        pending.send(None)
    except StopIteration as done:
        return done.value
    pending.close()
    raise ProjectError([("providers", "its loader waits on I/O; a packed provider's loader must return at once")])


def _package_providers(registry: Registry, info: PackageInfo) -> list[Problem]:
    """Register the providers a package carries. Models build providers by name, so they load
    now (not on first use); a name the project or another package already defines is a
    problem and the package's provider is left out."""
    from ..providers.defined import register_definition

    problems: list[Problem] = []
    where = f"package {info.package_id}"
    for name, loader in info.loaders("providers").items():
        taken = next((e for e in registry.all_entries("providers") if e.name == name), None)
        if taken is not None:
            owner = "the project" if taken.package is None else f"package {taken.package}"
            problems.append(Problem(where, f"provider {name!r} has the same name as a provider of {owner} (rename "
                                           "one: models name providers without a namespace)"))
            continue
        try:
            definition = _load_now(_signed(loader, "providers", name, info))
            register_definition(definition)
        except Exception as exc:  # a broken package is reported, not raised into the host
            problems.append(Problem(where, f"provider {name!r} cannot be loaded: {exc}"))
            continue
        registry.add("providers", name, definition, package=info.package_id, source=f"{info.package_id}:providers/{name}")
    return problems


def _package_skills(registry: Registry, info: PackageInfo) -> list[Problem]:
    """Register the skills a package carries (its module's ``skills/`` folder) in its own
    namespace, where only its prompts see them; the problems found, each naming its file."""
    from ..skills import add_skills_folder

    origin = getattr(info.module, "__file__", None)
    if origin is None:
        return []
    module_dir = Path(origin).parent
    found = add_skills_folder(registry, module_dir / "skills",
                              lambda file: f"{info.package_id}/{file.relative_to(module_dir).as_posix()}",
                              source="package", package=info.package_id)
    return [Problem(p.file, p.message, warning=p.warning) for p in found]


def _origin(entry: Entry) -> str:
    return f"packed package {entry.package}" if entry.package is not None else f"the project's {entry.source or 'agents'}"


def _name_clash(registry: Registry, package: str, agent: str) -> list[Problem]:
    """A warning when a packed entry agent shares its name with a visible agent of another origin.

    Both stay usable: the project's keeps the bare name and the packed one is addressed as
    ``package/name`` (over the API, the OpenAI door and the CLI alike).
    """
    entries = [e for e in registry.entries("agents") if e.name == agent]
    mine = next((e for e in entries if e.package == package), None)
    others = [e for e in entries if e is not mine]
    if mine is None or not others:
        return []
    named = "; ".join(f"{_origin(e)} (called {registry.public_name(e)!r})" for e in [*others, mine])
    return [Problem(f"package {package}", f"agent name {agent!r} is used more than once: {named}", warning=True)]


def load_packages_into(registry: Registry, project_dir: str | Path | None, *, installed: bool = True) -> list[Problem]:
    """Discover packages for a project and register them; the problems found on the way."""
    from .validate import validate_packed

    problems: list[Problem] = []
    packages = discover_packages(project_dir, installed=installed, problems=problems)
    problems += register_packages(registry, packages)
    for info in packages:
        problems += [Problem(f"package {info.package_id}", w, warning=True) for w in validate_packed(info)]
    return problems


def load_project_with_packages(path: str | Path, *, strict: bool = True, installed: bool = True) -> Registry:
    """Load a project and the packages it can see; with ``strict``, raise listing every error.

    References are checked after the packages are registered, so a project may name a
    package's entry agent.
    """
    root = Path(path).resolve()
    result = _load(root)
    registry = result.registry
    early = {str(p) for p in check_references(registry)}
    problems = [p for p in result.problems if str(p) not in early]
    problems += load_packages_into(registry, root, installed=installed)
    problems += check_references(registry)
    errors = [p for p in problems if not p.warning]
    if strict and errors:
        raise ProjectError([(p.file, p.message) for p in errors], source=str(root))
    return registry
