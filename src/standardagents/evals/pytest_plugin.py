"""Running a dataset inside a project's own pytest suite: one test per case.

As a plugin (``pytest_plugins = ["standardagents.evals.pytest_plugin"]`` in the project's
``conftest.py``), every dataset file under an ``evals/`` folder is collected, each case an
item, run against the project that holds that folder. Or by hand::

    from standardagents.evals.pytest_plugin import eval_cases, run_eval_case

    @pytest.mark.parametrize("case", eval_cases("evals/basic.yaml"))
    def test_basic(case):
        run_eval_case("path/to/project", case)

Each case runs as ``standardagents eval`` would run it (on a throwaway SQLite database by
default) and fails the test with the reasons of the scores that failed.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .datasets import Case, Dataset, load_dataset
from .runner import CaseResult, RunOptions, run_case

__all__ = ["DatasetFile", "EvalCase", "EvalCaseFailed", "EvalItem", "eval_cases", "pytest_collect_file",
           "run_eval_case"]


class EvalCaseFailed(AssertionError):
    """A case's turn failed or a score fell below its threshold."""


@dataclass(frozen=True)
class EvalCase:
    """One case of a dataset, as a pytest parameter (its id is the case's name)."""

    dataset: Dataset
    case: Case

    def __str__(self) -> str:
        return self.case.name


def eval_cases(path: str | Path) -> list[Any]:
    """The cases of a dataset file as ``pytest.param`` values, each with the case's name as id."""
    dataset = load_dataset(path)
    return [pytest.param(EvalCase(dataset, case), id=case.name) for case in dataset.cases]


def run_eval_case(project: str | Path, item: EvalCase, *, database_url: str | None = None,
                  model: str | None = None, system: str | None = None) -> CaseResult:
    """Run one case against the project and raise :class:`EvalCaseFailed` when it fails."""
    from ..engine import Runtime

    async def main(url: str) -> CaseResult:
        rt = await Runtime.open(project, database_url=url, take_over=False)
        try:
            return await run_case(rt, item.dataset, item.case,
                                  RunOptions(model=model, system=system, project=project))
        finally:
            await rt.aclose()

    if database_url is not None:
        result = asyncio.run(main(database_url))
    else:
        with tempfile.TemporaryDirectory(prefix="standardagents-eval-") as folder:
            result = asyncio.run(main(f"sqlite:///{Path(folder) / 'eval.db'}"))
    if not result.passed:
        reasons = result.error or "; ".join(f"{s.name}: {s.reason}" for s in result.scores if not s.passed)
        raise EvalCaseFailed(f"{item.case.name}: {reasons}")
    return result


class DatasetFile(pytest.File):
    """A dataset file under ``evals/``: its cases are the items."""

    def collect(self) -> Any:
        dataset = load_dataset(self.path)
        for case in dataset.cases:
            yield EvalItem.from_parent(self, name=case.name, item=EvalCase(dataset, case))


class EvalItem(pytest.Item):
    """One case, run against the project holding the ``evals/`` folder."""

    def __init__(self, *, item: EvalCase, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.item = item

    def runtest(self) -> None:
        run_eval_case(self.path.parent.parent, self.item)

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        if isinstance(excinfo.value, EvalCaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"eval case {self.name}"


def pytest_collect_file(file_path: Path, parent: Any) -> DatasetFile | None:
    """Dataset files under an ``evals/`` folder (``online.yaml`` holds rules, not cases)."""
    if file_path.parent.name == "evals" and file_path.suffix in (".yaml", ".yml", ".jsonl") \
            and file_path.stem != "online":
        found: DatasetFile = DatasetFile.from_parent(parent, path=file_path)
        return found
    return None
