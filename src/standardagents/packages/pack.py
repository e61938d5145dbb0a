"""Packing: turn one agent of a project, and everything it reaches, into a Python distribution.

The result is a small hatchling project named ``standardagent-<agent>`` whose module exports
the spec's registries of lazy loaders and ``__meta``; each definition's source file is copied
unchanged under ``definitions/<kind>/``, so the packed code is the code that was written.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..definitions import (
    AgentDefinition,
    ControllerDefinition,
    Definition,
    EffectDefinition,
    HookDefinition,
    ModelDefinition,
    PromptDefinition,
    ProviderDefinition,
    ThreadEndpointDefinition,
    ToolDefinition,
    UserEndpointDefinition,
)
from ..exceptions import NotFoundError, ProjectError
from ..project import import_file
from ..registry import Entry, Registry
from .naming import bump_patch, dist_name_for, identifier, module_name_for, parse_version
from .reach import collect

__all__ = ["EXPORT_KINDS", "EXTRA_KINDS", "build_wheel", "pack_project", "previous_version"]

#: the registries a packed module exports, in the order they are written
EXPORT_KINDS = ("agents", "prompts", "tools", "models", "hooks", "effects", "thread_endpoints")
#: the registries registered apart from the others (user endpoints by route, with their own
#: collision rule; providers loaded at discovery, since models build them by name)
EXTRA_KINDS = ("user_endpoints", "providers")

#: which definition types each exported registry holds
DEFINITION_TYPES: dict[str, tuple[type[Definition], ...]] = {
    "agents": (AgentDefinition,),
    "prompts": (PromptDefinition,),
    "tools": (ToolDefinition,),
    "models": (ModelDefinition,),
    "hooks": (HookDefinition,),
    "effects": (EffectDefinition,),
    "thread_endpoints": (ThreadEndpointDefinition, ControllerDefinition),
    "user_endpoints": (UserEndpointDefinition,),
    "providers": (ProviderDefinition,),
}
#: the kinds whose entries are named by their route (the file's path), not by a name field
_ROUTED = ("thread_endpoints", "user_endpoints")

_MIT = """MIT License

Copyright (c) {year} {author}

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""

_PROPRIETARY = "LicenseRef-Proprietary"


@dataclass
class _Item:
    kind: str
    name: str
    module: str
    attribute: str
    source: str


def _toml(value: Any) -> str:
    """A TOML value for strings, lists of strings and booleans (JSON strings are TOML strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def previous_version(target: Path) -> str | None:
    """The version of an earlier pack in ``target`` (a packed distribution folder), if any."""
    pyproject = target / "pyproject.toml"
    if not pyproject.is_file():
        return None
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    if "standardagent" not in data.get("tool", {}):
        return None
    version = data.get("project", {}).get("version")
    return str(version) if version else None


def _next_version(declared: str | None, previous: str | None) -> str:
    base = declared or "0.1.0"
    if previous is None:
        return base
    if parse_version(base) > parse_version(previous):
        return base
    return bump_patch(previous)


def _attribute_of(path: Path, kind: str, name: str) -> str:
    """The module attribute that holds the definition ``name`` of ``kind`` in ``path``."""
    module = import_file(path, "sa_pack")
    types = DEFINITION_TYPES[kind]
    candidates = [("default", getattr(module, "default", None)), *vars(module).items()]
    for attribute, value in candidates:
        if not isinstance(value, types):
            continue
        if kind in _ROUTED:
            return attribute
        own = getattr(value, "id" if kind == "hooks" else "name", None)
        if own == name:
            return attribute
    raise ProjectError([(str(path), f"cannot find the {kind[:-1]} {name!r} in this file to pack it")])


def _module_names(items: list[tuple[str, str, str]]) -> dict[tuple[str, str], str]:
    """A unique module identifier per (kind, source file); endpoints are named by their key."""
    names: dict[tuple[str, str], str] = {}
    taken: dict[str, set[str]] = {}
    for kind, name, source in items:
        key = (kind, source)
        if key in names:
            continue
        stem = name if kind in _ROUTED else Path(source).stem
        ident = identifier(stem)
        used = taken.setdefault(kind, set())
        candidate, n = ident, 2
        while candidate in used:
            candidate, n = f"{ident}_{n}", n + 1
        used.add(candidate)
        names[key] = candidate
    return names


def _render_module(dist: str, version: str, items: list[_Item], meta: dict[str, Any]) -> str:
    lines = [
        f'"""Packed Standard Agents package {dist} {version}.',
        "",
        "Every registry maps a name to an async loader that imports the definition's module on",
        'first call, so reading ``__meta`` imports no definition."""',
        "",
        "from __future__ import annotations",
        "",
        "import importlib",
        "from collections.abc import Awaitable, Callable",
        "from typing import Any",
        "",
        f"__all__ = {['__meta', *EXPORT_KINDS, *EXTRA_KINDS, 'threadEndpoints', 'userEndpoints']!r}",
        "",
        "",
        "def _lazy(kind: str, module: str, attribute: str) -> Callable[[], Awaitable[Any]]:",
        "    async def load() -> Any:",
        '        return getattr(importlib.import_module(f"{__name__}.definitions.{kind}.{module}"), attribute)',
        "",
        "    return load",
        "",
    ]
    for kind in (*EXPORT_KINDS, *EXTRA_KINDS):
        own = [i for i in items if i.kind == kind]
        lines.append("")
        if not own:
            lines.append(f"{kind}: dict[str, Callable[[], Awaitable[Any]]] = {{}}")
            continue
        lines.append(f"{kind}: dict[str, Callable[[], Awaitable[Any]]] = {{")
        for item in sorted(own, key=lambda i: i.name):
            lines.append(f"    {item.name!r}: _lazy({kind!r}, {item.module!r}, {item.attribute!r}),")
        lines.append("}")
    lines += [
        "threadEndpoints = thread_endpoints",
        "userEndpoints = user_endpoints",
        "",
        f"__meta: dict[str, Any] = {meta!r}",
        "",
        "#: where each packed file came from in its project, for unpacking",
        f"_sources: dict[str, str] = {({f'{i.kind}/{i.module}': i.source for i in items})!r}",
        "",
    ]
    return "\n".join(lines)


def _render_pyproject(dist: str, module: str, version: str, agent: AgentDefinition, license_id: str,
                      dependencies: list[str], effects: list[str], endpoints: list[str],
                      user_endpoints: list[str], providers: list[str]) -> str:
    description = agent.description or agent.title or f"The {agent.name} agent, packed for Standard Agents."
    author = agent.author or "unknown"
    return "\n".join([
        "[build-system]",
        'requires = ["hatchling>=1.18"]',
        'build-backend = "hatchling.build"',
        "",
        "[project]",
        f"name = {_toml(dist)}",
        f"version = {_toml(version)}",
        f"description = {_toml(description.splitlines()[0])}",
        'requires-python = ">=3.11"',
        f"license = {_toml(license_id)}",
        'license-files = ["LICENSE"]',
        f"authors = [{{ name = {_toml(author)} }}]",
        f"keywords = {_toml(['standardagent', 'standardagents', 'agents'])}",
        f"dependencies = {_toml(['standardagents', *dependencies])}",
        "",
        "[project.entry-points.standardagents]",
        f"{_toml(dist)} = {_toml(module)}",
        "",
        "[tool.standardagent]",
        f"entryAgents = {_toml([agent.name])}",
        f"effects = {_toml(effects)}",
        f"threadEndpoints = {_toml(endpoints)}",
        f"userEndpoints = {_toml(user_endpoints)}",
        f"providers = {_toml(providers)}",
        "",
        "[tool.hatch.build.targets.wheel]",
        f"packages = {_toml([module])}",
        "",
        "[tool.hatch.build.targets.sdist]",
        f"include = {_toml([module, 'LICENSE'])}",
        "",
    ])


def _license_text(license_id: str, author: str) -> str:
    year = time.gmtime().tm_year
    if license_id == "MIT":
        return _MIT.format(year=year, author=author)
    if license_id == _PROPRIETARY:
        return f"Copyright (c) {year} {author}. All rights reserved.\n"
    return (f"Copyright (c) {year} {author}\n\nLicensed under {license_id}: "
            f"https://spdx.org/licenses/{license_id}.html\n")


def _endpoint_entries(registry: Registry, wanted: Sequence[str] | None, kind: str = "thread_endpoints") -> list[Entry]:
    local = {e.name: e for e in registry.all_entries(kind) if e.package is None}
    if wanted is None:
        return [local[k] for k in sorted(local)]
    unknown = [k for k in wanted if k not in local]
    if unknown:
        raise NotFoundError(kind[:-1].replace("_", " "), unknown[0], "known: " + (", ".join(sorted(local)) or "none"))
    return [local[k] for k in wanted]


def _clear_target(target: Path) -> None:
    if not target.exists():
        return
    if previous_version(target) is None:
        raise ProjectError([(str(target), "exists and is not a packed agent package; choose another --out folder")])
    shutil.rmtree(target)


def pack_project(project: str | Path, agent: str, *, out_dir: str | Path | None = None, wheel: bool = False,
                 thread_endpoints: Sequence[str] | None = None, user_endpoints: Sequence[str] | None = None) -> Path:
    """Pack ``agent`` of the project at ``project`` into ``out_dir/<distribution name>/``.

    Returns the distribution folder, or the built wheel when ``wheel`` is true. The version is
    the agent's (0.1.0 when it declares none), bumped by one patch when an earlier pack of the
    same package sits in ``out_dir``. ``thread_endpoints`` picks the project's thread endpoint
    keys to carry (all of them when None), ``user_endpoints`` the user endpoint routes likewise;
    the providers the reached models name (``define_provider``) travel too. ``out_dir`` defaults to ``<project>/dist/packed``.
    """
    from .discover import load_project_with_packages

    root = Path(project).resolve()
    registry = load_project_with_packages(root)
    entry = registry.find("agents", agent)
    if entry is None or entry.package is not None:
        own = sorted(e.name for e in registry.all_entries("agents") if e.package is None)
        raise NotFoundError("agent", agent, "known: " + (", ".join(own) or "none") + f" (in {root})")
    definition: AgentDefinition = entry.value
    reach = collect(registry, agent, root)
    if reach.missing:
        raise ProjectError([(f"agent {agent!r}", f"reaches an unknown {m}") for m in reach.missing], source=str(root))
    endpoints = _endpoint_entries(registry, thread_endpoints)
    found = [(k, n, e.source or "") for (k, n), e in reach.entries.items()]
    found += [("thread_endpoints", e.name, e.source or "") for e in endpoints]
    found += [("user_endpoints", e.name, e.source or "") for e in _endpoint_entries(registry, user_endpoints,
                                                                                    "user_endpoints")]
    modules = _module_names(found)
    items = [_Item(k, n, modules[(k, s)], _attribute_of(root / s, k, n), s) for k, n, s in found]

    dist = dist_name_for(agent, definition.package_name)
    module = module_name_for(dist)
    out = Path(out_dir).resolve() if out_dir is not None else root / "dist" / "packed"
    target = out / dist
    version = _next_version(definition.version, previous_version(target))
    _clear_target(target)
    package_dir = target / module
    for kind in (*EXPORT_KINDS, *EXTRA_KINDS):
        (package_dir / "definitions" / kind).mkdir(parents=True, exist_ok=True)
        (package_dir / "definitions" / kind / "__init__.py").write_text("", encoding="utf-8")
    (package_dir / "definitions" / "__init__.py").write_text("", encoding="utf-8")
    for item in items:
        shutil.copyfile(root / item.source, package_dir / "definitions" / item.kind / f"{item.module}.py")
    _copy_skills(registry, reach.of_kind("prompts"), package_dir)

    effects = sorted(i.name for i in items if i.kind == "effects")
    endpoint_keys = sorted(i.name for i in items if i.kind == "thread_endpoints")
    meta: dict[str, Any] = {
        "packageId": dist,
        "version": version,
        "entryAgents": [agent],
        "packedAt": int(time.time() * 1000),
        "parentHooks": {agent: [r.model_dump(mode="json", exclude={"source_file", "package"})
                                for r in definition.parent_hooks]},
    }
    if definition.description:
        meta["description"] = definition.description
    declared = {e.name: e.value.declarations() for e in reach.of_kind("tools") if isinstance(e.value, ToolDefinition)}
    meta["toolDeclarations"] = {name: d for name, d in sorted(declared.items()) if d}
    (package_dir / "__init__.py").write_text(_render_module(dist, version, items, meta), encoding="utf-8")
    license_id = definition.license or _PROPRIETARY
    dependencies = sorted(_installed_dist(registry, p) for p in reach.external_packages)
    (target / "pyproject.toml").write_text(
        _render_pyproject(dist, module, version, definition, license_id, [d for d in dependencies if d],
                          effects, endpoint_keys, sorted(i.name for i in items if i.kind == "user_endpoints"),
                          sorted(i.name for i in items if i.kind == "providers")), encoding="utf-8")
    (target / "LICENSE").write_text(_license_text(license_id, definition.author or "the authors"), encoding="utf-8")
    if wheel:
        return build_wheel(target)
    return target


def _copy_skills(registry: Registry, prompts: list[Entry], package_dir: Path) -> None:
    """The project's skills that the packed prompts enable travel with the package, under its
    module's ``skills/`` folder (one folder per skill, named for it), files unchanged."""
    from ..skills import enabled_skills, skills_of

    own = skills_of(registry).visible(None)
    wanted: dict[str, Any] = {}
    for entry in prompts:
        prompt = entry.value
        if entry.package is None and isinstance(prompt, PromptDefinition) and prompt.skills:
            wanted.update((s.name, s) for s in enabled_skills(prompt.skills, own))
    for name, skill in sorted(wanted.items()):
        if skill.folder is not None:
            shutil.copytree(skill.folder, package_dir / "skills" / name,
                            ignore=shutil.ignore_patterns("__pycache__", ".*"))


def _installed_dist(registry: Registry, package_id: str) -> str:
    """The distribution a referenced package comes from (empty for a local one)."""
    pkg = registry.packages.get(package_id)
    if pkg is None or getattr(pkg, "source", None) != "installed":
        return ""
    return str(getattr(pkg, "dist_name", None) or package_id)


def build_wheel(target: str | Path, out_dir: str | Path | None = None) -> Path:
    """Build the wheel of a packed distribution folder; returns the ``.whl`` path."""
    target = Path(target).resolve()
    dest = Path(out_dir).resolve() if out_dir is not None else target / "dist"
    dest.mkdir(parents=True, exist_ok=True)
    try:
        from hatchling.builders.wheel import WheelBuilder
    except ImportError:
        proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dest), str(target)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ProjectError([(str(target), "building the wheel failed (install `build` and `hatchling`): "
                                 + (proc.stderr or proc.stdout).strip()[-2000:])]) from None
        wheels = sorted(dest.glob("*.whl"), key=lambda p: p.stat().st_mtime)
        return wheels[-1]
    builder = WheelBuilder(str(target))
    built = list(builder.build(directory=str(dest), versions=["standard"]))
    return Path(built[-1])
