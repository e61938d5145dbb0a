"""Skills: folders of instructions and files that an agent loads when a task calls for them.

A skill is a folder with a ``SKILL.md`` (YAML front matter ``name`` and ``description``, then
the instructions) and any files those instructions use. Skills come from the project
(``agents/skills/NAME/``), with packed packages (their ``skills/`` folder, private to the
package), or are installed at run time into a thread or for a user (``state.skills``). A
prompt enables them by name (``define_prompt(skills=["pdf", "*"])``): the model then sees
each enabled skill's name and description, and reads the rest through the ``load_skill``
tool, so an agent can carry many skills for a few lines of context each.
"""

from __future__ import annotations

from ._catalog import SkillCatalog, add_skills_folder, enabled_skills, load_skills, skills_of
from ._format import SKILL_FILE, SkillFileInput, SkillMetadata, SkillSource, parse_skill_md
from ._installed import MAX_INSTALL_BYTES, skill_from_files
from ._loader import SkillProblem, read_skill_folder, scan_skills
from ._namespace import (
    LOAD_SKILL_TOOL,
    SkillScope,
    SkillsNamespace,
    catalogue_text,
    fixed_catalogue,
)
from ._skill import Skill
from ._tool import WORKSPACE_DIR, load_skill_tool

__all__ = [
    "LOAD_SKILL_TOOL",
    "MAX_INSTALL_BYTES",
    "SKILL_FILE",
    "WORKSPACE_DIR",
    "Skill",
    "SkillCatalog",
    "SkillFileInput",
    "SkillMetadata",
    "SkillProblem",
    "SkillScope",
    "SkillSource",
    "SkillsNamespace",
    "add_skills_folder",
    "catalogue_text",
    "enabled_skills",
    "fixed_catalogue",
    "load_skill_tool",
    "load_skills",
    "parse_skill_md",
    "read_skill_folder",
    "scan_skills",
    "skill_from_files",
    "skills_of",
]
