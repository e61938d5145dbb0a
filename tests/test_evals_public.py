"""The public surface of ``standardagents.evals``: what a user imports, all of it present."""

from __future__ import annotations

import standardagents.evals as evals

PUBLIC = {
    "Budget", "CaptureError", "Case", "CaseInput", "CaseResult", "Contains", "Dataset", "DatasetError", "Equals",
    "Expect", "JsonSchema", "JudgeSpec", "LLMJudge", "NoGuardrail", "NotContains", "Observation", "OutputTypeValid",
    "Regex", "Replay", "RunOptions", "Score", "Scorer", "ScorerError", "ScorerRef", "ToolCallExpectation",
    "ToolExpectation", "ToolTrajectory", "as_scorer", "capture_turn", "define_dataset", "discover_datasets",
    "load_dataset", "run_case", "run_experiment", "scorer", "write_case",
}


def test_the_package_exports_exactly_its_public_names() -> None:
    assert set(evals.__all__) == PUBLIC
    assert all(getattr(evals, name, None) is not None for name in PUBLIC)


def test_dataset_and_scorer_errors_are_our_own_exceptions() -> None:
    from standardagents.exceptions import DefinitionError, StandardAgentsError

    assert issubclass(evals.DatasetError, DefinitionError)
    assert issubclass(evals.ScorerError, StandardAgentsError)
    assert issubclass(evals.CaptureError, StandardAgentsError)
