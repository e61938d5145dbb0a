"""``serve --workers N``: each worker loads the project and imports what a first turn needs
(the engine's lazy parts, the used provider's SDK) before it accepts a connection."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from test_server_workers import _free_port, database

__all__ = ["database"]

EXE = Path(sys.executable).parent / "standardagents"

FILES = {
    "agents/agents/helper.py": """
        from standardagents import define_agent
        helper = define_agent(name="helper", side_a={"prompt": "helper_prompt"})
    """,
    "agents/prompts/helper_prompt.py": """
        from standardagents import define_prompt
        helper_prompt = define_prompt(name="helper_prompt", prompt="Help.", model="remote")
    """,
    "agents/models/remote.py": """
        from standardagents import define_model
        remote = define_model(name="remote", provider="openai", model="m", base_url="http://127.0.0.1:9/v1",
                              api_key_env="REMOTE_KEY")
    """,
}

#: what a first turn on this project imports, none of it loaded by the server's own modules
FIRST_TURN = ("openai", "standardagents.engine.composition", "standardagents.providers.testmodel")


def _project(root: Path) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip())
    return root


def _until(check: Callable[[], bool], what: str, deadline: float = 180) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_worker_app_is_built_with_the_first_turn_already_imported(tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    code = textwrap.dedent(f"""
        import sys
        from standardagents.server.warmup import warmed_app_from_env
        first = {FIRST_TURN!r}
        before = [m for m in first if m in sys.modules]
        app = warmed_app_from_env()
        print(before, [m for m in first if m in sys.modules], type(app).__name__)
    """)
    env = {**os.environ, "STANDARDAGENTS_SERVER_PROJECT": str(project),
           "STANDARDAGENTS_SERVER_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"[] {list(FIRST_TURN)!r} Starlette"


def test_each_worker_warms_up_before_it_starts_serving(database: str, tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as sink:
        proc = subprocess.Popen([str(EXE), "serve", str(project), "--port", str(port), "--workers", "2", "--dev",
                                 "--database-url", database], stdout=sink, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _until(lambda: log.read_text().count("Application startup complete") >= 2, "two workers to start")
        text = log.read_text()
        started = re.findall(r"Started server process \[(\d+)\]", text)
        warmed = re.findall(r"Worker \[(\d+)\] warmed up", text)
        assert len(started) == 2 and sorted(warmed) == sorted(started), text
        for pid in started:
            assert text.index(f"Worker [{pid}] warmed up") < text.index(f"Started server process [{pid}]")
    finally:
        proc.terminate()
        proc.wait(60)
