"""One way to run mypy over a test's snippet: in the snippet's folder (no project config), with
the flags every typing test shares and their one warm cache, so each run checks the snippet
instead of the whole package again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from test_definitions_typing import MYPY_CACHE

FLAGS = ("--no-error-summary", "--hide-error-context", "--show-column-numbers", "--no-pretty")


def run_mypy(folder: Path, *files: str) -> tuple[str, int]:
    """mypy's report on ``files`` (names in ``folder``) and its exit status (0 clean, 1 errors)."""
    proc = subprocess.run([sys.executable, "-m", "mypy", *FLAGS, "--cache-dir", str(MYPY_CACHE), *files],
                          cwd=folder, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode in (0, 1), proc.stderr + proc.stdout
    return proc.stdout, proc.returncode


def own_lines(report: str, file: str) -> list[str]:
    """The report's lines about ``file``, without the file, line and column: ``error: ...``."""
    prefix = f"{file}:"
    return [line.split(": ", 1)[1] for line in report.splitlines() if line.startswith(prefix) and ": " in line]
