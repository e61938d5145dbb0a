"""`standardagents serve --workers 4` on PostgreSQL: every worker comes up without being taken
for dead while it starts, and a worker that does die is reported with the reason."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from standardagents.server.supervisor import exit_reason
from test_server_workers import _free_port, database

__all__ = ["database"]

EXE = Path(sys.executable).parent / "standardagents"
QUICKSTART = Path(__file__).parent.parent / "examples" / "quickstart"


def _until(check: Callable[[], bool], what: str, deadline: float = 180) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def test_four_workers_start_cleanly_and_a_killed_worker_is_reported_with_its_reason(database: str,
                                                                                     tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".standardagents", "__pycache__"))
    port = _free_port()
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    with log.open("w") as sink:
        proc = subprocess.Popen([str(EXE), "serve", str(project), "--port", str(port), "--workers", "4", "--dev",
                                 "--database-url", database], env=env, stdout=sink, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _until(lambda: log.read_text().count("Application startup complete") >= 4, "four workers to start")
        assert _answers(f"http://127.0.0.1:{port}/api/agents")
        started = [int(pid) for pid in re.findall(r"Started server process \[(\d+)\]", log.read_text())]
        assert len(started) == 4, log.read_text()
        os.kill(started[0], signal.SIGKILL)
        _until(lambda: f"Worker process [{started[0]}] was killed by SIGKILL" in log.read_text(),
               "the killed worker to be reported")
        _until(lambda: log.read_text().count("Application startup complete") >= 5, "a replacement worker")
        assert _answers(f"http://127.0.0.1:{port}/api/agents")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    text = log.read_text()
    assert "died" not in text and "Traceback" not in text, text


def test_exit_reasons_are_words() -> None:
    assert exit_reason(-signal.SIGKILL).startswith("was killed by SIGKILL")
    assert exit_reason(1) == "exited with code 1 (its error is logged above)"
    assert "failed to start" in exit_reason(3)
