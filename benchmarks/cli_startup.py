"""CPU time of a command line start: ``standardagents --version``, ``--help`` and
``validate examples/quickstart``, each run in a fresh process several times; and how long the
first turn after ``serve`` starts takes against the second.

The start figure is the child's user + system CPU seconds (``os.wait4``'s resource usage), so
a loaded machine's waiting is not counted; the median of the runs is printed per command. The
turn figure is wall time of a ``?wait=true`` message to the quickstart's assistant, its model a
local stub of the OpenAI protocol answering at once: anything the first turn still imports
shows as the difference. Run: ``.venv/bin/python benchmarks/cli_startup.py [--runs N]
[--pythonpath SRC]``; give ``--pythonpath`` another checkout's ``src`` folder to measure that
version with the same interpreter and dependencies.

Measured on a 2-core machine shared with other work (medians of 7 runs; "before" is the tree
before the package root and the command line imported lazily and ``serve`` warmed the first
turn, through ``--pythonpath``):

| | before | after |
|---|---|---|
| ``--version`` | 1.49 s CPU | 0.15 s CPU |
| ``--help`` | 1.15 s CPU | 0.22 s CPU |
| ``validate examples/quickstart`` | 1.30 s CPU | 0.49 s CPU |
| first turn after ``serve`` starts (second turn) | 0.71 s (0.05 s) | 0.06 s (0.05 s) |
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["cpu_seconds", "first_turns", "main"]

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = (["--version"], ["--help"], ["validate", str(ROOT / "examples" / "quickstart")])


def cpu_seconds(args: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one fresh ``standardagents ARGS`` process."""
    code = "import sys; from standardagents.cli import main; sys.argv[0] = 'standardagents'; main()"
    proc = subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"standardagents {' '.join(args)} exited with {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def first_turns(env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds of the first and the second turn of a fresh ``serve --dev`` process."""
    import httpx

    from standardagents.testing.openai_stub import OpenAIStub, StubReply

    with tempfile.TemporaryDirectory() as tmp, OpenAIStub(lambda body: StubReply(text="hi")) as stub:
        project = Path(tmp) / "quickstart"
        shutil.copytree(ROOT / "examples" / "quickstart", project, ignore=shutil.ignore_patterns(".standardagents"))
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        code = "import sys; from standardagents.cli import main; sys.argv[0] = 'standardagents'; main()"
        server = subprocess.Popen([sys.executable, "-c", code, "serve", str(project), "--dev", "--port", str(port)],
                                  env={**env, "OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "sk-bench"},
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            while True:
                try:
                    if httpx.get(f"{base}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.05)
            took = []
            for _ in range(2):
                thread = httpx.post(f"{base}/api/threads", json={"agent": "assistant"}).json()["id"]
                start = time.perf_counter()
                httpx.post(f"{base}/api/threads/{thread}/messages?wait=true", json={"content": "Hello"}, timeout=120)
                took.append(time.perf_counter() - start)
        finally:
            server.terminate()
            server.wait()
    return took[0], took[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per command (default 7)")
    parser.add_argument("--pythonpath", help="a source folder to import standardagents from instead")
    options = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    if options.pythonpath:
        env["PYTHONPATH"] = str(Path(options.pythonpath).resolve())
    for args in COMMANDS:
        cpu_seconds(args, env)  # the first run fills the bytecode caches
        runs = [cpu_seconds(args, env) for _ in range(options.runs)]
        shown = " ".join(a if not a.startswith(str(ROOT)) else os.path.relpath(a, ROOT) for a in args)
        print(f"standardagents {shown:<36} median {statistics.median(runs):.3f} s CPU "
              f"(min {min(runs):.3f}, max {max(runs):.3f}, {options.runs} runs)")
    turns = [first_turns(env) for _ in range(options.runs)]
    print(f"first turn after serve starts: median {statistics.median(t[0] for t in turns):.3f} s, "
          f"the second {statistics.median(t[1] for t in turns):.3f} s ({options.runs} servers)")


if __name__ == "__main__":
    main()
