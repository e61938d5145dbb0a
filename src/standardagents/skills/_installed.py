"""Skills installed at run time: checked from their files, stored as one env value each.

A skill installed into a thread or for a user is one value of that scope's env (key
``_skill:<name>``): its metadata, its instructions and its files. One value means one write,
so an install either lands whole or not at all.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..exceptions import DefinitionError
from ._format import (
    SKILL_FILE,
    SkillFileInput,
    SkillMetadata,
    SkillSource,
    check_skill_path,
    parse_skill_md,
)
from ._skill import Skill

__all__ = ["ENV_PREFIX", "MAX_INSTALL_BYTES", "decode_skill", "encode_skill", "skill_from_files"]

#: env key prefix of an installed skill
ENV_PREFIX = "_skill:"
#: the most bytes one installed skill's files may hold together
MAX_INSTALL_BYTES = 4 * 1024 * 1024

SkillFiles = Sequence[SkillFileInput] | Sequence[Mapping[str, Any]] | Mapping[str, str | bytes]


def _normalise(files: SkillFiles) -> tuple[dict[str, bytes], list[tuple[str, str]]]:
    problems: list[tuple[str, str]] = []
    out: dict[str, bytes] = {}
    items: list[tuple[str, Any, Any]]
    if isinstance(files, Mapping):
        items = [(f"files[{path!r}]", path, {"path": path, "content": content}) for path, content in files.items()]
    elif isinstance(files, Sequence) and not isinstance(files, str | bytes):
        items = [(f"files[{i}]", None, item) for i, item in enumerate(files)]
    else:
        return out, [("files", "must be a list of {path, content} or a mapping of path to content")]
    for where, _, item in items:
        if not isinstance(item, Mapping):
            problems.append((where, "must be an object with path and content"))
            continue
        raw_path = item.get("path")
        path = check_skill_path(raw_path) if isinstance(raw_path, str) else None
        if path is None:
            problems.append((f"{where}.path", f"{raw_path!r} is not a relative path inside the skill's folder"))
            continue
        content = item.get("content")
        encoding = item.get("encoding", "utf-8")
        if encoding not in ("utf-8", "base64"):
            problems.append((f"{where}.encoding", f"{encoding!r} is not utf-8 or base64"))
            continue
        if encoding == "base64":
            if not isinstance(content, str):
                problems.append((f"{where}.content", "must be base64 text when encoding is base64"))
                continue
            try:
                data = base64.b64decode(content, validate=True)
            except (binascii.Error, ValueError):
                problems.append((f"{where}.content", "is not valid base64"))
                continue
        elif isinstance(content, bytes):
            data = content
        elif isinstance(content, str):
            data = content.encode("utf-8", "surrogatepass")
        else:
            problems.append((f"{where}.content", "must be text or bytes"))
            continue
        if path in out:
            problems.append((f"{where}.path", f"{path!r} is given twice"))
            continue
        out[path] = data
    return out, problems


def skill_from_files(files: SkillFiles, source: SkillSource) -> Skill:
    """A skill from its files, every problem reported at once as a ``DefinitionError`` that
    names the file and the field (``SKILL.md: name: is missing from the front matter``)."""
    contents, problems = _normalise(files)
    total = sum(len(v) for v in contents.values())
    if total > MAX_INSTALL_BYTES:
        problems.append(("files", f"hold {total} bytes together (at most {MAX_INSTALL_BYTES})"))
    skill_md = contents.get(SKILL_FILE)
    if skill_md is None and not problems:
        problems.append(("files", f"there is no {SKILL_FILE} (the file with the skill's name and description)"))
    parsed = None
    if skill_md is not None:
        try:
            text = skill_md.decode("utf-8")
        except UnicodeDecodeError:
            problems.append((SKILL_FILE, "is not UTF-8 text"))
        else:
            parsed = parse_skill_md(text)
            problems += [(f"{SKILL_FILE}: {where}" if where else SKILL_FILE, msg) for where, msg in parsed.problems]
    if problems or parsed is None:
        raise DefinitionError(problems, source="skill")
    fields = parsed.fields
    meta = SkillMetadata(name=fields["name"], description=fields["description"], source=source,
                         files=tuple(sorted(p for p in contents if p != SKILL_FILE)),
                         license=fields.get("license"), compatibility=fields.get("compatibility"),
                         allowed_tools=fields.get("allowed_tools"), metadata=fields.get("metadata") or {})
    return Skill(meta, parsed.body, contents=contents)


def _file_value(data: bytes) -> dict[str, str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}
    if "\x00" in text:
        return {"base64": base64.b64encode(data).decode("ascii")}
    return {"text": text}


def encode_skill(skill: Skill) -> dict[str, Any]:
    """The env value that stores an installed skill."""
    value = skill.metadata.to_dict()
    value.pop("source", None)
    value["instructions"] = skill.instructions
    value["contents"] = {path: _file_value(data) for path, data in (skill.contents or {}).items()}
    value["installedAt"] = int(time.time() * 1000)
    return value


def decode_skill(value: Any, source: SkillSource) -> Skill | None:
    """An installed skill from its env value (None for a value that is not one)."""
    if not isinstance(value, Mapping) or not isinstance(value.get("name"), str):
        return None
    contents: dict[str, bytes] = {}
    for path, entry in (value.get("contents") or {}).items():
        if isinstance(entry, Mapping) and isinstance(entry.get("text"), str):
            contents[path] = entry["text"].encode("utf-8", "surrogatepass")
        elif isinstance(entry, Mapping) and isinstance(entry.get("base64"), str):
            contents[path] = base64.b64decode(entry["base64"])
    meta = SkillMetadata(name=value["name"], description=str(value.get("description") or ""), source=source,
                         files=tuple(p for p in value.get("files") or () if p in contents),
                         license=value.get("license"), compatibility=value.get("compatibility"),
                         allowed_tools=value.get("allowedTools"), metadata=dict(value.get("metadata") or {}))
    return Skill(meta, str(value.get("instructions") or ""), contents=contents)
