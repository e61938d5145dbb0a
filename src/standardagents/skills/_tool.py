"""The ``load_skill`` tool: how the model reads a skill's instructions and files on demand.

The model first sees only each skill's name and description (the system prompt's skills
block); calling ``load_skill(name)`` returns the instructions and the list of the skill's
files, and ``load_skill(name, path)`` one file. When the prompt also offers ``run_code``,
loading a skill copies its files into the thread's files under ``skills/<name>/``, which is
the sandbox's workspace: a skill's scripts run there, never on the host.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..definitions import ToolDefinition, define_tool
from ..exceptions import ModelRetry
from ._namespace import LOAD_SKILL_TOOL
from ._skill import Skill

__all__ = ["LOAD_SKILL_TOOL", "MAX_READ_CHARS", "WORKSPACE_DIR", "load_skill_tool"]

#: the most characters of one file a call returns
MAX_READ_CHARS = 100_000
#: the most bytes of files one load copies into the run_code workspace
MAX_COPY_BYTES = 8 * 1024 * 1024
#: where a loaded skill's files go among the thread's files
WORKSPACE_DIR = "skills"

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The skill's name, as listed under Skills."},
        "path": {"type": "string", "description": "Optional: one of the skill's files to read "
                 "(e.g. reference/forms.md) instead of its instructions."},
    },
    "required": ["name"],
    "additionalProperties": False,
}

_DESCRIPTION = "Load a skill listed under Skills: returns its instructions and its files; give path to read one file."


async def _read(skill: Skill, path: str) -> bytes | None:
    if skill.folder is not None:
        return await asyncio.to_thread(skill.read_file, path)
    return skill.read_file(path)


async def _copy_to_workspace(state: Any, skill: Skill) -> str:
    """Put the skill's files among the thread's files, for ``run_code``; what to tell the model."""
    sizes = await asyncio.to_thread(skill.file_sizes) if skill.folder is not None else skill.file_sizes()
    if sum(sizes.values()) > MAX_COPY_BYTES:
        return (f"Its files are too large to copy into the run_code workspace together "
                f"({sum(sizes.values())} bytes; at most {MAX_COPY_BYTES}).")
    for path in sizes:
        data = await _read(skill, path)
        if data is not None:
            await state.write_file(f"{WORKSPACE_DIR}/{skill.name}/{path}", data)
    return (f"Its files are in the run_code workspace under {WORKSPACE_DIR}/{skill.name}/ "
            "(run its scripts only with run_code).")


def _text(path: str, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"{path} is a binary file of {len(data)} bytes; it cannot be shown as text."
    if len(text) > MAX_READ_CHARS:
        return text[:MAX_READ_CHARS] + f"\n[... {len(text) - MAX_READ_CHARS} more characters not shown]"
    return text


def load_skill_tool(patterns: Sequence[str], *, workspace: bool = False) -> ToolDefinition:
    """The ``load_skill`` tool of a prompt whose ``skills`` list is ``patterns``; with
    ``workspace``, loading a skill also copies its files where ``run_code`` finds them."""
    enabled_by = list(patterns)

    async def load(state: Any, args: dict[str, Any]) -> str:
        name = str(args.get("name") or "").strip()
        skills = await state.skills.enabled(enabled_by)
        skill = next((s for s in skills if s.name == name), None)
        if skill is None:
            known = ", ".join(s.name for s in skills) or "none"
            raise ModelRetry(f"There is no skill {name!r}. Skills you can load: {known}.")
        path = args.get("path")
        if path:
            data = await _read(skill, str(path))
            if data is None:
                files = ", ".join(skill.metadata.files) or "none besides SKILL.md"
                raise ModelRetry(f"Skill {name!r} has no file {path!r}. Its files: {files}.")
            return _text(str(path), data)
        parts = [f"Skill {skill.name}: {skill.description}", "", skill.instructions]
        if skill.metadata.files:
            parts += ["", f"Files of this skill (read one with {LOAD_SKILL_TOOL} and its path):"]
            parts += [f"- {p}" for p in skill.metadata.files]
            if workspace:
                parts.append(await _copy_to_workspace(state, skill))
        return "\n".join(parts)

    tool: ToolDefinition = define_tool(name=LOAD_SKILL_TOOL, description=_DESCRIPTION, parameters=_SCHEMA,
                                       execute=load, idempotent=True)
    return tool
