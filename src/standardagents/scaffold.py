"""``standardagents init``: a new project copied from the quickstart example."""

from __future__ import annotations

import shutil
from pathlib import Path

from .exceptions import StandardAgentsError

__all__ = ["create_project", "template_dir"]


def template_dir() -> Path:
    """The quickstart template: shipped in the wheel, or the repository's example folder."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "templates" / "quickstart", here.parents[1] / "examples" / "quickstart"):
        if (candidate / "agents").is_dir():
            return candidate
    raise StandardAgentsError("the quickstart template is missing from this installation")


def create_project(directory: Path) -> Path:
    """Copy the template to ``directory`` (which must not hold a project already)."""
    directory = Path(directory)
    if (directory / "agents").exists():
        raise StandardAgentsError(f"{directory} already holds an agents project")
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template_dir() / "agents", directory / "agents",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return directory
