"""Datasets: the cases an experiment runs, from ``evals/*.yaml`` / ``*.jsonl`` files or code.

Both forms load through the same Pydantic models, so a misspelt field is an error naming the
file, the case and the field. A case that does not validate is kept as a broken case (its
error is reported as that case's failure) so the other cases of the file still run; a file
that cannot be read at all raises :class:`DatasetError`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from ..exceptions import DefinitionError

__all__ = [
    "Case",
    "CaseInput",
    "Dataset",
    "DatasetError",
    "Expect",
    "JudgeSpec",
    "Replay",
    "ScorerRef",
    "ToolCallExpectation",
    "ToolExpectation",
    "define_dataset",
    "discover_datasets",
    "load_dataset",
]


class DatasetError(DefinitionError):
    """A dataset file (or one of its cases) does not validate."""


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              protected_namespaces=())


class HistoryMessage(_Model):
    """One message of a seeded history (before the case's input)."""

    role: Literal["user", "assistant", "system", "tool"]
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class CaseInput(_Model):
    """What a case sends: one message, after an optional history, with thread files and
    metadata set before the turn."""

    message: str
    history: list[HistoryMessage] = Field(default_factory=list)
    #: thread files written before the turn: path -> text
    files: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ToolCallExpectation(_Model):
    name: str
    #: the arguments the call must have (a subset: keys not named may hold anything)
    arguments: dict[str, Any] | None = None


class ToolExpectation(_Model):
    """The tool-call trajectory a case expects: these calls, in this order or any order;
    ``exact``: no other calls."""

    calls: list[ToolCallExpectation]
    order: Literal["strict", "any"] = "strict"
    exact: bool = False


class JudgeSpec(_Model):
    """An LLM judge: a rubric, run by a defined model; it answers a score in [0, 1]."""

    rubric: str
    model: str | None = None
    threshold: float = Field(default=0.5, ge=0, le=1)


class ScorerRef(_Model):
    """A user scorer named as ``module:function`` (a function or a class), with its options."""

    ref: str
    threshold: float | None = Field(default=None, ge=0, le=1)
    options: dict[str, Any] = Field(default_factory=dict)


class Expect(_Model):
    """The built-in scorers a case applies (each one named for what it checks)."""

    contains: str | list[str] | None = None
    not_contains: str | list[str] | None = None
    equals: Any = None
    regex: str | None = None
    tools: list[str] | ToolExpectation | None = None
    json_schema: dict[str, Any] | None = None
    output_type: bool | None = None
    no_guardrail: bool | None = None
    max_cost: float | None = Field(default=None, ge=0)
    max_latency_ms: float | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=0)
    judge: JudgeSpec | str | None = None
    scorers: list[ScorerRef | str] = Field(default_factory=list)

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        import re

        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value


class Replay(_Model):
    """A captured turn's cassette: the model's replies in order and what its tools returned.

    ``unmatched``: a tool call with no recorded call of the same tool and arguments runs the
    tool for real (``run``) or fails the case (``fail``)."""

    model: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    unmatched: Literal["run", "fail"] = "run"
    #: answer from the recorded model replies (offline, deterministic); False: the live model
    offline: bool = True
    source: dict[str, Any] = Field(default_factory=dict)


class Case(_Model):
    """One case: its input, what is expected, and (for a captured turn) its cassette."""

    name: str
    input: CaseInput
    expect: Expect = Field(default_factory=Expect)
    #: the expected output: text, or a value of the agent's output type
    reference: Any = None
    agent: str | None = None
    replay: Replay | None = None
    #: set when the case did not validate: the problem, reported as this case's failure
    error: str | None = None

    if TYPE_CHECKING:  # what a caller may pass (the validators below turn it into the fields)
        def __init__(self, *, name: str, input: CaseInput | str | dict[str, Any],
                     expect: Expect | dict[str, Any] = ..., reference: Any = None, agent: str | None = None,
                     replay: Replay | dict[str, Any] | None = None, error: str | None = None) -> None: ...

    @field_validator("input", mode="before")
    @classmethod
    def _message(cls, value: Any) -> Any:
        return {"message": value} if isinstance(value, str) else value


class Dataset(_Model):
    """A named list of cases for one agent, with scorers every case applies."""

    name: str
    agent: str
    cases: list[Case]
    expect: Expect = Field(default_factory=Expect)
    source_file: str | None = None


def define_dataset(name: str, agent: str, cases: list[Case | dict[str, Any]], *,
                   expect: Expect | dict[str, Any] | None = None) -> Dataset:
    """A dataset in code (the same model the files load into); raises :class:`DatasetError`."""
    return _build({"name": name, "agent": agent, "cases": cases, "expect": expect or {}}, f"dataset {name!r}")


def _problems(exc: ValidationError, prefix: str = "") -> list[tuple[str, str]]:
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        out.append((f"{prefix}{loc}" if loc else prefix.rstrip("."), msg))
    return out


def _build(data: Any, source: str) -> Dataset:
    if not isinstance(data, dict):
        raise DatasetError("a dataset is a mapping with 'agent' and 'cases'", source=source)
    head = {k: v for k, v in data.items() if k != "cases"}
    raw_cases = data.get("cases")
    problems: list[tuple[str, str]] = []
    if not isinstance(raw_cases, list) or not raw_cases:
        problems.append(("cases", "a dataset needs a list of cases"))
        raw_cases = []
    try:
        shell = Dataset.model_validate({**head, "cases": []})
    except ValidationError as exc:
        problems.extend(_problems(exc))
    if problems:
        raise DatasetError(problems, source=source)
    cases: list[Case] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_cases):
        if isinstance(raw, Case):
            case = raw
        else:
            label = raw.get("name") if isinstance(raw, dict) and isinstance(raw.get("name"), str) else f"#{index + 1}"
            try:
                case = Case.model_validate(raw)
            except ValidationError as exc:
                found = DatasetError(_problems(exc), source=f"{source}: case {label}")
                case = Case.model_construct(name=str(label), input=CaseInput(message=""), expect=Expect(),
                                            reference=None, agent=None, replay=None, error=str(found))
        if case.name in seen and case.error is None:
            case = case.model_copy(update={"error": f"{source}: case {case.name}: name: used by an earlier case"})
        seen.add(case.name)
        cases.append(case)
    return shell.model_copy(update={"cases": cases, "source_file": source if source.endswith(
        (".yaml", ".yml", ".jsonl", ".json")) else None})


def load_dataset(path: str | Path) -> Dataset:
    """Read a dataset file: YAML (one mapping) or JSONL (one case a line; the agent given by a
    first line ``{"agent": ...}`` or on every case)."""
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"cannot read the dataset: {exc.strerror or exc}", source=source) from None
    if path.suffix == ".jsonl":
        data = _jsonl(text, source)
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}" if mark is not None else ""
            raise DatasetError([(where, f"not valid YAML: {getattr(exc, 'problem', None) or exc}")],
                               source=source) from None
    if isinstance(data, dict):
        data.setdefault("name", path.stem)
    return _build(data, source)


def _jsonl(text: str, source: str) -> dict[str, Any]:
    head: dict[str, Any] = {}
    cases: list[Any] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise DatasetError([(f"line {number}", f"not valid JSON: {exc}")], source=source) from None
        if isinstance(row, dict) and "cases" not in row and "input" not in row and not cases:
            head.update(row)  # the header line: agent, name, expect
            continue
        if isinstance(row, dict) and "agent" in row and "agent" not in head:
            head["agent"] = row["agent"]
        cases.append(row)
    return {**head, "cases": cases}


def discover_datasets(project: str | Path) -> list[Path]:
    """The dataset files of a project (``evals/*.yaml``, ``*.yml``, ``*.jsonl``), by name."""
    folder = Path(project) / "evals"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml", ".jsonl") and p.is_file()
                  and p.stem != "online")  # evals/online.yaml holds online rules
