"""Helpers for the evals tests: a copy of the quickstart project (the offline test model
answers its assistant) with dataset files written into its evals/ folder."""

from __future__ import annotations

import shutil
from pathlib import Path

QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart" / "agents"


def make_project(root: Path, datasets: dict[str, str] | None = None, *, models: dict[str, str] | None = None) -> Path:
    """A project at ``root``: the quickstart's agents, ``evals/<name>`` files, and model files."""
    shutil.copytree(QUICKSTART, root / "agents")
    (root / "evals").mkdir()
    for name, text in (datasets or {}).items():
        (root / "evals" / name).write_text(text, encoding="utf-8")
    if models:
        (root / "agents" / "models").mkdir(exist_ok=True)
        for name, text in models.items():
            (root / "agents" / "models" / f"{name}.py").write_text(text, encoding="utf-8")
    return root


def stub_model_file(name: str, base_url: str, *, prices: bool = False) -> str:
    """A model definition file pointing at the OpenAI stub."""
    extra = ", prices={'input': 1.0, 'output': 2.0}" if prices else ""
    return (f"from standardagents import define_model\n\n"
            f"{name} = define_model(name={name!r}, provider='openai', model='stub-model', "
            f"base_url={base_url!r}, stream=False, max_retries=0{extra})\n")
