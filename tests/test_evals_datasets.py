"""Datasets: the YAML, JSONL and code forms load into one model; bad input names its file,
case and field, and leaves the other cases runnable."""

from __future__ import annotations

from pathlib import Path

import pytest

from standardagents.evals import (
    Case,
    DatasetError,
    Expect,
    ToolExpectation,
    define_dataset,
    load_dataset,
)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_smallest_yaml_dataset_loads_agent_cases_and_expectations(tmp_path: Path) -> None:
    path = _write(tmp_path, "basic.yaml", """
agent: assistant
cases:
  - name: multiplies
    input: "What is 12 * 7?"
    expect: {contains: "84", tools: [calculate]}
""")
    dataset = load_dataset(path)
    assert (dataset.name, dataset.agent, dataset.source_file) == ("basic", "assistant", str(path))
    case = dataset.cases[0]
    assert (case.name, case.input.message, case.error) == ("multiplies", "What is 12 * 7?", None)
    assert case.expect.contains == "84"
    assert case.expect.tools == ["calculate"]


def test_case_input_with_history_files_and_metadata_accepts_camel_case(tmp_path: Path) -> None:
    path = _write(tmp_path, "full.yaml", """
agent: assistant
cases:
  - name: follow_up
    input:
      message: "And times two?"
      history:
        - {role: user, content: "What is 12 * 7?"}
        - {role: assistant, content: "84"}
      files: {"notes.txt": "remember 84"}
      metadata: {tier: gold}
    reference: "168"
    expect:
      maxLatencyMs: 5000
      noGuardrail: true
      tools: {calls: [{name: calculate, arguments: {expression: "84 * 2"}}], order: any}
""")
    case = load_dataset(path).cases[0]
    assert [m.role for m in case.input.history] == ["user", "assistant"]
    assert case.input.files == {"notes.txt": "remember 84"}
    assert case.input.metadata == {"tier": "gold"}
    assert (case.reference, case.expect.max_latency_ms, case.expect.no_guardrail) == ("168", 5000, True)
    assert isinstance(case.expect.tools, ToolExpectation)
    assert case.expect.tools.order == "any"


def test_jsonl_dataset_takes_its_agent_from_the_header_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "lines.jsonl",
                  '{"agent": "assistant"}\n'
                  '{"name": "a", "input": "hello", "expect": {"regex": "^h"}}\n'
                  '{"name": "b", "input": "bye"}\n')
    dataset = load_dataset(path)
    assert dataset.agent == "assistant"
    assert [c.name for c in dataset.cases] == ["a", "b"]
    assert dataset.cases[0].expect.regex == "^h"


def test_define_dataset_builds_the_same_model_in_code() -> None:
    dataset = define_dataset("inline", "assistant", [
        Case(name="typed", input={"message": "hi"}, expect=Expect(contains="hi")),
        {"name": "plain", "input": "hello", "expect": {"equals": "hello"}},
    ])
    assert [c.name for c in dataset.cases] == ["typed", "plain"]
    assert dataset.cases[1].expect.equals == "hello"


def test_misspelt_field_is_that_cases_error_naming_file_case_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "typo.yaml", """
agent: assistant
cases:
  - name: good
    input: hi
  - name: typo
    input: hi
    expect: {containz: "x"}
""")
    good, bad = load_dataset(path).cases
    assert good.error is None
    assert bad.error == f"{path}: case typo: expect.containz: Extra inputs are not permitted"


def test_bad_regex_is_reported_with_its_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "regex.yaml", "agent: a\ncases:\n  - {name: r, input: hi, expect: {regex: '(unclosed'}}\n")
    error = load_dataset(path).cases[0].error
    assert error is not None
    assert error.startswith(f"{path}: case r: expect.regex: not a regular expression: missing ), unterminated")


def test_duplicate_case_names_make_the_second_one_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "dup.yaml", "agent: a\ncases:\n  - {name: x, input: hi}\n  - {name: x, input: yo}\n")
    first, second = load_dataset(path).cases
    assert first.error is None
    assert second.error == f"{path}: case x: name: used by an earlier case"


def test_yaml_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "broken.yaml", "agent: a\ncases:\n  - name: x\n    input: [unclosed\n")
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert str(info.value).startswith(f"{path}: line 5: not valid YAML")


def test_dataset_without_agent_or_cases_lists_both_problems(tmp_path: Path) -> None:
    path = _write(tmp_path, "empty.yaml", "name: nothing\n")
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert info.value.problems == [("cases", "a dataset needs a list of cases"), ("agent", "Field required")]


def test_jsonl_line_that_is_not_json_names_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.jsonl", '{"agent": "a"}\n{"name": "x", \n')
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert info.value.problems[0][0] == "line 2"
