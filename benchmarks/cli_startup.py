"""CPU time of a command line start: ``standardagents --version``, ``--help`` and
``validate examples/quickstart``, each run in a fresh process several times.

The figure is the child's user + system CPU seconds (``os.wait4``'s resource usage), so a
loaded machine's waiting is not counted; the median of the runs is printed per command.
Run: ``.venv/bin/python benchmarks/cli_startup.py [--runs N] [--pythonpath SRC]``; give
``--pythonpath`` another checkout's ``src`` folder to measure that version with the same
interpreter and dependencies.

Measured on a 2-core machine (medians of 7 runs; `--pythonpath` pointing at the tree before
the package root and the command line imported lazily):

| command | before | after |
|---|---|---|
| ``--version`` | 1.36 s | 0.13 s |
| ``--help`` | 1.42 s | 0.19 s |
| ``validate examples/quickstart`` | 1.80 s | 1.05 s |
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

__all__ = ["cpu_seconds", "main"]

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


if __name__ == "__main__":
    main()
