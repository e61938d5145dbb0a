"""``run`` and ``chat`` at a terminal render the reply's markdown and show each tool call on one
line; through a pipe they write the reply as the model wrote it. The terminal is a real one:
tmux runs the command in a pane of a fixed size and the test reads the screen it shows."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from standardagents.testing.openai_stub import OpenAIStub, StubReply

EXE = Path(sys.executable).parent / "standardagents"
REPLY = ("# Tides\n\nThe **moon** pulls the sea, twice a day.\n\n- high tide\n- low tide\n\n"
         "```\nheight = 2 * amplitude\n```\n\nThat is all.")
TOOL_LINE = '▸ lookup(topic="tides") ✓'


def _model(body: dict[str, Any]) -> StubReply:
    """Look the topic up once, then answer in markdown."""
    if body["messages"][-1]["role"] == "tool":
        return StubReply(text=REPLY, chunk_size=7)
    return StubReply(tool_calls=[("lookup", '{"topic": "tides"}')])


def _project(root: Path, base_url: str) -> Path:
    files = {
        "agents/agents/guide.py": "from standardagents import define_agent\n"
                                  "guide = define_agent(name='guide', side_a={'prompt': 'guide_prompt', 'max_steps': 4})\n",
        "agents/prompts/guide_prompt.py": "from standardagents import define_prompt\n"
                                          "guide_prompt = define_prompt(name='guide_prompt', prompt='You explain.',\n"
                                          "                             tools=['lookup'])\n",
        "agents/tools/lookup.py": "from standardagents import define_tool\n\n\n@define_tool\n"
                                  "def lookup(topic: str) -> str:\n    '''Look a topic up.'''\n"
                                  "    return f'notes on {topic}'\n",
        "agents/models/default.py": "from standardagents import define_model\n"
                                    f"default = define_model(name='default', provider='openai', model='stub-model',\n"
                                    f"                       base_url='{base_url}', max_retries=0)\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    with OpenAIStub(_model) as stub:
        yield _project(tmp_path / "guide", stub.base_url)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STANDARDAGENTS_", "TMUX"))}
    env["STANDARDAGENTS_DATABASE_URL"] = f"sqlite:///{tmp_path / 'cli.db'}"
    env["OPENAI_API_KEY"] = "sk-test"
    return env


class Pane:
    """A command in a detached tmux pane of 100x50 on a server of its own."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.socket = f"sa-test-{uuid.uuid4().hex[:12]}"
        self.env = env
        command = " ".join(_quote(a) for a in args) + "; echo __EXIT=$?; sleep 600"
        self._tmux("new-session", "-d", "-x", "100", "-y", "50", command)

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True,
                              env={**self.env, "TERM": "xterm-256color"}, timeout=30)
        return done.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-S", "-200")

    def until(self, check: Callable[[str], bool], what: str, deadline: float = 90) -> str:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            shown = self.screen()
            if check(shown):
                return shown
            time.sleep(0.2)
        raise AssertionError(f"no {what} on the terminal:\n{self.screen()}")

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", *keys)

    def close(self) -> None:
        self._tmux("kill-server")


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _check_rendered(shown: str) -> None:
    lines = [line.rstrip() for line in shown.splitlines()]
    assert "**" not in shown and "# Tides" not in shown and "```" not in shown, shown
    assert any(line.strip() == "Tides" for line in lines), shown  # the heading, as a heading
    assert any(line.strip() == "The moon pulls the sea, twice a day." for line in lines), shown
    assert any(line.strip() == "• high tide" for line in lines), shown
    assert any("height = 2 * amplitude" in line for line in lines), shown
    assert [line for line in lines if line.startswith("▸ ")] == [TOOL_LINE], shown


@needs_tmux
def test_run_at_a_terminal_renders_markdown_and_one_line_per_tool_call(project: Path, tmp_path: Path) -> None:
    pane = Pane([str(EXE), "run", str(project), "--agent", "guide", "Explain tides"], _env(tmp_path))
    try:
        shown = pane.until(lambda s: "__EXIT=" in s, "end of the run")
    finally:
        pane.close()
    assert "__EXIT=0" in shown, shown
    _check_rendered(shown.split("__EXIT=")[0])


@needs_tmux
def test_chat_at_a_terminal_renders_markdown_and_one_line_per_tool_call(project: Path, tmp_path: Path) -> None:
    pane = Pane([str(EXE), "chat", str(project), "--agent", "guide"], _env(tmp_path))
    try:
        pane.until(lambda s: "you>" in s, "the chat's prompt")
        pane.keys("Explain tides", "Enter")
        shown = pane.until(lambda s: "That is all." in s and s.rstrip().endswith("you>"), "the rendered reply")
        pane.keys("/quit", "Enter")
        pane.until(lambda s: "__EXIT=0" in s, "the chat to end")
    finally:
        pane.close()
    _check_rendered(shown)


def test_run_through_a_pipe_writes_the_reply_as_the_model_wrote_it(project: Path, tmp_path: Path) -> None:
    done = subprocess.run([str(EXE), "run", str(project), "--agent", "guide", "Explain tides"], capture_output=True,
                          text=True, env=_env(tmp_path), timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{TOOL_LINE}\n{REPLY}\n"


def test_chat_through_a_pipe_writes_the_reply_as_the_model_wrote_it(project: Path, tmp_path: Path) -> None:
    done = subprocess.run([str(EXE), "chat", str(project), "--agent", "guide"], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=120, input="Explain tides\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert f"{TOOL_LINE}\n{REPLY}\n" in done.stdout
    assert "\x1b[" not in done.stdout


def _plain(events: list[tuple[str, dict[str, Any]]], labels: dict[str, str] | None = None) -> str:
    import io

    from rich.console import Console

    from standardagents.events import Event
    from standardagents.turn_view import TurnView

    sink = io.StringIO()
    view = TurnView(Console(file=sink, highlight=False, soft_wrap=True), rich=False, labels=labels)
    for kind, data in events:
        view.handle(Event(kind, "thr_x", data))
    view.close()
    return sink.getvalue()


def test_reasoning_streams_on_its_own_line_before_the_reply_through_a_pipe() -> None:
    shown = _plain([("reasoning_chunk", {"delta": "Let me "}), ("reasoning_chunk", {"delta": "think."}),
                    ("message_chunk", {"delta": "The answer "}), ("message_chunk", {"delta": "is 4."})])
    assert shown == "Let me think.\nThe answer is 4.\n"


def test_each_side_of_a_conversation_is_written_under_its_label_through_a_pipe() -> None:
    shown = _plain([("message_chunk", {"side": "a", "delta": "For."}), ("message_chunk", {"side": "b", "delta": "Against."})],
                   labels={"a": "ADVOCATE", "b": "SKEPTIC"})
    assert shown == "\nADVOCATE: For.\n\nSKEPTIC: Against.\n"


def test_a_failed_call_shows_its_error_on_its_line() -> None:
    shown = _plain([("tool_call_started", {"id": "c1", "name": "lookup", "arguments": ""}),
                    ("tool_call_done", {"id": "c1", "name": "lookup", "status": "error", "arguments": '{"topic": "x"}',
                                        "error": "no such topic"})])
    assert shown == '▸ lookup(topic="x") ✗ no such topic\n'
