"""Evals: datasets of cases, scorers, experiments, and stored turns replayed as regression
tests (see docs/evals.md).

The package sits above the engine and uses its public surface; the engine never imports it.
"""

from __future__ import annotations

from .capture import CaptureError, capture_turn, write_case
from .datasets import (
    Case,
    CaseInput,
    Dataset,
    DatasetError,
    Expect,
    JudgeSpec,
    Replay,
    ScorerRef,
    ToolCallExpectation,
    ToolExpectation,
    define_dataset,
    discover_datasets,
    load_dataset,
)
from .runner import CaseResult, RunOptions, run_case, run_experiment
from .scorers import (
    Budget,
    Contains,
    Equals,
    JsonSchema,
    LLMJudge,
    NoGuardrail,
    NotContains,
    Observation,
    OutputTypeValid,
    Regex,
    Score,
    Scorer,
    ScorerError,
    ToolTrajectory,
    as_scorer,
    scorer,
)

__all__ = [
    "Budget",
    "CaptureError",
    "Case",
    "CaseInput",
    "CaseResult",
    "Contains",
    "Dataset",
    "DatasetError",
    "Equals",
    "Expect",
    "JsonSchema",
    "JudgeSpec",
    "LLMJudge",
    "NoGuardrail",
    "NotContains",
    "Observation",
    "OutputTypeValid",
    "Regex",
    "Replay",
    "RunOptions",
    "Score",
    "Scorer",
    "ScorerError",
    "ScorerRef",
    "ToolCallExpectation",
    "ToolExpectation",
    "ToolTrajectory",
    "as_scorer",
    "capture_turn",
    "define_dataset",
    "discover_datasets",
    "load_dataset",
    "run_case",
    "run_experiment",
    "scorer",
    "write_case",
]
