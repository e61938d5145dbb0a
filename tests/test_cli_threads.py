"""``standardagents threads``: the list shows full ids, each thread's state (a turn waiting for
an approval says so) and subagent threads under the thread that started them; ``show`` takes
an id or a unique start of one and shows the decisions taken on calls that needed approval,
and the approve command of a call still waiting. Through the real executable."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXE = Path(sys.executable).parent / "standardagents"
QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"
OPS = {
    "agents/agents/ops.py": "from standardagents import define_agent\n"
                            "ops = define_agent(name='ops', side_a={'prompt': 'ops_prompt'})\n",
    "agents/prompts/ops_prompt.py": "from standardagents import define_prompt\n"
                                    "ops_prompt = define_prompt(name='ops_prompt', prompt='You clean up.', tools=['wipe'])\n",
    "agents/tools/wipe.py": "from standardagents import define_tool\n\n\n@define_tool(needs_approval=True)\n"
                            "def wipe(target: str) -> str:\n    '''Wipe a target.'''\n    return f'wiped {target}'\n",
}


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)


def _thread_of(done: subprocess.CompletedProcess[str]) -> str:
    found = re.search(r"thread (thr_\w+)", done.stderr)
    assert found, done.stderr
    return found.group(1)


@pytest.fixture
def history(tmp_path: Path) -> dict[str, Any]:
    """The quickstart plus an agent whose tool needs approval: a research turn (with its
    subagent's thread), a wipe approved and a wipe left waiting."""
    project = tmp_path / "proj"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".standardagents", "__pycache__"))
    for rel, text in OPS.items():
        (project / rel).write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STANDARDAGENTS_"))}
    env.update(STANDARDAGENTS_DATABASE_URL=f"sqlite:///{tmp_path / 'cli.db'}", COLUMNS="200")
    research = _cli("run", str(project), "--agent", "assistant", "Research the tides", env=env)
    assert research.returncode == 0, research.stderr
    decided = _cli("run", str(project), "--agent", "ops", "wipe the cache", env=env)
    assert decided.returncode == 4, decided.stderr
    token = re.search(r"standardagents approve \S+ (\S+)\n", decided.stderr)
    assert token, decided.stderr
    denied = _cli("approve", str(project), token.group(1), "--deny", "--reason", "not today", env=env)
    assert denied.returncode == 0, denied.stderr
    waiting = _cli("run", str(project), "--agent", "ops", "wipe the logs", env=env)
    assert waiting.returncode == 4, waiting.stderr
    return {"project": project, "env": env, "research": _thread_of(research), "decided": _thread_of(decided),
            "waiting": _thread_of(waiting), "waiting_output": waiting.stdout}


def test_run_shows_the_call_it_waits_on_in_one_line(history: dict[str, Any]) -> None:
    assert history["waiting_output"] == '▸ wipe(target="wipe the logs") ⏸ waiting for approval\n'


def test_the_list_shows_full_ids_states_and_subagent_threads_under_their_parent(history: dict[str, Any]) -> None:
    listed = json.loads(_cli("threads", "list", "--project", str(history["project"]), "--json",
                             env=history["env"]).stdout)
    assert [t["id"] for t in listed] == [history["waiting"], history["decided"], history["research"]]
    assert [t["state"] for t in listed] == ["waiting for approval", "complete", "complete"]
    (child,) = listed[2]["children"]
    assert (child["agent"], child["parentId"], child["state"]) == ("researcher", history["research"], "session_stop")
    table = _cli("threads", "list", "--project", str(history["project"]), env=history["env"]).stdout
    rows = [line for line in table.splitlines() if "thr_" in line]
    assert [re.search(r"thr_\w+", row).group(0) for row in rows] == [  # type: ignore[union-attr]
        history["waiting"], history["decided"], history["research"], child["id"]]
    assert "waiting for approval" in rows[0] and f"└ {child['id']}" in rows[3]


def test_show_takes_the_start_of_an_id_and_shows_the_decision_taken(history: dict[str, Any]) -> None:
    shown = _cli("threads", "show", history["decided"][:12], "--project", str(history["project"]), env=history["env"])
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"tool wipe {2}error .* {2}denied \(not today\)", shown.stdout), shown.stdout


def test_show_gives_the_approve_command_of_a_call_still_waiting(history: dict[str, Any]) -> None:
    shown = _cli("threads", "show", history["waiting"], "--project", str(history["project"]), env=history["env"])
    assert 'waiting for approval: wipe(target="wipe the logs")' in shown.stdout
    command = re.search(r"\n  approve: (standardagents approve \S+ \S+)\n", shown.stdout)
    assert command, shown.stdout
    approved = _cli(*command.group(1).split()[1:], env=history["env"])
    assert approved.returncode == 0 and "wiped wipe the logs" in approved.stdout


def test_show_refuses_a_start_shared_by_several_ids(history: dict[str, Any]) -> None:
    shown = _cli("threads", "show", "thr_", "--project", str(history["project"]), env=history["env"])
    assert shown.returncode == 1
    assert "'thr_' starts 4 thread ids" in shown.stderr and "give more of the id" in shown.stderr
