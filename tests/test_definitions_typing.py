"""Typed definitions: a type checker flags misspelt fields and wrong literals in project files.

One mypy run (the venv's own, in a subprocess) checks three things at once: a file full of
mistakes gets an error on each marked line and nowhere else, a correct file using every
``define_*`` form is clean, and the quickstart example project is clean.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import get_args

import pytest

from standardagents.definitions import (
    HOOK_NAMES,
    AgentDefinition,
    AgentFields,
    HookName,
    ModelDefinition,
    ModelFields,
    ParentHookFields,
    ParentHookRequirement,
    PromptDefinition,
    PromptFields,
    PromptToolConfig,
    PromptToolFields,
    SessionToolConfig,
    SessionToolFields,
    SideConfig,
    SideFields,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "quickstart"
#: one mypy cache for the typing tests (a cold run analyses the whole package and its libraries)
MYPY_CACHE = Path(tempfile.gettempdir()) / "standardagents-typing-mypy-cache"

# Each line marked ``# E: <text>`` must get a mypy error containing <text>; no other line may.
MISTAKES = '''
from standardagents import (define_a2a_agent, define_agent, define_controller, define_effect, define_hook, define_model,
                            define_prompt, define_thread_endpoint, define_tool)

def handler(state: object, args: dict[str, object]) -> None: ...

a1 = define_agent(name="a", side_a={"prompt": "p"}, max_stepz=3)  # E: Unexpected keyword argument "max_stepz"
a2 = define_agent(name="a", sid_a={"prompt": "p"})  # E: Unexpected keyword argument "sid_a"
a3 = define_agent(name="a", type="ai_humn", side_a={"prompt": "p"})  # E: "Literal['ai_humn']"
a4 = define_agent(name="a", side_a={"prompt": "p", "max_stepz": 3})  # E: Extra key "max_stepz"
a5 = define_agent(name="a", side_a={"prompt": "p", "session_stop": {"nam": "x"}})  # E: SessionToolFields
a6 = define_agent(name="a", side_a={"label": "no prompt"})  # E: Missing key "prompt"
a7 = define_agent(name="a", side_a={"prompt": "p"}, max_session_turns="6")  # E: "max_session_turns"
p1 = define_prompt(name="p", prompt="hi", tool_choise="auto")  # E: Unexpected keyword argument "tool_choise"
p2 = define_prompt(name="p", prompt="hi", tool_choice="always")  # E: "Literal['always']"
p3 = define_prompt(name="p", prompt="hi", tool_discovery="lazy")  # E: "Literal['lazy']"
p4 = define_prompt(name="p", prompt="hi", tools=[{"name": "t", "enabeld": False}])  # E: PromptToolFields
m1 = define_model(name="m", model="gpt", api_key_env="K", temprature=0.2)  # E: Unexpected keyword argument "temprature"
m2 = define_model(name="m", model="gpt", max_tokens="many")  # E: "max_tokens"
t1 = define_tool(name="t", description="d", parameters={}, execute=handler, needs_aproval=True)  # E: define_tool
h1 = define_hook("tool_call_dne", id="h")  # E: define_hook
h2 = define_hook(hook="after_create_mesage", id="h", execute=handler)  # E: define_hook
e1 = define_effect("e", "d", {}, handler, max_atempts=2)  # E: Unexpected keyword argument "max_atempts"
c1 = define_controller(handler, access="private")  # E: define_controller
c2 = define_thread_endpoint(handler, {"acess": "public"})  # E: define_thread_endpoint
r1 = define_a2a_agent("r", url="http://x/a2a/a", time_out=5)  # E: Unexpected keyword argument "time_out"
'''

CORRECT = '''
from pydantic import BaseModel

from standardagents import (SideFields, ToolDefinition, define_a2a_agent, define_agent, define_controller,
                            define_effect, define_hook, define_mcp_server, define_model, define_prompt,
                            define_thread_endpoint, define_tool)


class Args(BaseModel):
    city: str


def handler(state: object, args: dict[str, object]) -> None: ...


skeptic: SideFields = {"label": "Skeptic", "prompt": "skeptic", "max_steps": 4,
                       "session_stop": {"name": "conclude", "message_property": "verdict"}}
debate = define_agent(name="debate", type="dual_ai", max_session_turns=6,
                      side_a={"label": "Advocate", "prompt": "advocate", "stop_on_response": True},
                      side_b=skeptic, expose_as_tool=True, tool_description="Debate a motion.")
as_json = define_agent({"name": "support", "sideA": {"prompt": "p", "maxSteps": 3}, "exposeAsTool": False})
prompt = define_prompt(name="advocate", prompt=["Argue for it.", {"type": "include", "prompt": "house_rules"},
                                                {"type": "env", "key": "tone", "default": "calm"}],
                       model="fast", tools=["calculate", {"name": "research", "include_tool_calls": True}],
                       tool_choice="auto", tool_discovery="ondemand", temperature=0.3)
model = define_model(name="fast", provider="openai", model="gpt-4o-mini", api_key_env="OPENAI_API_KEY",
                     fallbacks=["slow"], max_tokens=512, headers={"x-team": "a"})


@define_tool
def calculate(expression: str) -> str:
    """Evaluate arithmetic."""
    return expression


@define_tool(progress_argument="city", needs_approval=True, timeout=30)
def forecast(city: str) -> str:
    """The weather."""
    return city


weather: ToolDefinition = define_tool(name="weather", description="Weather.", parameters=Args, execute=handler)
name_of_tool: str = calculate.name + forecast.name


@define_hook("filter_messages", id="keep_recent")
def keep_recent(state: object, messages: list[object]) -> list[object]:
    return messages[-10:]


audit = define_hook(hook="tool_call_done", id="audit", execute=handler)
legacy = define_hook(("after_create_message", handler))
digest = define_effect("send_digest", "Send a digest.", {"type": "object"}, handler, max_attempts=3)
reminder = define_effect(name="remind", description="Remind.", args_schema=Args, handler=handler)
packed = define_effect(("notify", "Notify.", {"type": "object"}, handler))


@define_controller(access="public")
def health(context: object) -> dict[str, bool]:
    return {"ok": True}


@define_thread_endpoint
def summary(request: object, state: object) -> str:
    return "ok"


status = define_thread_endpoint(handler, {"access": "authenticated"})
files = define_mcp_server("files", command="python", args=["-m", "server"], tools=["read"], prefix="fs")
remote: ToolDefinition = define_a2a_agent("remote", url="http://x/a2a/helper", token_env="TOKEN", timeout=30)
'''


@pytest.fixture(scope="module")
def mypy_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[int, list[str]]]:
    """Errors by file and line from one mypy run over the three subjects."""
    work = tmp_path_factory.mktemp("typing")
    (work / "mistakes.py").write_text(textwrap.dedent(MISTAKES))
    (work / "correct.py").write_text(textwrap.dedent(CORRECT))
    shutil.copytree(EXAMPLE / "agents", work / "quickstart" / "agents",
                    ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--explicit-package-bases", "--no-error-summary", "--hide-error-context",
         "--show-column-numbers", "--no-pretty", "--cache-dir", str(MYPY_CACHE),
         "mistakes.py", "correct.py", "quickstart/agents"],
        cwd=work, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr + proc.stdout
    report: dict[str, dict[int, list[str]]] = {}
    for line in proc.stdout.splitlines():
        found = re.match(r"^(.+?\.py):(\d+):(?:\d+:)? error: (.*)$", line)
        if found:
            report.setdefault(found[1], {}).setdefault(int(found[2]), []).append(found[3])
    return report


def test_each_misspelt_field_and_wrong_literal_is_a_type_error_on_its_line(mypy_report):
    expected = {
        number: line.split("# E: ", 1)[1]
        for number, line in enumerate(textwrap.dedent(MISTAKES).splitlines(), start=1)
        if "# E: " in line
    }
    got = mypy_report.get("mistakes.py", {})
    assert sorted(got) == sorted(expected), got
    for number, text in expected.items():
        assert any(text in message for message in got[number]), (number, text, got[number])


def test_a_correct_file_using_every_define_form_type_checks_clean(mypy_report):
    assert mypy_report.get("correct.py") is None


def test_the_quickstart_project_type_checks_clean(mypy_report):
    assert {path: errors for path, errors in mypy_report.items() if path.startswith("quickstart")} == {}


_LOADER_SET = {"source_file", "package"}


@pytest.mark.parametrize(("fields", "model"), [
    (AgentFields, AgentDefinition), (SideFields, SideConfig), (SessionToolFields, SessionToolConfig),
    (ParentHookFields, ParentHookRequirement), (PromptFields, PromptDefinition),
    (PromptToolFields, PromptToolConfig), (ModelFields, ModelDefinition),
])
def test_the_typed_keywords_list_exactly_the_definitions_fields(fields, model):
    assert set(fields.__annotations__) == set(model.model_fields) - _LOADER_SET


def test_the_hook_literal_lists_exactly_the_specs_hooks():
    assert set(get_args(HookName)) == HOOK_NAMES
