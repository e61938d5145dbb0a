"""The command line, in-process and as a subprocess, on the offline model."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from standardagents.cli import app

runner = CliRunner()
EXE = Path(sys.executable).parent / "standardagents"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["STANDARDAGENTS_DATABASE_URL"] = f"sqlite:///{tmp_path / 'cli.db'}"
    return env


def test_init_creates_a_project_that_validates(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", str(tmp_path / "proj")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "proj" / "agents" / "agents" / "assistant.py").is_file()
    checked = runner.invoke(app, ["validate", str(tmp_path / "proj")])
    assert checked.exit_code == 0 and "ok:" in checked.output


def test_init_refuses_an_existing_project(tmp_path: Path) -> None:
    runner.invoke(app, ["init", str(tmp_path / "proj")])
    again = runner.invoke(app, ["init", str(tmp_path / "proj")])
    assert again.exit_code == 1 and "already holds an agents project" in again.output


def test_validate_lists_every_broken_reference_with_its_file(tmp_path: Path) -> None:
    (tmp_path / "agents" / "agents").mkdir(parents=True)
    (tmp_path / "agents" / "prompts").mkdir(parents=True)
    (tmp_path / "agents" / "agents" / "a.py").write_text(
        "from standardagents import define_agent\n"
        "a = define_agent(name='a', side_a={'prompt': 'missing_prompt'}, hooks=['nope'])\n")
    (tmp_path / "agents" / "prompts" / "p.py").write_text(
        "from standardagents import define_prompt\n"
        "p = define_prompt(name='p', prompt='x', tools=['ghost'], model='no_model')\n")
    (tmp_path / "agents" / "prompts" / "q.py").write_text(
        "from standardagents import define_prompt\n"
        "q = define_prompt(name='p', prompt='dup')\n")
    (tmp_path / "agents" / "agents" / "bad.py").write_text(
        "from standardagents import define_agent\n"
        "b = define_agent(name='Bad-Name', type='dual_ai', side_a={'prompt': 'p', 'stopTool': 't'}, exposeAsTool=True)\n")
    result = runner.invoke(app, ["validate", str(tmp_path)])
    assert result.exit_code == 1
    out = result.output
    for expected in ("agents/agents/a.py: line 2: side_a.prompt: unknown prompt 'missing_prompt'",
                     "agents/agents/a.py: line 2: hooks: unknown hook id 'nope'",
                     "agents/prompts/p.py: line 2: tools: unknown tool 'ghost'",
                     "agents/prompts/p.py: line 2: model: unknown model 'no_model'",
                     "agents/prompts/q.py: line 2: duplicate prompt name 'p'",
                     "agents/agents/bad.py: line 2: name: 'Bad-Name' is not a snake_case name",
                     "side_b", "tool_description", "stop_tool_response_property"):
        assert expected in out, expected
    assert "Traceback" not in out


def test_run_streams_the_reply_and_tool_activity_as_a_subprocess(tmp_path: Path) -> None:
    runner.invoke(app, ["init", str(tmp_path / "proj")])
    done = subprocess.run([str(EXE), "run", str(tmp_path / "proj"), "--agent", "assistant", "What is 2 + 2?"],
                          capture_output=True, text=True, env=_env(tmp_path), timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "calculate" in done.stdout and "2 + 2 = 4" in done.stdout
    assert re.search(r"thread thr_\w+ · complete", done.stderr)


def test_errors_are_one_clear_line_without_traceback(tmp_path: Path) -> None:
    done = subprocess.run([str(EXE), "run", str(tmp_path / "nowhere"), "hi"], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert "project folder does not exist" in done.stderr and "Traceback" not in done.stderr


def test_an_approval_waits_and_the_approve_command_continues_the_turn(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "agents" / "agents").mkdir(parents=True)
    (proj / "agents" / "prompts").mkdir()
    (proj / "agents" / "tools").mkdir()
    (proj / "agents" / "agents" / "ops.py").write_text(
        "from standardagents import define_agent\nops = define_agent(name='ops', side_a={'prompt': 'ops_prompt'})\n")
    (proj / "agents" / "prompts" / "ops_prompt.py").write_text(
        "from standardagents import define_prompt\nops_prompt = define_prompt(name='ops_prompt', prompt='x', tools=['wipe'])\n")
    (proj / "agents" / "tools" / "wipe.py").write_text(
        "from standardagents import define_tool\n@define_tool(needs_approval=True)\n"
        "def wipe(target: str) -> str:\n    '''Wipe.'''\n    return f'wiped {target}'\n")
    env = _env(tmp_path)
    first = subprocess.run([str(EXE), "run", str(proj), "wipe it"], capture_output=True, text=True, env=env,
                           timeout=120, stdin=subprocess.DEVNULL)
    assert first.returncode == 4, first.stderr  # waiting for an approval
    token = re.search(rf"standardagents approve {re.escape(str(proj))} (\S+)\n", first.stderr).group(1)
    assert token[0].isalpha()  # no leading dot a shell or a reader could stumble on
    second = subprocess.run([str(EXE), "approve", str(proj), token], capture_output=True, text=True, env=env,
                            timeout=120, stdin=subprocess.DEVNULL)
    assert second.returncode == 0, second.stderr
    assert "wipe -> wiped wipe it" in second.stdout
    third = subprocess.run([str(EXE), "approve", str(proj), token], capture_output=True, text=True, env=env,
                           timeout=120, stdin=subprocess.DEVNULL)
    assert third.returncode == 1 and "stale" in third.stderr


def test_schema_prints_the_agent_document_schema() -> None:
    result = runner.invoke(app, ["schema", "agent-document"])
    assert result.exit_code == 0 and '"$schema"' in result.output


def test_serve_refuses_a_missing_project_or_an_unreachable_database_in_one_line(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["serve", str(tmp_path / "nowhere"), "--port", "1"])
    assert missing.exit_code == 1 and "project folder does not exist" in missing.output
    runner.invoke(app, ["init", str(tmp_path / "proj")])
    unreachable = runner.invoke(app, ["serve", str(tmp_path / "proj"), "--port", "1",
                                      "--database-url", "postgresql://nobody@127.0.0.1:1/none"])
    assert unreachable.exit_code == 1 and "cannot open PostgreSQL database" in unreachable.output
    assert "Traceback" not in missing.output + unreachable.output


def test_serve_refuses_several_workers_on_sqlite_in_one_line(tmp_path: Path) -> None:
    import socket

    runner.invoke(app, ["init", str(tmp_path / "proj")])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ}
    env.pop("STANDARDAGENTS_DATABASE_URL", None)
    refused = subprocess.run([str(EXE), "serve", str(tmp_path / "proj"), "--workers", "2", "--port", str(port)],
                             capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "--workers 2 needs PostgreSQL" in lines[0]
    assert "serving" not in refused.stdout and "Traceback" not in refused.stderr


def test_run_names_the_line_of_a_broken_reference_its_agent_reaches(tmp_path: Path) -> None:
    runner.invoke(app, ["init", str(tmp_path / "proj")])
    prompt = tmp_path / "proj" / "agents" / "prompts" / "assistant_prompt.py"
    prompt.write_text(prompt.read_text().replace('"current_time"', '"current_tme"'))
    done = subprocess.run([str(EXE), "run", str(tmp_path / "proj"), "--agent", "assistant", "hi"], capture_output=True,
                          text=True, env=_env(tmp_path), timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert "agents/prompts/assistant_prompt.py: line 9: tools: unknown tool 'current_tme'" in done.stderr


def test_validate_names_a_thread_endpoint_a_built_in_route_hides(tmp_path: Path) -> None:
    runner.invoke(app, ["init", str(tmp_path / "proj")])
    (tmp_path / "proj" / "agents" / "api").mkdir()
    (tmp_path / "proj" / "agents" / "api" / "messages.get.py").write_text(
        "from standardagents import define_thread_endpoint\n\n\n@define_thread_endpoint\n"
        "async def messages(req, state, params, auth):\n    return {}\n")
    checked = runner.invoke(app, ["validate", str(tmp_path / "proj")])
    assert checked.exit_code == 1
    assert "thread endpoint 'messages.get' (agents/api/messages.get.py) is hidden by the built-in route" in checked.output
