"""The skills a project and its packages define, kept beside the project's registry.

Skills follow the namespace rules of packed definitions: the project's prompts see the
project's skills, a package's prompts see that package's skills, and neither sees the
other's. Skills installed at run time belong to a thread or a user instead (see
``SkillsNamespace``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from ..exceptions import ProjectError
from ..toolcalls import expand_names
from ._format import SkillSource
from ._loader import SkillProblem, scan_skills
from ._skill import Skill

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = ["SkillCatalog", "add_skills_folder", "enabled_skills", "load_skills", "skills_of"]


class SkillCatalog:
    """Skills by (package, name): ``None`` is the project's own namespace."""

    def __init__(self) -> None:
        self._skills: dict[tuple[str | None, str], Skill] = {}

    def add(self, skill: Skill) -> None:
        self._skills[(skill.metadata.package, skill.name)] = skill

    def add_all(self, skills: Iterable[Skill]) -> None:
        for skill in skills:
            self.add(skill)

    def get(self, name: str, namespace: str | None = None) -> Skill | None:
        return self._skills.get((namespace, name))

    def visible(self, namespace: str | None = None) -> list[Skill]:
        """The skills code in ``namespace`` may use, by name."""
        return sorted((s for (pkg, _), s in self._skills.items() if pkg == namespace), key=lambda s: s.name)

    def names(self, namespace: str | None = None) -> list[str]:
        return [s.name for s in self.visible(namespace)]

    def __len__(self) -> int:
        return len(self._skills)


_CATALOGS: WeakKeyDictionary[Registry, SkillCatalog] = WeakKeyDictionary()


def skills_of(registry: Registry) -> SkillCatalog:
    """The skill catalog of a registry (an empty one for a registry built in code)."""
    catalog = _CATALOGS.get(registry)
    if catalog is None:
        catalog = _CATALOGS[registry] = SkillCatalog()
    return catalog


def enabled_skills(patterns: Sequence[str], skills: Iterable[Skill]) -> list[Skill]:
    """The skills a prompt's ``skills`` list enables: exact names, ``prefix*`` and ``*``."""
    by_name = {s.name: s for s in skills}
    return [by_name[n] for n in expand_names(patterns, by_name)]


def _new_skills(registry: Registry, folder: Path, label: Callable[[Path], str], source: SkillSource,
                package: str | None) -> tuple[list[Skill], list[SkillProblem]]:
    skills, problems = scan_skills(folder, label, source=source, package=package)
    catalog = skills_of(registry)
    fresh: list[Skill] = []
    for skill in skills:
        if catalog.get(skill.name, package) is not None:
            where = label(skill.folder / "SKILL.md") if skill.folder is not None else skill.name
            problems.append(SkillProblem(where, f"name: duplicate skill name {skill.name!r}"))
        else:
            fresh.append(skill)
    return fresh, problems


def add_skills_folder(registry: Registry, folder: Path, label: Callable[[Path], str], *,
                      source: SkillSource = "project", package: str | None = None) -> list[SkillProblem]:
    """Add every skill under ``folder`` to the registry's catalog (in ``package``'s namespace)
    and return the problems found; a skill with a problem is left out, the others are added.
    A name already in that namespace is a duplicate, reported on the newcomer."""
    skills, problems = _new_skills(registry, folder, label, source, package)
    skills_of(registry).add_all(skills)
    return problems


def load_skills(registry: Registry, folder: str | Path) -> list[SkillProblem]:
    """Add the skills under ``folder`` to a registry built in code (``build_registry``), all
    or none: raises ``ProjectError`` listing every error; returns the warnings."""
    base = Path(folder).resolve()
    skills, problems = _new_skills(registry, base, lambda p: str(p), "project", None)
    errors = [p for p in problems if not p.warning]
    if errors:
        raise ProjectError([(p.file, p.message) for p in errors], source=str(base))
    skills_of(registry).add_all(skills)
    return problems
