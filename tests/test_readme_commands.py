"""The README's commands work as written, on a fresh folder: the fenced blocks marked ``bash
tested`` run in order in a temporary folder with the installed ``standardagents`` on the
PATH; those marked ``tested-with-server`` (bash and python, in the README and then in
docs/serving.md) run against ``standardagents serve my-agents --dev`` started there, with the
README's port 8000 replaced by a free one."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```(\w+) ([\w-]+)\n(.*?)^```", re.M | re.S)


def blocks(page: Path, mark: str) -> list[tuple[str, str]]:
    """(language, text) of each block of ``page`` whose info string ends in ``mark``."""
    return [(m.group(1), m.group(3)) for m in FENCE.finditer(page.read_text()) if m.group(2) == mark]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STANDARDAGENTS_", "ANTHROPIC_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "160"
    return env


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_readme_marks_its_quick_start_and_http_examples_as_tested() -> None:
    readme = ROOT / "README.md"
    assert [lang for lang, _ in blocks(readme, "tested")] == ["bash"]
    assert [lang for lang, _ in blocks(readme, "tested-with-server")] == ["bash", "python"]


def test_the_readmes_commands_run_as_written_on_a_fresh_folder(tmp_path: Path) -> None:
    ((_, script),) = blocks(ROOT / "README.md", "tested")
    done = _bash(script, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = done.stdout
    assert "12 * 7 = 84" in shown  # the calculator
    assert "current_time" in shown  # the clock
    assert "Research complete. (attached: notes.md)" in shown  # the researcher subagent
    assert "SKEPTIC concluded: Both sides made their case." in shown  # the debate
    assert "6 * 7 = 42" in shown  # the piped chat
    assert "Traceback" not in done.stderr

    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as sink:
        server = subprocess.Popen([str(BIN / "standardagents"), "serve", "my-agents", "--dev", "--port", str(port)],
                                  cwd=tmp_path, env=_env(), stdout=sink, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        end = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < end, log.read_text()
            time.sleep(0.1)
        served = [*blocks(ROOT / "README.md", "tested-with-server"), *blocks(ROOT / "docs" / "serving.md",
                                                                           "tested-with-server")]
        local = [(lang, text.replace(":8000", f":{port}")) for lang, text in served]
        # the bash blocks share one shell (a later one uses $THREAD); the python ones run alone
        shell = _bash("\n".join(text for lang, text in local if lang == "bash"), tmp_path)
        python = [subprocess.run([sys.executable, "-c", text], cwd=tmp_path, env=_env(), capture_output=True,
                                 text=True, timeout=120) for lang, text in local if lang == "python"]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    assert shell.returncode == 0, shell.stdout + shell.stderr
    assert '"type":"tool_call_done"' in shell.stdout.replace(" ", "")  # the streamed turn
    assert '"rerunOf"' in shell.stdout  # the re-run's branch (docs/serving.md)
    assert [p.returncode for p in python] == [0], [p.stderr for p in python]
    assert python[0].stdout == "6 * 7 = 42\n"


def test_every_link_of_the_readme_and_the_pages_it_sends_readers_to_exists() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = [f"{page.name} -> {target}" for page in pages
               for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text())
               if not target.startswith(("http://", "https://", "mailto:")) and not (page.parent / target).exists()]
    assert missing == []
