"""The Agent Skills format: a ``SKILL.md`` whose front matter names and describes the skill.

A skill is a folder: ``SKILL.md`` (YAML front matter with ``name`` and ``description``, then
the instructions in Markdown) and whatever files the instructions use. Only the name and the
description are shown to the model up front; the instructions and the files are read when
the model asks for them. Parsing here is pure (text in, metadata and problems out), so the
same rules apply to a project's folders, a package's and a skill installed at run time.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Required, TypedDict

__all__ = [
    "MAX_DESCRIPTION",
    "MAX_NAME",
    "SKILL_FILE",
    "ParsedSkill",
    "SkillFileInput",
    "SkillMetadata",
    "SkillSource",
    "check_skill_path",
    "parse_skill_md",
]

#: the file that makes a folder a skill
SKILL_FILE = "SKILL.md"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
#: front-matter fields the format defines; others are kept out of the metadata (and warned of)
KNOWN_FIELDS = frozenset({"name", "description", "license", "compatibility", "metadata", "allowed-tools"})

#: where a skill came from: the project's ``agents/skills/``, a packed package, or installed at
#: run time into a thread or for a user
SkillSource = Literal["project", "package", "thread", "user"]

_CONSECUTIVE = re.compile(r"--")


class SkillFileInput(TypedDict, total=False):
    """One file of a skill being installed at run time (the spec's ``SkillFileInput``).

    ``path`` is relative to the skill's folder (``SKILL.md``, ``scripts/extract.py``);
    ``content`` is text or bytes, or base64 text when ``encoding`` is ``"base64"``.
    """

    path: Required[str]
    content: Required[str | bytes]
    encoding: Literal["utf-8", "base64"]


@dataclass(frozen=True, slots=True)
class SkillMetadata:
    """What is known of a skill without reading its instructions (the spec's ``SkillMetadata``).

    ``files`` lists the skill's files other than ``SKILL.md``, as paths relative to its folder.
    """

    name: str
    description: str
    source: SkillSource
    files: tuple[str, ...] = ()
    #: the package id, for a skill that came with a packed package
    package: str | None = None
    license: str | None = None
    compatibility: str | None = None
    allowed_tools: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The wire shape (the format's and the spec's field names)."""
        out: dict[str, Any] = {"name": self.name, "description": self.description, "source": self.source,
                               "files": list(self.files)}
        if self.package is not None:
            out["package"] = self.package
        if self.license is not None:
            out["license"] = self.license
        if self.compatibility is not None:
            out["compatibility"] = self.compatibility
        if self.allowed_tools is not None:
            out["allowedTools"] = self.allowed_tools
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out


@dataclass(slots=True)
class ParsedSkill:
    """A ``SKILL.md`` read: its fields and instructions, or the problems that stop it."""

    fields: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    #: ``(field, message)`` pairs; the field is "" for a problem of the file as a whole
    problems: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _check_name(value: Any, problems: list[tuple[str, str]]) -> str | None:
    if not isinstance(value, str) or not value.strip():
        problems.append(("name", "must be a non-empty string"))
        return None
    name = unicodedata.normalize("NFKC", value.strip())
    wrong = []
    if len(name) > MAX_NAME:
        wrong.append(f"is {len(name)} characters long (at most {MAX_NAME})")
    if name != name.lower():
        wrong.append("must be lowercase")
    if not all(c.isalnum() or c == "-" for c in name):
        wrong.append("may hold only letters, digits and hyphens")
    if name.startswith("-") or name.endswith("-") or _CONSECUTIVE.search(name):
        wrong.append("may not start or end with a hyphen nor hold two in a row")
    if wrong:
        problems.append(("name", f"{name!r} " + "; ".join(wrong)))
        return None
    return name


def parse_skill_md(text: str) -> ParsedSkill:
    """Read a ``SKILL.md``: its front matter checked field by field, and its instructions."""
    import frontmatter
    import yaml

    out = ParsedSkill()
    text = text.removeprefix("\ufeff")
    if not frontmatter.checks(text):
        out.problems.append(("", "has no front matter: it must start with a '---' block holding "
                                 "name and description, closed by another '---'"))
        return out
    try:
        data, body = frontmatter.parse(text)
    except yaml.YAMLError as exc:
        # where the construct that failed began, else where parsing stopped
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        out.problems.append(("", f"its front matter is not valid YAML{where}: {problem}"))
        return out
    if not isinstance(data, dict) or not data:
        out.problems.append(("", "its front matter must be a mapping holding name and description"))
        return out
    out.body = body.strip()
    problems = out.problems
    for key in ("name", "description"):
        if key not in data or data[key] is None:
            problems.append((key, "is missing from the front matter"))
    fields: dict[str, Any] = {}
    if "name" in data and data["name"] is not None:
        fields["name"] = _check_name(data["name"], problems)
    description = data.get("description")
    if description is not None:
        if not isinstance(description, str) or not description.strip():
            problems.append(("description", "must be a non-empty string"))
        elif len(description.strip()) > MAX_DESCRIPTION:
            problems.append(("description", f"is {len(description.strip())} characters long (at most {MAX_DESCRIPTION})"))
        else:
            fields["description"] = " ".join(description.split())
    for key in ("license", "compatibility"):
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            problems.append((key, "must be a string"))
        elif key == "compatibility" and len(value) > MAX_COMPATIBILITY:
            problems.append((key, f"is {len(value)} characters long (at most {MAX_COMPATIBILITY})"))
        else:
            fields[key] = value.strip()
    tools = data.get("allowed-tools")
    if tools is not None:
        if isinstance(tools, str):
            fields["allowed_tools"] = tools.strip()
        elif isinstance(tools, list) and all(isinstance(t, str) for t in tools):
            fields["allowed_tools"] = " ".join(tools)
        else:
            problems.append(("allowed-tools", "must be a string of tool names separated by spaces"))
    meta = data.get("metadata")
    if meta is not None:
        if isinstance(meta, dict):
            fields["metadata"] = {str(k): str(v) for k, v in meta.items()}
        else:
            problems.append(("metadata", "must be a mapping of keys to values"))
    unknown = sorted(str(k) for k in data if str(k) not in KNOWN_FIELDS)
    if unknown:
        out.warnings.append((", ".join(unknown), "not a field of the skill format; ignored"))
    out.fields = fields
    return out


def check_skill_path(path: str) -> str | None:
    """A file path inside a skill as stored (``scripts/run.py``), or None when it could leave
    the skill's folder or is not a file path at all."""
    if not isinstance(path, str) or not path or "\\" in path or "\x00" in path:
        return None
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts) or path.startswith("/"):
        return None
    return "/".join(parts)
