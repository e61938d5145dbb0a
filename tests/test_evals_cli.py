"""``standardagents eval``: exit status, the JSON report, the JUnit XML, the baseline diff,
capture from the command line, and bad input named by file and case."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from typer.testing import CliRunner

from evals_helpers import make_project
from standardagents import Runtime
from standardagents.cli import app

PASSING = """
agent: assistant
cases:
  - {name: multiplies, input: "What is 12 * 7?", expect: {contains: "84", tools: [calculate]}}
  - {name: adds, input: "What is 2 + 3?", expect: {contains: "5"}}
"""
FAILING = """
agent: assistant
cases:
  - {name: multiplies, input: "What is 12 * 7?", expect: {contains: "85"}}
  - {name: adds, input: "What is 2 + 3?", expect: {contains: "5"}}
"""


def _eval(project: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["eval", str(project), *args, "--database-url",
                                      f"sqlite:///{project / 'eval.db'}"])
    return result.exit_code, result.output


def test_all_cases_passing_exits_zero_and_writes_the_report(tmp_path: Path) -> None:
    project = make_project(tmp_path, {"basic.yaml": PASSING})
    code, output = _eval(project, "--report", str(tmp_path / "r.json"))
    report = json.loads((tmp_path / "r.json").read_text())
    assert code == 0, output
    assert (report["passed"], report["failed"]) == (2, 0)
    case = next(c for c in report["cases"] if c["name"] == "multiplies")
    assert {"name", "passed", "scores", "tokens", "cost", "latencyMs"} <= set(case)
    assert [s["name"] for s in case["scores"]] == ["contains", "tools"]
    assert "2 passed, 0 failed" in output


def test_a_failing_case_exits_one_and_the_junit_xml_names_its_failure(tmp_path: Path) -> None:
    project = make_project(tmp_path, {"basic.yaml": FAILING})
    code, output = _eval(project, "basic", "--junit", str(tmp_path / "j.xml"))
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert code == 1, output
    assert suite is not None
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == ("basic", "2", "1")
    failures = {tc.get("name"): tc.find("failure") for tc in suite.iter("testcase")}
    assert failures["adds"] is None
    assert failures["multiplies"] is not None
    assert failures["multiplies"].get("message") == "contains: missing ['85']"


def test_baseline_lists_regressions_first(tmp_path: Path) -> None:
    project = make_project(tmp_path, {"basic.yaml": PASSING})
    assert _eval(project, "--report", str(tmp_path / "before.json"))[0] == 0
    (project / "evals" / "basic.yaml").write_text(FAILING.replace("adds", "subtracts").replace("2 + 3", "9 - 4"))
    code, output = _eval(project, "--baseline", str(tmp_path / "before.json"), "--report", str(tmp_path / "after.json"))
    changes = json.loads((tmp_path / "after.json").read_text())["baseline"]["changes"]
    assert code == 1
    assert [(c["kind"], c["name"]) for c in changes] == [
        ("regression", "multiplies"), ("score_down", "multiplies"), ("new", "subtracts"), ("removed", "adds")]
    lines = [line.strip() for line in output.splitlines() if line.strip().startswith(("regression", "score_down"))]
    assert lines == ["regression basic/multiplies: passed, now fails", "score_down basic/multiplies: contains 1.00 -> 0.00"]


def test_a_malformed_dataset_file_is_named_and_the_others_still_run(tmp_path: Path) -> None:
    project = make_project(tmp_path, {"basic.yaml": PASSING, "broken.yaml": "agent: a\ncases: [\n"})
    code, output = _eval(project, "--report", str(tmp_path / "r.json"))
    report = json.loads((tmp_path / "r.json").read_text())
    assert code == 1
    assert f"error: {project / 'evals' / 'broken.yaml'}: line 3: not valid YAML" in " ".join(output.split())
    assert report["passed"] == 2


def test_an_unknown_dataset_name_is_named_and_fails(tmp_path: Path) -> None:
    project = make_project(tmp_path, {"basic.yaml": PASSING})
    code, output = _eval(project, "nope")
    assert code == 1
    assert "nope: no such dataset" in output


def test_an_unknown_model_variant_is_refused_before_any_case_runs(tmp_path: Path) -> None:
    project = make_project(tmp_path, {"basic.yaml": PASSING})
    code, output = _eval(project, "--model", "no_such_model", "--report", str(tmp_path / "r.json"))
    assert code == 1
    assert "--model: no model definition named 'no_such_model'" in output
    assert not (tmp_path / "r.json").exists()


def test_capture_then_eval_replays_the_turn_from_the_command_line(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    url = f"sqlite:///{project / 'eval.db'}"

    async def turn() -> str:
        rt = await Runtime.open(project, database_url=url, take_over=False)
        try:
            return (await rt.run("assistant", "What is 6 * 7?")).thread_id
        finally:
            await rt.aclose()

    thread_id = asyncio.run(turn())
    captured = CliRunner().invoke(app, ["eval", "capture", thread_id, "--project", str(project), "--database-url",
                                        url, "--out", str(project / "evals" / "replays.yaml"), "--name", "six_sevens"])
    assert captured.exit_code == 0, captured.output
    assert "captured six_sevens (2 model replies, 1 tool calls)" in captured.output
    code, output = _eval(project, "replays", "--report", str(tmp_path / "r.json"))
    report = json.loads((tmp_path / "r.json").read_text())
    assert code == 0, output
    assert [(c["name"], c["passed"], c["reply"]) for c in report["cases"]] == [("six_sevens", True, "6 * 7 = 42")]


def test_the_installed_command_exits_one_on_a_failing_case(tmp_path: Path) -> None:
    project = make_project(tmp_path, {"basic.yaml": FAILING})
    done = subprocess.run([str(Path(sys.executable).parent / "standardagents"), "eval", str(project), "--no-store",
                           "--database-url", f"sqlite:///{project / 'eval.db'}"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "1 passed, 1 failed" in done.stdout
