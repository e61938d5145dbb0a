"""Typing that catches mistakes under both mypy and pyright: a lone string where an agent's
list of names is expected, ``tools`` given to ``define_agent`` (tools belong to prompts),
calls of ``@define_tool`` functions checked against the function's own signature, and a
misspelt ``define_tool`` option named in pyright's message.

One run of each checker (the venv's own, in a subprocess) over one file of mistakes and one
correct file; each line marked ``# E: <mypy text> | <pyright text>`` must get an error from
each checker containing its text, and no other line may.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_definitions_typing import MYPY_CACHE

PYRIGHT = Path(sys.executable).parent / "pyright"

MISTAKES = '''
from standardagents import define_agent, define_tool

@define_tool
def calculate(expression: str) -> str:
    """Evaluate arithmetic."""
    return expression

@define_tool(timeout=5)
def convert(amount: float, currency: str = "EUR") -> float:
    """Convert an amount."""
    return amount

a1 = define_agent(name="a", side_a={"prompt": "p"}, hooks="audit")  # E: "hooks" | "hooks"
a2 = define_agent(name="a", side_a={"prompt": "p"}, approvers="owner")  # E: "approvers" | "approvers"
a3 = define_agent(name="a", side_a={"prompt": "p"}, tools=["calculate"])  # E: "tools" | "tools"
n1: int = calculate("1 + 1")  # E: Incompatible types in assignment | "str" is not assignable to declared type "int"
n2 = calculate(12)  # E: "TypedTool" has incompatible type "int" | "Literal[12]" cannot be assigned to parameter "expression"
n3 = convert(3.0, currency=1)  # E: incompatible type "int" | parameter "currency"
t1 = define_tool(name="t", description="d", parameters={}, execute=print, needs_aproval=True)  # E: define_tool | "needs_aproval"

@define_tool(progres_argument="expression")  # E: define_tool | "progres_argument"
def misspelt(expression: str) -> str:
    """Misspelt."""
    return expression
'''

CORRECT = '''
from standardagents import ToolDefinition, define_agent, define_prompt, define_tool

@define_tool
def calculate(expression: str) -> str:
    """Evaluate arithmetic."""
    return expression

@define_tool(timeout=5, needs_approval=True)
def convert(amount: float, currency: str = "EUR") -> float:
    """Convert an amount."""
    return amount

names = ["calculate", "convert"]
p1 = define_prompt(name="p", prompt="hi", tools=names)
p2 = define_prompt(name="q", prompt="hi", tools=("calculate", {"name": "convert", "include_tool_calls": True}))
a1 = define_agent(name="a", side_a={"prompt": "p"}, hooks=["audit"], approvers=("owner", "admin"))
text: str = calculate("1 + 1")
value: float = convert(3.0, currency="USD")
tool: ToolDefinition = calculate
label: str = calculate.name + convert.description
'''


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("checkers")
    (root / "mistakes.py").write_text(textwrap.dedent(MISTAKES))
    (root / "correct.py").write_text(textwrap.dedent(CORRECT))
    return root


def _expected(checker: int) -> dict[int, str]:
    return {number: line.split("# E: ", 1)[1].split(" | ")[checker]
            for number, line in enumerate(textwrap.dedent(MISTAKES).splitlines(), start=1) if "# E: " in line}


def _by_line(output: str, pattern: str) -> dict[str, dict[int, list[str]]]:
    found: dict[str, dict[int, list[str]]] = {}
    lines = output.splitlines()
    for i, line in enumerate(lines):
        match = re.match(pattern, line)
        if match:
            # pyright continues a message on indented lines: keep them with it
            more = [rest.strip() for rest in lines[i + 1:i + 4] if rest.startswith("    ")]
            found.setdefault(Path(match[1]).name, {}).setdefault(int(match[2]), []).append(
                " ".join([match[3], *more]))
    return found


@pytest.fixture(scope="module")
def mypy_errors(work: Path) -> dict[str, dict[int, list[str]]]:
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--hide-error-context", "--no-pretty",
                           "--cache-dir", str(MYPY_CACHE), "mistakes.py", "correct.py"],
                          cwd=work, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr + proc.stdout
    return _by_line(proc.stdout, r"^(.+?\.py):(\d+): error: (.*)$")


@pytest.fixture(scope="module")
def pyright_errors(work: Path) -> dict[str, dict[int, list[str]]]:
    if shutil.which(str(PYRIGHT)) is None:
        pytest.fail(f"{PYRIGHT} is missing: pip install -e '.[dev]'")
    proc = subprocess.run([str(PYRIGHT), "--pythonpath", sys.executable, "mistakes.py", "correct.py"],
                          cwd=work, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr + proc.stdout
    return _by_line(proc.stdout, r"^\s+(.+?\.py):(\d+):\d+ - error: (.*)$")


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_each_mistake_is_an_error_on_its_line_naming_what_is_wrong(checker, mypy_errors, pyright_errors):
    got = (mypy_errors if checker == "mypy" else pyright_errors).get("mistakes.py", {})
    expected = _expected(0 if checker == "mypy" else 1)
    assert sorted(got) == sorted(expected), got
    for number, text in expected.items():
        assert any(text in message for message in got[number]), (number, text, got[number])


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_lists_tuples_and_calls_with_the_right_types_check_clean(checker, mypy_errors, pyright_errors):
    assert (mypy_errors if checker == "mypy" else pyright_errors).get("correct.py") is None


def test_a_decorated_tool_is_still_called_as_its_function():
    from standardagents import define_tool

    @define_tool
    def convert(amount: float, currency: str = "EUR") -> str:
        """Convert an amount."""
        return f"{amount} {currency}"

    assert convert(3.0, currency="USD") == "3.0 USD"
    assert convert.name == "convert"
