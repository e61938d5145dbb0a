"""A prompt's ``tools`` under mypy and pyright: a lone string is an error; list and tuple
literals (names beside option dicts), ``list[str]`` and ``list[PromptToolConfig]`` variables
check clean; a misspelt option key in a literal is still an error.

Lines marked ``# E`` must get an error from each checker, and no other line may.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_definitions_typing import MYPY_CACHE

PYRIGHT = Path(sys.executable).parent / "pyright"

SOURCE = '''
from standardagents import define_prompt
from standardagents.definitions.prompt import PromptToolConfig

names = ["calculate", "convert"]
configs = [PromptToolConfig(name="convert")]
p1 = define_prompt(name="p", prompt="hi", tools=names)
p2 = define_prompt(name="p", prompt="hi", tools=["calculate", {"name": "convert", "include_tool_calls": True}])
p3 = define_prompt(name="p", prompt="hi", tools=("calculate", {"name": "convert"}))
p4 = define_prompt(name="p", prompt="hi", tools=configs)
p5 = define_prompt(name="p", prompt="hi", tools=[])
p6 = define_prompt(name="p", prompt="hi", tools="calculate")  # E
p7 = define_prompt(name="p", prompt="hi", tools=["calculate", {"nmae": "convert"}])  # E
'''

MARKED = sorted(n for n, line in enumerate(textwrap.dedent(SOURCE).splitlines(), start=1) if line.endswith("# E"))


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("prompt_tools")
    (root / "prompts.py").write_text(textwrap.dedent(SOURCE))
    return root


def _lines(output: str, pattern: str) -> list[int]:
    return sorted({int(m[1]) for m in re.finditer(pattern, output, re.MULTILINE)})


def test_mypy_errors_exactly_on_the_lone_string_and_the_misspelt_key(source: Path):
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--hide-error-context", "--no-pretty",
                           "--cache-dir", str(MYPY_CACHE), "prompts.py"],
                          cwd=source, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr + proc.stdout
    assert _lines(proc.stdout, r"^prompts\.py:(\d+): error:") == MARKED, proc.stdout


def test_pyright_errors_exactly_on_the_lone_string_and_the_misspelt_key(source: Path):
    assert PYRIGHT.exists(), f"{PYRIGHT} is missing: pip install -e '.[dev]'"
    proc = subprocess.run([str(PYRIGHT), "--pythonpath", sys.executable, "prompts.py"],
                          cwd=source, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr + proc.stdout
    assert _lines(proc.stdout, r"prompts\.py:(\d+):\d+ - error:") == MARKED, proc.stdout
