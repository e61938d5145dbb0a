"""A dataset run inside a pytest suite: one test per case, failing with its scores' reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals_helpers import make_project
from standardagents.evals.pytest_plugin import EvalCase, EvalCaseFailed, eval_cases, run_eval_case

DATASET = """
agent: assistant
cases:
  - {name: multiplies, input: "What is 12 * 7?", expect: {contains: "84"}}
  - {name: wrong, input: "What is 12 * 7?", expect: {contains: "85"}}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path, {"basic.yaml": DATASET})


def test_eval_cases_are_pytest_params_named_for_their_cases(project: Path) -> None:
    params = eval_cases(project / "evals" / "basic.yaml")
    assert [p.id for p in params] == ["multiplies", "wrong"]
    assert all(isinstance(p.values[0], EvalCase) for p in params)


def test_a_passing_case_returns_its_result(project: Path) -> None:
    item = eval_cases(project / "evals" / "basic.yaml")[0].values[0]
    result = run_eval_case(project, item)
    assert (result.passed, result.reply) == (True, "12 * 7 = 84")


def test_a_failing_case_fails_the_test_with_its_reasons(project: Path) -> None:
    item = eval_cases(project / "evals" / "basic.yaml")[1].values[0]
    with pytest.raises(EvalCaseFailed) as info:
        run_eval_case(project, item)
    assert str(info.value) == "wrong: contains: missing ['85']"


def test_as_a_plugin_every_case_under_evals_is_a_test_item(project: Path) -> None:
    import os
    import subprocess
    import sys

    (project / "conftest.py").write_text('pytest_plugins = ["standardagents.evals.pytest_plugin"]\n')
    # only the plugin under test: the other installed plugins would only slow the start
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", "evals"],
                          cwd=project, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED evals/basic.yaml::wrong - wrong: contains: missing ['85']" in done.stdout
    assert "1 failed, 1 passed" in done.stdout
