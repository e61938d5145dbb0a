"""What a newcomer meets in the first hour, through the real ``standardagents`` executable:
``dev`` surviving a typo, choosing an agent, errors naming the user's own file and line."""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

EXE = Path(sys.executable).parent / "standardagents"
QUICKSTART = Path(__file__).parent.parent / "examples" / "quickstart"
PING = ('from standardagents import define_controller\n\n\n@define_controller(access="public")\n'
        'def ping(ctx):\n    return {"version": VERSION}\n\n\nVERSION = 1\n')


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["STANDARDAGENTS_DATABASE_URL"] = f"sqlite:///{tmp_path / 'cli.db'}"
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".standardagents", "__pycache__"))
    return project


def _cli(*args: str, env: dict[str, str], stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, env=env, timeout=timeout,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)


def _until(check: Callable[[], bool], what: str, deadline: float = 60) -> None:
    """Poll ``check`` (each poll is a real request or a read of the log) until it holds."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def dev_server(tmp_path: Path) -> Iterator[tuple[Path, str, Path]]:
    """``standardagents dev`` on the quickstart plus ``agents/api/ping.get.py``: (project, base
    URL, the file its stderr goes to)."""
    project = _project(tmp_path)
    (project / "agents" / "api").mkdir()
    (project / "agents" / "api" / "ping.get.py").write_text(PING)
    port = _free_port()
    log = tmp_path / "dev.log"
    with log.open("w") as sink:
        proc = subprocess.Popen([str(EXE), "dev", str(project), "--port", str(port)], env=_env(tmp_path),
                                stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        yield project, f"http://127.0.0.1:{port}", log
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _version(base: str) -> int | None:
    try:
        response = httpx.get(f"{base}/api/ping", timeout=5)
    except httpx.TransportError:
        return None
    return int(response.json()["version"]) if response.status_code == 200 else None


def test_dev_keeps_serving_the_last_good_version_through_a_typo_and_picks_up_the_fix(
        dev_server: tuple[Path, str, Path]) -> None:
    project, base, log = dev_server
    ping = project / "agents" / "api" / "ping.get.py"
    _until(lambda: _version(base) == 1, "dev to serve the project")
    ping.write_text(PING.replace("VERSION = 1", "VERSION = 2") + "\n\ndef oops(:\n")
    _until(lambda: "still serving the previous version" in log.read_text(), "the broken file to be reported")
    # every request still answers (the client's timeout would raise), from the last good version
    assert _version(base) == 1
    assert httpx.get(f"{base}/api/agents", timeout=5).status_code == 200
    text = log.read_text()
    lines = [line for line in text.splitlines() if "ping.get.py" in line]
    assert len(lines) == 1 and "line 12" in lines[0] and "SyntaxError" in lines[0], text
    assert "Traceback" not in text and "startup failed" not in text
    ping.write_text(PING.replace("VERSION = 1", "VERSION = 3"))
    _until(lambda: _version(base) == 3, "the fixed file to be served")
    agents = {a["name"]: a for a in httpx.get(f"{base}/api/agents", timeout=5).json()["agents"]}
    assert agents["debate"]["sides"] == {"a": "Advocate", "b": "Skeptic"} and agents["assistant"]["sides"] == {"a": "Assistant"}
    missing = httpx.post(f"{base}/api/threads", json={}, timeout=5)
    assert missing.status_code == 422 and "GET /api/agents" in missing.json()["error"]["message"]


def test_run_without_agent_uses_the_only_primary_agent(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "agents" / "agents" / "debate.py").unlink()
    done = _cli("run", str(project), "What is 2 + 2?", env=_env(tmp_path))
    # the researcher is a subagent (primary=False): the assistant is the only one to offer
    assert done.returncode == 0, done.stderr
    assert "2 + 2 = 4" in done.stdout


def test_run_without_agent_and_several_primary_ones_lists_them_when_it_cannot_ask(tmp_path: Path) -> None:
    done = _cli("run", str(_project(tmp_path)), "hi", env=_env(tmp_path))
    assert done.returncode == 2  # a usage error: the command line must say which
    assert "choose one with --agent (assistant, debate)" in done.stderr
    assert "researcher" not in done.stderr


def test_errors_in_a_project_file_name_the_users_file_and_line_only(tmp_path: Path) -> None:
    project = _project(tmp_path)
    tool = project / "agents" / "tools" / "calculate.py"
    lines = tool.read_text().splitlines()
    lines.insert(20, "    x = (")
    tool.write_text("\n".join(lines) + "\n")
    env = _env(tmp_path)
    checked = _cli("validate", str(project), env=env)
    assert checked.returncode == 1
    problems = [line for line in checked.stderr.splitlines() if line.startswith("error")]
    assert len(problems) == 1, checked.stderr
    assert "agents/tools/calculate.py: line 21:" in problems[0]
    assert "unknown tool" not in checked.stderr and "(line " not in checked.stderr
    blocked = _cli("run", str(project), "--agent", "assistant", "What is 2 + 2?", env=env)
    assert blocked.returncode == 1 and "agents/tools/calculate.py: line 21:" in blocked.stderr
    other = _cli("run", str(project), "--agent", "debate", "Tabs or spaces?", env=env)
    assert other.returncode == 0, other.stderr
    assert "1 problem(s) elsewhere in the project do not affect debate" in other.stderr


def test_an_exception_raised_on_import_names_the_users_line(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "agents" / "tools" / "broken.py").write_text("import json\n\n\njson.loads('{')\n")
    checked = _cli("validate", str(project), env=_env(tmp_path))
    assert checked.returncode == 1
    assert "agents/tools/broken.py: line 4: JSONDecodeError" in checked.stderr
    assert "json/" not in checked.stderr and "decoder.py" not in checked.stderr


def test_a_postgresql_url_without_the_driver_names_the_extra_to_install(tmp_path: Path) -> None:
    # a package that fails to import exactly as a missing one does, first on the path
    shadow = tmp_path / "shadow" / "asyncpg"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'asyncpg'\", name='asyncpg')\n")
    env = {**_env(tmp_path), "PYTHONPATH": str(shadow.parent)}
    url = "postgresql://postgres@127.0.0.1:5432/test"
    for args in (["serve", str(_project(tmp_path)), "--database-url", url],
                 ["tokens", "create", "alice", "--project", str(tmp_path / "proj"), "--database-url", url]):
        done = _cli(*args, env=env)
        assert done.returncode == 1, done.stderr
        assert "pip install 'standardagents[postgres]'" in done.stderr
        assert "Traceback" not in done.stderr


def test_tokens_create_refuses_a_folder_that_is_not_a_project_and_the_401_names_the_project(
        tmp_path: Path, dev_server: tuple[Path, str, Path]) -> None:
    env = {k: v for k, v in _env(tmp_path).items() if k != "STANDARDAGENTS_DATABASE_URL"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([str(EXE), "tokens", "create", "alice"], capture_output=True, text=True, env=env,
                          cwd=elsewhere, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and "is not an agents project" in done.stderr and "--project" in done.stderr
    assert not (elsewhere / ".standardagents").exists() and done.stdout == ""
    project, base, _ = dev_server
    _until(lambda: _version(base) == 1, "dev to serve the project")
    refused = httpx.post(f"{base}/api/threads", json={"agent": "assistant"},
                         headers={"Authorization": "Bearer sat_not_a_real_token"}, timeout=5)
    assert refused.status_code == 401
    assert f"tokens list --project {project}" in refused.json()["error"]["message"]


def _guarded_project(tmp_path: Path) -> Path:
    project = tmp_path / "guarded"
    for folder in ("agents", "prompts", "tools", "models"):
        (project / "agents" / folder).mkdir(parents=True)
    (project / "agents" / "agents" / "safe.py").write_text(
        "from standardagents import define_agent\n"
        "safe = define_agent(name='safe', side_a={'prompt': 'safe_prompt', 'stop_on_response': True},\n"
        "                    input_guardrails=['no_secrets'])\n"
        "broken = define_agent(name='broken', side_a={'prompt': 'broken_prompt', 'stop_on_response': True})\n"
        "busy = define_agent(name='busy', side_a={'prompt': 'busy_prompt', 'max_steps': 1})\n"
        "keyless = define_agent(name='keyless', side_a={'prompt': 'keyless_prompt', 'stop_on_response': True})\n")
    (project / "agents" / "prompts" / "p.py").write_text(
        "from standardagents import define_prompt\n"
        "safe_prompt = define_prompt(name='safe_prompt', prompt='x')\n"
        "broken_prompt = define_prompt(name='broken_prompt', prompt='x', model='nowhere')\n"
        "busy_prompt = define_prompt(name='busy_prompt', prompt='x', tools=['echo'])\n"
        "keyless_prompt = define_prompt(name='keyless_prompt', prompt='x', model='remote')\n")
    (project / "agents" / "tools" / "t.py").write_text(
        "from standardagents import define_tool\n\n\n@define_tool(guardrail=True)\n"
        "def no_secrets(text: str) -> dict:\n    '''Refuse secrets.'''\n"
        "    return {'tripwire': 'password' in text.lower()}\n\n\n@define_tool\n"
        "def echo(text: str) -> str:\n    '''Echo.'''\n    return text\n")
    (project / "agents" / "models" / "m.py").write_text(
        "from standardagents import define_model\n"
        "nowhere = define_model(name='nowhere', provider='openai', model='m', base_url='http://127.0.0.1:9/v1',\n"
        "                       api_key_env='NO_SUCH_KEY_VARIABLE')\n"
        "remote = define_model(name='remote', provider='openai', model='m', base_url='https://api.example.invalid/v1',\n"
        "                      api_key_env='NO_SUCH_KEY_VARIABLE')\n")
    return project


def test_run_exit_codes_tell_how_the_turn_ended(tmp_path: Path) -> None:
    project = _guarded_project(tmp_path)
    env = _env(tmp_path)
    assert _cli("run", str(project), "--agent", "safe", "hello", env=env).returncode == 0
    tripped = _cli("run", str(project), "--agent", "safe", "my password is x", env=env)
    assert tripped.returncode == 3, tripped.stderr
    failed = _cli("run", str(project), "--agent", "broken", "hello", env=env)
    assert failed.returncode == 1, failed.stderr
    limited = _cli("run", str(project), "--agent", "busy", "echo hello", env=env)
    assert limited.returncode == 5, limited.stderr


def test_a_missing_key_names_the_variable_and_api_key_env(tmp_path: Path) -> None:
    done = _cli("run", str(_guarded_project(tmp_path)), "--agent", "keyless", "hello", env=_env(tmp_path))
    assert done.returncode == 1
    assert "NO_SUCH_KEY_VARIABLE (its api_key_env) is not set" in done.stdout + done.stderr


def test_the_readme_install_path_is_where_pack_writes_the_wheel(tmp_path: Path) -> None:
    readme = (Path(__file__).parent.parent / "docs" / "sharing.md").read_text()
    line = next(line for line in readme.splitlines() if line.startswith("pip install my-agents/dist/"))
    pattern = line.split()[2]
    project = _project(tmp_path)
    packed = _cli("pack", str(project), "--agent", "assistant", "--wheel", env=_env(tmp_path), timeout=300)
    assert packed.returncode == 0, packed.stderr
    assert list(tmp_path.glob(pattern.replace("my-agents", project.name))), pattern


def test_a_busy_port_is_reported_before_anything_says_serving(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        for command in ("serve", "dev"):
            done = _cli(command, str(project), "--port", str(port), env=_env(tmp_path), timeout=60)
            assert done.returncode == 1, done.stdout + done.stderr
            assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "--port" in done.stderr
            assert "serving" not in done.stdout and " on http" not in done.stdout


def test_a_sqlite_url_into_a_missing_folder_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "x.db"
    done = _cli("run", str(_project(tmp_path)), "--agent", "assistant", "hi", "--database-url", f"sqlite:///{target}",
                env=_env(tmp_path))
    assert done.returncode == 1
    assert f"the folder {target.parent} does not exist" in done.stderr
    assert not (tmp_path / "no").exists()


def test_import_and_unpack_share_the_overwrite_flag(tmp_path: Path) -> None:
    env = _env(tmp_path)
    project = _project(tmp_path)
    doc = tmp_path / "assistant.json"
    assert _cli("export", str(project), "--agent", "assistant", "--out", str(doc), env=env).returncode == 0
    into = tmp_path / "other"
    assert _cli("import", str(doc), "--into", str(into), env=env).returncode == 0
    again = _cli("import", str(doc), "--into", str(into), env=env)
    assert again.returncode == 1 and "use --overwrite to replace it" in again.stderr
    assert _cli("import", str(doc), "--into", str(into), "--overwrite", env=env).returncode == 0
    assert _cli("import", str(doc), "--into", str(into), "--force", env=env).returncode == 0  # the old name still works
    for command in ("import", "unpack"):
        shown = _cli(command, "--help", env=env).stdout
        assert "--overwrite" in shown and "--force" not in shown


def test_chat_from_a_pipe_runs_slash_commands_locally_and_sends_the_rest(tmp_path: Path) -> None:
    script = ("What is 2 + 2?\n/help\n/bogus\n/new\n/agent\n/agent debate\nTabs or spaces?\n"
              "//literally\n/quit\nnever sent\n")
    done = _cli("chat", str(_project(tmp_path)), "--agent", "assistant", env=_env(tmp_path), stdin=script)
    assert done.returncode == 0, done.stderr
    shown = done.stdout
    assert "2 + 2 = 4" in shown
    assert "/new            start a new thread" in shown and "unknown command /bogus" in shown
    assert "agents: assistant (current), debate" in shown
    assert shown.count("assistant · thread thr_") == 2 and "debate · thread thr_" in shown
    assert "Test reply to: Tabs or spaces?" in shown and "Test reply to: /literally" in shown
    # the chat's own commands never reach the model, and nothing is read after /quit
    for line in ("/help", "/bogus", "/new", "/agent", "/quit", "never sent"):
        assert f"Test reply to: {line}" not in shown
    assert "Traceback" not in done.stderr


def test_version_completion_and_help_without_type_labels_on_flags(tmp_path: Path) -> None:
    env = _env(tmp_path)
    from importlib.metadata import version

    assert _cli("--version", env=env).stdout.strip() == f"standardagents {version('standardagents')}"
    top = _cli("--help", env=env).stdout
    assert "--install-completion" in top
    completed = _cli(env={**env, "_STANDARDAGENTS_COMPLETE": "complete_bash", "COMP_WORDS": "standardagents se",
                          "COMP_CWORD": "1"})
    assert completed.stdout.split() == ["serve"]
    for command in ("run", "serve", "chat", "approve", "pack", "import", "export", "tokens create"):
        shown = _cli(*command.split(), "--help", env={**env, "COLUMNS": "200"}).stdout
        assert "<bool>" not in shown, command
    dev_help = _cli("dev", "--help", env={**env, "COLUMNS": "200"}).stdout
    assert "Interface to listen on." in dev_help and "Port to listen on." in dev_help


class _Terminal:
    """A real pseudo-terminal around a command, so prompt_toolkit runs as it does for a person."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                                     env={**env, "TERM": "xterm", "COLUMNS": "100", "LINES": "40"},
                                     start_new_session=True)
        os.close(slave)
        self.seen = b""
        self.pos = 0

    def expect(self, token: bytes, deadline: float = 60) -> None:
        """Wait for ``token`` after what the last expectation matched."""
        end = time.monotonic() + deadline
        while token not in self.seen[self.pos:]:
            if time.monotonic() > end:
                raise AssertionError(f"no {token!r} on the terminal: {self.seen[-800:]!r}")
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                chunk = os.read(self.master, 65536)
                self.seen += chunk
                if b"\x1b[6n" in chunk:  # the terminal answers prompt_toolkit's cursor-position query
                    os.write(self.master, b"\x1b[1;1R")
        self.pos = self.seen.index(token, self.pos) + len(token)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def close(self) -> int:
        code = self.proc.wait(timeout=30)
        os.close(self.master)
        return code


def test_chat_at_a_terminal_edits_lines_and_remembers_them_across_sessions(tmp_path: Path) -> None:
    project = _project(tmp_path)
    args = [str(EXE), "chat", str(project), "--agent", "assistant"]
    first = _Terminal(args, _env(tmp_path))
    first.expect(b"you>")
    first.type(b"/hepl\x08\x08lp\r")  # typed with a slip, corrected with backspace
    first.expect(b"start a new thread")
    first.expect(b"you>")
    first.type(b"/quit\r")
    assert first.close() == 0
    assert "/help" in (project / ".standardagents" / "chat_history").read_text()
    second = _Terminal(args, _env(tmp_path))
    second.expect(b"you>")
    second.type(b"\x1b[A\x1b[A\r")  # arrow up twice: the line before the last session's /quit
    second.expect(b"start a new thread")
    second.expect(b"you>")
    second.type(b"\x04")  # Ctrl-D leaves
    assert second.close() == 0


def test_the_offline_debate_argues_both_sides_and_ends_with_the_verdict(tmp_path: Path) -> None:
    done = _cli("run", str(_project(tmp_path)), "--agent", "debate", "Tabs or spaces?", env=_env(tmp_path))
    assert done.returncode == 0, done.stderr
    turns = [line for line in done.stdout.splitlines() if line.startswith(("ADVOCATE: ", "SKEPTIC: "))]
    assert len(turns) >= 2, done.stdout
    assert turns[0].startswith("ADVOCATE: ") and "argue FOR" in turns[0] and "Tabs or spaces?" in turns[0]
    assert turns[1].startswith("SKEPTIC: ") and "argue AGAINST" in turns[1] and "Tabs or spaces?" in turns[1]
    assert done.stdout.rstrip().endswith("SKEPTIC concluded: Both sides made their case.")
    assert "session_stop" in done.stderr


def test_init_suggests_a_local_try_that_needs_no_token(tmp_path: Path) -> None:
    done = _cli("init", str(tmp_path / "fresh"), env=_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"standardagents serve {tmp_path / 'fresh'} --dev" in done.stdout


def test_run_at_a_terminal_asks_which_primary_agent(tmp_path: Path) -> None:
    terminal = _Terminal([str(EXE), "run", str(_project(tmp_path)), "Tabs or spaces?"], _env(tmp_path))
    terminal.expect(b"1. assistant")
    terminal.expect(b"2. debate")
    terminal.expect(b"Which agent? [1-2]")
    assert b"researcher" not in terminal.seen  # a subagent is not offered
    terminal.type(b"2\r")
    terminal.expect(b"SKEPTIC concluded:")
    assert terminal.close() == 0


def test_an_unknown_agent_is_a_usage_error_naming_the_projects_agents(tmp_path: Path) -> None:
    done = _cli("run", str(_project(tmp_path)), "--agent", "asistant", "hi", env=_env(tmp_path))
    assert done.returncode == 2
    assert "unknown agent 'asistant'; the project's agents: assistant, debate, researcher" in done.stderr


def test_init_help_names_what_init_writes_and_init_writes_it(tmp_path: Path) -> None:
    shown = _cli("init", "--help", env={**_env(tmp_path), "COLUMNS": "200"}).stdout
    assert _cli("init", str(tmp_path / "fresh"), env=_env(tmp_path)).returncode == 0
    written = sorted(path.relative_to(tmp_path / "fresh" / "agents") for path in (tmp_path / "fresh").rglob("*.py"))
    assert len(written) == 15  # the quickstart's agents, prompts, tools and hook, and nothing else
    unnamed = [str(path) for path in written if f"{path.parent}/" not in shown or not re.search(rf"\b{path.stem}\b", shown)]
    assert unnamed == []


def test_dev_serves_the_rest_of_a_project_whose_file_is_broken_at_start(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "agents" / "tools" / "current_time.py").write_text("from standardagents import define_tool\n\n\ndef oops(:\n")
    port = _free_port()
    log = tmp_path / "dev.log"
    with log.open("w") as sink:
        proc = subprocess.Popen([str(EXE), "dev", str(project), "--port", str(port)], env=_env(tmp_path),
                                stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        _until(lambda: _answers(f"{base}/api/agents"), "dev to serve the project")
        thread = httpx.post(f"{base}/api/threads", json={"agent": "debate"}, timeout=10).json()["id"]
        done = httpx.post(f"{base}/api/threads/{thread}/messages?wait=true", json={"content": "Tabs?"}, timeout=60)
        blocked = httpx.post(f"{base}/api/threads", json={"agent": "assistant"}, timeout=10)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert (done.status_code, done.json()["outcome"]) == (200, "session_stop")
    assert blocked.status_code == 404 and "current_time" in blocked.json()["error"]["message"]
    text = log.read_text()
    assert "error: agents/tools/current_time.py: line 4: SyntaxError" in text
    assert "serving the rest of the project" in text and "Traceback" not in text


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def test_tokens_create_admin_makes_an_existing_user_an_admin(tmp_path: Path) -> None:
    import asyncio

    from standardagents.store import open_store

    project = _project(tmp_path)
    env = _env(tmp_path)
    assert _cli("tokens", "create", "alice", "--project", str(project), env=env).returncode == 0
    promoted = _cli("tokens", "create", "alice", "--admin", "--project", str(project), env=env)
    assert promoted.returncode == 0 and "user alice is now an admin" in promoted.stderr

    async def admin() -> bool:
        store = open_store(env["STANDARDAGENTS_DATABASE_URL"])
        await store.open()
        try:
            user = await store.get_user("alice")
            assert user is not None
            return user.is_admin
        finally:
            await store.close()

    assert asyncio.run(admin()) is True


def test_the_openai_client_talks_to_a_dev_server_with_any_key_but_a_wrong_api_token_is_refused(
        dev_server: tuple[Path, str, Path]) -> None:
    import openai

    _, base, _ = dev_server
    _until(lambda: _version(base) == 1, "dev to serve the project")
    with openai.OpenAI(base_url=f"{base}/v1", api_key="dev", max_retries=0) as client:
        reply = client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "What is 6 * 7?"}])
        assert reply.choices[0].message.content == "6 * 7 = 42"
    with openai.OpenAI(base_url=f"{base}/v1", api_key="sat_mistyped", max_retries=0) as client, \
            pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "hi"}])


def test_each_run_init_suggests_shows_its_feature(tmp_path: Path) -> None:
    import shlex

    env = _env(tmp_path)
    created = _cli("init", str(tmp_path / "fresh"), env=env)
    suggested = [shlex.split(line.split("#")[0].strip()) for line in created.stdout.splitlines()
                 if line.strip().startswith("standardagents run ")]
    shown = [_cli(*command[1:], env=env) for command in suggested]
    assert [done.returncode for done in shown] == [0, 0, 0]
    assert "12 * 7 = 84" in shown[0].stdout
    assert "▸ researcher(" in shown[1].stdout and "Research complete. (attached: notes.md)" in shown[1].stdout
    assert shown[2].stdout.rstrip().endswith("SKEPTIC concluded: Both sides made their case.")
