"""A command line start loads only what the command needs: the package root imports its names
on first use, ``--version`` and ``--help`` load neither the engine nor the server, the
commands that live beside their parts are imported when run, and ``serve`` imports what the
first turn needs before it listens."""

from __future__ import annotations

import ast
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

import standardagents
from standardagents.cli import LAZY_COMMANDS, _load_lazy
from standardagents.testing.openai_stub import OpenAIStub, StubReply

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart"
#: what a start that runs no turn should not load
HEAVY = ("standardagents.engine", "standardagents.server", "standardagents.store", "standardagents.definitions",
         "sqlalchemy", "openai", "pydantic", "uvicorn", "starlette")


def _loaded_after(code: str, *argv: str) -> list[str]:
    """The modules loaded once ``code`` ran in a fresh interpreter (which exits through
    ``SystemExit`` as a command line does)."""
    probe = ("import atexit, json, sys\n"
             "atexit.register(lambda: print('MODULES=' + json.dumps(sorted(sys.modules))))\n" + code)
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    line = next(line for line in done.stdout.splitlines() if line.startswith("MODULES="))
    return list(json.loads(line.removeprefix("MODULES=")))


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith(HEAVY)]


def test_importing_the_package_root_loads_none_of_its_parts() -> None:
    loaded = _loaded_after("import standardagents")
    assert [m for m in loaded if m.startswith("standardagents.")] == []
    assert _heavy(loaded) == []


def test_a_public_name_is_imported_on_first_use() -> None:
    loaded = _loaded_after("from standardagents import define_tool")
    assert "standardagents.definitions" in loaded and "standardagents.engine" not in loaded


def test_the_roots_lazy_table_is_what_type_checkers_are_shown() -> None:
    tree = ast.parse((ROOT / "src" / "standardagents" / "__init__.py").read_text())
    guarded = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    shown = {"." * node.level + (node.module or ""): tuple(a.name for a in node.names)
             for node in guarded.body if isinstance(node, ast.ImportFrom)}
    assert shown == standardagents._EXPORTS


def test_version_and_help_load_neither_the_engine_nor_the_server() -> None:
    for flag in ("--version", "--help"):
        loaded = _loaded_after("from standardagents.cli import main\nsys.argv[0] = 'standardagents'\nmain()", flag)
        assert _heavy(loaded) == [], flag


def test_each_lazy_command_is_listed_with_its_own_first_line() -> None:
    for name, (_, _, help_text) in LAZY_COMMANDS.items():
        command = _load_lazy(name)
        assert command.get_short_help_str(limit=1000) == help_text, name


def test_a_lazy_command_runs_and_completes_like_the_others(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "standardagents"
    shown = subprocess.run([str(exe), "tokens", "--help"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "COLUMNS": "120"}).stdout
    assert "Create a token for USER" in shown
    completed = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, env={
        **os.environ, "_STANDARDAGENTS_COMPLETE": "complete_bash", "COMP_WORDS": "standardagents tokens cr",
        "COMP_CWORD": "2"})
    assert completed.stdout.split() == ["create"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _until(check: Callable[[], bool], what: str, deadline: float = 90) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def _imported(text: str) -> list[str]:
    """The modules ``-X importtime`` reported in ``text``."""
    return [line.rsplit("|", 1)[1].strip() for line in text.splitlines() if line.startswith("import time:")
            and not line.rstrip().endswith("imported package")]


def test_serve_imports_what_the_first_turn_needs_before_it_listens(tmp_path: Path) -> None:
    project = tmp_path / "qs"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".standardagents", "__pycache__"))
    port = _free_port()
    log = tmp_path / "serve.err"
    with OpenAIStub(lambda body: StubReply(text="Hello from the model.")) as stub:
        # the quickstart's default model becomes a real OpenAI-protocol endpoint (the stub)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STANDARDAGENTS_"))},
               "OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "sk-test",
               "STANDARDAGENTS_DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}"}
        code = "import sys; from standardagents.cli import main; sys.argv[0] = 'standardagents'; main()"
        with log.open("w") as sink:
            proc = subprocess.Popen([sys.executable, "-X", "importtime", "-c", code, "serve", str(project), "--dev",
                                     "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=sink,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            base = f"http://127.0.0.1:{port}"
            _until(lambda: _answers(f"{base}/healthz"), "serve to listen")
            before = len(log.read_text())
            thread = httpx.post(f"{base}/api/threads", json={"agent": "assistant"}, timeout=30).json()["id"]
            done = httpx.post(f"{base}/api/threads/{thread}/messages?wait=true", json={"content": "Hello"},
                              timeout=60).json()
            after = log.read_text()[before:]
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert done["text"] == "Hello from the model."
    first_turn = [m for m in _imported(after)
                  if m.split(".")[0] in ("standardagents", "openai", "httpx", "httpx2", "httpcore", "httpcore2",
                                         "pydantic", "sqlalchemy", "anthropic", "truststore", "h11")]
    assert first_turn == []


def test_the_startup_benchmark_runs_each_command_in_a_fresh_process() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cli_startup.py"), "--runs", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split("median")[0].split() for line in lines[:3]] == [
        ["standardagents", "--version"], ["standardagents", "--help"],
        ["standardagents", "validate", "examples/quickstart"]]
    assert lines[3].startswith("first turn after serve starts: median ") and len(lines) == 4
