"""A loaded skill: its metadata, its instructions, and where its files are read from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ._format import SKILL_FILE, SkillMetadata, check_skill_path

__all__ = ["Skill"]


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill. Its files live either in a folder (a project's or a package's skill) or in
    ``contents`` (a skill installed at run time, stored with the thread or the user)."""

    metadata: SkillMetadata
    #: the body of ``SKILL.md``: what the model reads when it loads the skill
    instructions: str
    folder: Path | None = None
    contents: Mapping[str, bytes] | None = None

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def description(self) -> str:
        return self.metadata.description

    def has_file(self, path: str) -> bool:
        clean = check_skill_path(path)
        return clean is not None and (clean == SKILL_FILE or clean in self.metadata.files)

    def read_file(self, path: str) -> bytes | None:
        """A file of the skill by its path in the skill's folder; None when it has none.

        Reads only the files the skill lists, so nothing outside its folder is reachable."""
        clean = check_skill_path(path)
        if clean is None or not (clean == SKILL_FILE or clean in self.metadata.files):
            return None
        if self.contents is not None:
            return self.contents.get(clean)
        if self.folder is None:
            return None
        target = (self.folder / clean).resolve()
        if not target.is_relative_to(self.folder.resolve()) or not target.is_file():
            return None
        return target.read_bytes()

    def file_sizes(self) -> dict[str, int]:
        """Each listed file's size in bytes (missing files are left out)."""
        sizes: dict[str, int] = {}
        for path in self.metadata.files:
            if self.contents is not None:
                data = self.contents.get(path)
                if data is not None:
                    sizes[path] = len(data)
            elif self.folder is not None:
                target = self.folder / path
                if target.is_file():
                    sizes[path] = target.stat().st_size
        return sizes
