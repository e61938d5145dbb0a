"""docs/evals.md's worked examples run as written: the python block, the dataset and the
online rules it shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from evals_helpers import make_project
from standardagents.evals import load_dataset
from standardagents.evals.online import load_online_rules

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "evals.md"


def _block(language: str, first_line: str) -> str:
    found = re.search(r"```" + language + r"\n(" + re.escape(first_line) + r"\n.*?)```", DOCS.read_text(), re.S)
    assert found, f"docs/evals.md shows {first_line}"
    return found.group(1)


def test_the_python_example_prints_what_the_page_says(monkeypatch: pytest.MonkeyPatch) -> None:
    code = _block("python", "import asyncio")
    printed = io.StringIO()
    monkeypatch.chdir(ROOT)
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "docs/evals.md", "exec"), {"__name__": "docs_example"})
    assert printed.getvalue().splitlines() == [
        "1 0", "[('mentions_product', True), ('contains', True), ('tools', True)]"]


def test_the_dataset_shown_loads_and_passes(tmp_path: Path) -> None:
    import asyncio

    from standardagents import Runtime
    from standardagents.evals import run_experiment

    project = make_project(tmp_path, {"basic.yaml": _block("yaml", "# evals/basic.yaml")})

    async def main() -> dict[str, object]:
        rt = await Runtime.open(project, database_url=f"sqlite:///{project / 'eval.db'}", take_over=False)
        try:
            return await run_experiment(rt, [load_dataset(project / "evals" / "basic.yaml")])
        finally:
            await rt.aclose()

    report = asyncio.run(main())
    assert (report["passed"], report["failed"]) == (2, 0)


def test_the_online_rules_shown_load(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (project / "evals" / "online.yaml").write_text(_block("yaml", "- agent: assistant"))
    assert [(r.agent, r.rate, [s.name for s in r.scorers]) for r in load_online_rules(project)] == [
        ("assistant", 0.1, ["no_guardrail", "max_latency_ms"])]
