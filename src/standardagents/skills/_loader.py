"""Skills from folders: a project's ``agents/skills/`` and a packed package's ``skills/``.

Every folder holding a ``SKILL.md`` is one skill (folders may group skills, as in
``agents/skills/documents/pdf/SKILL.md``); its other files are listed, never imported or run
here. Each problem names the ``SKILL.md`` it is in and the front-matter field.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ._format import SKILL_FILE, SkillMetadata, SkillSource, parse_skill_md
from ._skill import Skill

__all__ = ["SkillProblem", "read_skill_folder", "scan_skills"]

#: the most files one skill folder may list
MAX_FILES = 1000


@dataclass(slots=True)
class SkillProblem:
    """One problem with a skill folder, with the file it is in (as the user would name it)."""

    file: str
    message: str
    warning: bool = False


def _hidden(name: str) -> bool:
    return name.startswith(".") or name == "__pycache__"


def _list_files(folder: Path) -> list[str]:
    found: list[str] = []
    for here, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not _hidden(d))
        base = Path(here)
        for name in sorted(files):
            if _hidden(name):
                continue
            rel = (base / name).relative_to(folder).as_posix()
            if rel != SKILL_FILE:
                found.append(rel)
            if len(found) > MAX_FILES:
                return found
    return found


def read_skill_folder(folder: Path, label: str, *, source: SkillSource = "project",
                      package: str | None = None) -> tuple[Skill | None, list[SkillProblem]]:
    """The skill in ``folder`` (which holds a ``SKILL.md``); ``label`` is how problems name
    that ``SKILL.md`` (a path relative to the project, or ``package/skills/...``)."""
    path = folder / SKILL_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None, [SkillProblem(label, "is not UTF-8 text")]
    except OSError as exc:
        return None, [SkillProblem(label, f"cannot be read: {exc.strerror or exc}")]
    parsed = parse_skill_md(text)
    problems = [SkillProblem(label, f"{where}: {msg}" if where else msg) for where, msg in parsed.problems]
    problems += [SkillProblem(label, f"{where}: {msg}", warning=True) for where, msg in parsed.warnings]
    if not parsed.ok:
        return None, problems
    name = parsed.fields["name"]
    if folder.name != name:
        problems.append(SkillProblem(label, f"name: {name!r} differs from its folder's name {folder.name!r} "
                                            "(the skill format asks them to match)", warning=True))
    files = _list_files(folder)
    if len(files) > MAX_FILES:
        problems.append(SkillProblem(label, f"its folder holds more than {MAX_FILES} files; only the first "
                                            f"{MAX_FILES} are listed", warning=True))
        files = files[:MAX_FILES]
    meta = SkillMetadata(name=name, description=parsed.fields["description"], source=source, files=tuple(files),
                         package=package, license=parsed.fields.get("license"),
                         compatibility=parsed.fields.get("compatibility"),
                         allowed_tools=parsed.fields.get("allowed_tools"),
                         metadata=parsed.fields.get("metadata") or {})
    return Skill(meta, parsed.body, folder=folder.resolve()), problems


def scan_skills(base: Path, label: Callable[[Path], str], *, source: SkillSource = "project",
                package: str | None = None) -> tuple[list[Skill], list[SkillProblem]]:
    """Every skill under ``base``, sorted by name, and the problems found (two skills with
    one name are an error naming both files; the first keeps the name)."""
    skills: list[Skill] = []
    problems: list[SkillProblem] = []
    if not base.is_dir():
        return skills, problems
    by_name: dict[str, str] = {}
    for here, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not _hidden(d))
        if SKILL_FILE not in files:
            continue
        dirs[:] = []  # a skill's own sub-folders hold its files, not more skills
        folder = Path(here)
        where = label(folder / SKILL_FILE)
        skill, found = read_skill_folder(folder, where, source=source, package=package)
        problems += found
        if skill is None:
            continue
        if skill.name in by_name:
            problems.append(SkillProblem(where, f"name: duplicate skill name {skill.name!r} (also the name of "
                                                f"{by_name[skill.name]})"))
            continue
        by_name[skill.name] = where
        skills.append(skill)
    skills.sort(key=lambda s: s.name)
    return skills, problems
