"""A tool's narrowed state, as a type checker sees it: a handler typed with the capability
Protocols may call what it declared and gets a mypy error for anything else; a misspelt or
unknown declaration is flagged too. One mypy run (the venv's own, in a subprocess) checks a
file of mistakes (an error on each marked line and nowhere else) and a correct file."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from test_definitions_typing import MYPY_CACHE  # one warm mypy cache for the typing tests

MISTAKES = '''
from typing import Any, Protocol

from standardagents import EmptyUsesState, FilesUse, NetworkUse, define_tool


class FilesAndNetwork(FilesUse, NetworkUse, Protocol): ...


async def fetches(state: NetworkUse, args: Any) -> str:
    await state.read_file("notes.txt")  # E: "NetworkUse" has no attribute "read_file"
    return (await state.fetch("https://api.example.com/x")).text


async def reads(state: FilesUse, args: Any) -> str:
    response = await state.fetch("https://api.example.com/x")  # E: "FilesUse" has no attribute "fetch"
    return str(response)


async def nothing(state: EmptyUsesState, args: Any) -> None:
    await state.get_env("key")  # E: "EmptyUsesState" has no attribute "get_env"
    print(state.runtime)  # E: "EmptyUsesState" has no attribute "runtime"


async def both(state: FilesAndNetwork, args: Any) -> None:
    await state.run_code("print(1)")  # E: "FilesAndNetwork" has no attribute "run_code"


t1 = define_tool(name="t1", parameters={"type": "object"}, execute=fetches, uses=["disk"])  # E: "Literal['disk']"
t2 = define_tool(name="t2", parameters={"type": "object"}, execute=reads, varaibles={})  # E: define_tool
t3 = define_tool(name="t3", parameters={}, execute=reads, variables={"limit": {"type": "int"}})  # E: "VariableDefinition | VariableFields"
t4 = define_tool(name="t4", parameters={}, execute=reads, network={"allow": ["x"], "max_byte": 5})  # E: define_tool
'''

CORRECT = '''
from typing import Any, Protocol

from standardagents import FetchResponse, FilesUse, NetworkUse, define_tool


class FilesAndNetwork(FilesUse, NetworkUse, Protocol): ...


async def mirror(state: FilesAndNetwork, args: Any) -> str:
    response: FetchResponse = await state.fetch("https://api.example.com/x", params={"q": "1"})
    await state.write_file("copy.json", response.content)
    region: Any = state.variables["region"]
    await state.log(f"mirrored {response.status_code} for {region}")
    return response.text


tool = define_tool(name="mirror", parameters={"type": "object"}, execute=mirror,
                   variables={"region": {"type": "string", "default": "eu", "description": "Where."}},
                   tenvs={"source": "tool"},
                   network={"allow": ["api.example.com"], "timeout": 5.0, "max_bytes": 4096,
                            "credentials": {"api.example.com": "github"}})


@define_tool(uses=["files", "network"], network=["api.example.com"])
async def lookup(city: str, state: FilesAndNetwork) -> str:
    """Look a city up."""
    return (await state.fetch(f"https://api.example.com/{city}")).text
'''


@pytest.fixture(scope="module")
def mypy_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[int, list[str]]]:
    work = tmp_path_factory.mktemp("tool_state_typing")
    (work / "mistakes.py").write_text(textwrap.dedent(MISTAKES))
    (work / "correct.py").write_text(textwrap.dedent(CORRECT))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--hide-error-context", "--show-column-numbers",
         "--no-pretty", "--cache-dir", str(MYPY_CACHE), "mistakes.py", "correct.py"],
        cwd=work, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr + proc.stdout
    report: dict[str, dict[int, list[str]]] = {}
    for line in proc.stdout.splitlines():
        found = re.match(r"^(.+?\.py):(\d+):(?:\d+:)? error: (.*)$", line)
        if found:
            report.setdefault(found[1], {}).setdefault(int(found[2]), []).append(found[3])
    return report


def test_a_capability_the_state_was_not_typed_with_is_a_type_error_on_its_line(
        mypy_report: dict[str, dict[int, list[str]]]) -> None:
    expected = {number: line.split("# E: ", 1)[1]
                for number, line in enumerate(textwrap.dedent(MISTAKES).splitlines(), start=1) if "# E: " in line}
    got = mypy_report.get("mistakes.py", {})
    assert sorted(got) == sorted(expected), got
    for number, text in expected.items():
        assert any(text in message for message in got[number]), (number, text, got[number])


def test_a_tool_using_what_it_declared_type_checks_clean(mypy_report: dict[str, dict[int, list[str]]]) -> None:
    assert mypy_report.get("correct.py") is None
