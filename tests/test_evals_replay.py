"""Stored turns captured as cases and replayed: offline from their model and tool cassettes,
or with a live model whose changed tool arguments are reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from evals_helpers import make_project
from standardagents import Runtime
from standardagents.evals import capture_turn, load_dataset, run_experiment, write_case
from standardagents.evals.replay import REPLAY_MODEL


async def _open(project: Path) -> Runtime:
    return await Runtime.open(project, database_url=f"sqlite:///{project / 'eval.db'}", take_over=False)


async def _captured(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A project with one real turn ('What is 12 * 7?') captured into evals/captured.yaml."""
    project = make_project(tmp_path)
    rt = await _open(project)
    try:
        result = await rt.run("assistant", "What is 12 * 7?")
        case = await capture_turn(rt.store, result.thread_id, name="times")
    finally:
        await rt.aclose()
    write_case(project / "evals" / "captured.yaml", case)
    return project, case


def _edit(project: Path, change: Any) -> None:
    path = project / "evals" / "captured.yaml"
    data = yaml.safe_load(path.read_text())
    change(data["cases"][0])
    path.write_text(yaml.safe_dump(data, sort_keys=False))


async def _replay(project: Path) -> tuple[dict[str, Any], list[Any], list[Any]]:
    rt = await _open(project)
    try:
        report = await run_experiment(rt, [load_dataset(project / "evals" / "captured.yaml")])
        case = report["cases"][0]
        messages = await rt.store.list_messages(case["threadId"]) if case["threadId"] else []
        models = [(m.metadata or {}).get("call", {}).get("model") for m in messages if m.role == "assistant"]
    finally:
        await rt.aclose()
    return case, messages, models


async def test_capture_records_input_cassettes_and_reference(tmp_path: Path) -> None:
    _project, case = await _captured(tmp_path)
    assert case["name"] == "times"
    assert case["agent"] == "assistant"
    assert case["input"] == {"message": "What is 12 * 7?"}
    assert case["reference"] == "12 * 7 = 84"
    assert [(t["name"], t["arguments"], t["result"]) for t in case["replay"]["tools"]] == [
        ("calculate", {"expression": "12 * 7"}, "12 * 7 = 84")]
    assert [r["text"] for r in case["replay"]["model"]] == ["", "12 * 7 = 84"]
    assert case["expect"]["equals"] == "12 * 7 = 84"


async def test_captured_turn_replays_offline_to_the_same_result(tmp_path: Path) -> None:
    project, _case = await _captured(tmp_path)
    result, _messages, models = await _replay(project)
    assert result["passed"] is True
    assert result["reply"] == "12 * 7 = 84"
    assert [(s["name"], s["passed"]) for s in result["scores"]] == [("equals", True), ("tools", True), ("replay", True)]
    assert models == [REPLAY_MODEL, REPLAY_MODEL]


async def test_replayed_tool_calls_get_the_recorded_result_instead_of_running(tmp_path: Path) -> None:
    project, _case = await _captured(tmp_path)
    _edit(project, lambda c: c["replay"]["tools"][0].update(result="84, as recorded"))
    _result, messages, _models = await _replay(project)
    assert [m.content for m in messages if m.role == "tool"] == ["84, as recorded"]


async def test_replay_with_a_live_model_reports_changed_tool_arguments(tmp_path: Path) -> None:
    project, _case = await _captured(tmp_path)

    def live_with_new_question(case: dict[str, Any]) -> None:
        case["replay"]["offline"] = False
        case["input"]["message"] = "What is 12 * 8?"

    _edit(project, live_with_new_question)
    result, messages, _models = await _replay(project)
    replay = next(s for s in result["scores"] if s["name"] == "replay")
    assert replay == {"name": "replay", "score": 0.0, "passed": True, "threshold": None, "cost": None,
                      "reason": 'calculate arguments changed: {"expression": "12 * 8"} '
                                '(recorded {"expression": "12 * 7"})'}
    assert result["unmatchedCalls"] == [{"tool": "calculate", "arguments": {"expression": "12 * 8"},
                                         "recorded": {"expression": "12 * 7"}}]
    assert [m.content for m in messages if m.role == "tool"] == ["12 * 8 = 96"]  # ran for real
    assert result["passed"] is False  # the recorded trajectory and reply no longer hold


async def test_unmatched_calls_fail_the_case_when_the_replay_says_so(tmp_path: Path) -> None:
    project, _case = await _captured(tmp_path)

    def strict(case: dict[str, Any]) -> None:
        case["replay"].update(offline=False, unmatched="fail")
        case["input"]["message"] = "What is 12 * 8?"
        case["expect"] = {}

    _edit(project, strict)
    result, messages, _models = await _replay(project)
    assert [(s["name"], s["passed"]) for s in result["scores"]] == [("replay", False)]
    assert [m.content for m in messages if m.role == "tool"] == [
        "Error: replay: no recorded call of calculate with these arguments"]


async def test_a_replay_that_runs_past_its_recording_fails_with_a_clear_error(tmp_path: Path) -> None:
    project, _case = await _captured(tmp_path)
    _edit(project, lambda c: c["replay"].update(model=c["replay"]["model"][:1]))
    result, _messages, _models = await _replay(project)
    assert result["passed"] is False
    assert "the recording has no more model replies" in result["error"]


async def test_a_later_turn_is_captured_with_the_history_before_it_and_replays(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    rt = await _open(project)
    try:
        first = await rt.run("assistant", "What is 12 * 7?")
        await rt.send(first.thread_id, "What is 2 + 3?")
        case = await capture_turn(rt.store, first.thread_id, name="second_turn")
    finally:
        await rt.aclose()
    write_case(project / "evals" / "captured.yaml", case)
    assert case["input"]["message"] == "What is 2 + 3?"
    assert [(m["role"], m["content"]) for m in case["input"]["history"]] == [
        ("user", "What is 12 * 7?"), ("assistant", None), ("tool", "12 * 7 = 84"), ("assistant", "12 * 7 = 84")]
    result, messages, _models = await _replay(project)
    assert (result["passed"], result["reply"]) == (True, "2 + 3 = 5")
    assert [m.role for m in messages][:4] == ["user", "assistant", "tool", "assistant"]


async def test_captured_cases_append_to_a_jsonl_dataset(tmp_path: Path) -> None:
    _project, case = await _captured(tmp_path)
    path = tmp_path / "regressions.jsonl"
    write_case(path, case)
    write_case(path, {**case, "name": "times_again"})
    dataset = load_dataset(path)
    assert dataset.agent == "assistant"
    assert [(c.name, c.error, c.reference) for c in dataset.cases] == [
        ("times", None, "12 * 7 = 84"), ("times_again", None, "12 * 7 = 84")]
