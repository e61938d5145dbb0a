"""The experiment runner against the offline model and the OpenAI stub: scores, failures
that name their file and case, user scorers, repeats, variants and the LLM judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evals_helpers import make_project, stub_model_file
from standardagents import Runtime
from standardagents.evals import Observation, RunOptions, load_dataset, run_experiment, scorer
from standardagents.evals.storage import get_run, list_runs, save_run, scores_of
from standardagents.testing.openai_stub import OpenAIStub, StubReply

DATASET = """
agent: assistant
cases:
  - name: multiplies
    input: "What is 12 * 7?"
    expect: {contains: "84", tools: {calls: [{name: calculate, arguments: {expression: "12 * 7"}}]}}
  - name: wrong_answer
    input: "What is 12 * 7?"
    expect: {contains: "85"}
"""


async def _run(project: Path, name: str, **options: Any) -> dict[str, Any]:
    rt = await Runtime.open(project, database_url=f"sqlite:///{project / 'eval.db'}", take_over=False)
    try:
        report = await run_experiment(rt, [load_dataset(project / "evals" / name)],
                                      RunOptions(project=project, **options))
        await save_run(rt.store, report)
        report["stored"] = await get_run(rt.store, report["id"])
        report["listed"] = await list_runs(rt.store)
        report["executionScores"] = [await scores_of(rt.store, c["executionId"]) for c in report["cases"]
                                     if c["executionId"]]
        return report
    finally:
        await rt.aclose()


def _case(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in report["cases"] if c["name"] == name)


async def test_passing_and_failing_cases_are_scored_and_counted(tmp_path: Path) -> None:
    report = await _run(make_project(tmp_path, {"basic.yaml": DATASET}), "basic.yaml")
    assert (report["passed"], report["failed"]) == (1, 1)
    good, bad = _case(report, "multiplies"), _case(report, "wrong_answer")
    assert [(s["name"], s["score"], s["passed"]) for s in good["scores"]] == [("contains", 1.0, True), ("tools", 1.0, True)]
    assert good["reply"] == "12 * 7 = 84"
    assert good["toolCalls"][0]["name"] == "calculate"
    assert good["toolCalls"][0]["arguments"] == {"expression": "12 * 7"}
    assert good["tokens"] > 0
    assert bad["scores"] == [{"name": "contains", "score": 0.0, "passed": False, "reason": "missing ['85']",
                              "threshold": None, "cost": None}]


async def test_a_run_is_stored_with_its_cases_and_the_scores_with_their_executions(tmp_path: Path) -> None:
    report = await _run(make_project(tmp_path, {"basic.yaml": DATASET}), "basic.yaml")
    stored = report["stored"]
    assert (stored["passed"], stored["failed"]) == (1, 1)
    assert [c["name"] for c in stored["cases"]] == [c["name"] for c in report["cases"]]
    assert [r["id"] for r in report["listed"]] == [report["id"]]
    by_execution = sorted([(s["name"], s["passed"], s["source"]) for s in scores]
                          for scores in report["executionScores"])
    assert by_execution == [[("contains", False, "experiment")],
                            [("contains", True, "experiment"), ("tools", True, "experiment")]]


async def test_tool_trajectory_with_other_arguments_fails_naming_them(tmp_path: Path) -> None:
    dataset = """
agent: assistant
cases:
  - name: args
    input: "What is 12 * 7?"
    expect: {tools: {calls: [{name: calculate, arguments: {expression: "12 * 8"}}]}}
"""
    report = await _run(make_project(tmp_path, {"t.yaml": dataset}), "t.yaml")
    score = _case(report, "args")["scores"][0]
    assert (score["passed"], score["reason"]) == (
        False, "calculate called with {'expression': '12 * 7'}, expected {'expression': '12 * 8'}")


async def test_unknown_agent_fails_its_case_naming_file_and_case_while_others_run(tmp_path: Path) -> None:
    dataset = DATASET + """  - name: nobody
    agent: no_such_agent
    input: hi
"""
    project = make_project(tmp_path, {"basic.yaml": dataset})
    report = await _run(project, "basic.yaml")
    assert _case(report, "nobody")["error"].startswith(f"{project / 'evals' / 'basic.yaml'}: case nobody: ")
    assert "no_such_agent" in _case(report, "nobody")["error"]
    assert _case(report, "multiplies")["passed"] is True


async def test_unknown_scorer_fails_its_case_naming_file_and_case(tmp_path: Path) -> None:
    dataset = "agent: assistant\ncases:\n  - {name: s, input: hi, expect: {scorers: ['nowhere:nothing']}}\n"
    project = make_project(tmp_path, {"s.yaml": dataset})
    report = await _run(project, "s.yaml")
    assert _case(report, "s")["error"] == (
        f"{project / 'evals' / 's.yaml'}: case s: scorer 'nowhere:nothing': cannot import nowhere: "
        "No module named 'nowhere'")


async def test_a_raising_scorer_fails_its_case_with_the_error_and_others_still_pass(tmp_path: Path) -> None:
    dataset = """
agent: assistant
cases:
  - {name: raises, input: "What is 2 + 2?", expect: {scorers: ['my_scorers:explode']}}
  - {name: fine, input: "What is 2 + 2?", expect: {scorers: [{ref: 'my_scorers:short', threshold: 0.5}]}}
  - {name: async_class, input: "What is 2 + 2?", expect: {scorers: ['my_scorers:HasDigits']}}
"""
    project = make_project(tmp_path, {"u.yaml": dataset})
    (project / "evals" / "my_scorers.py").write_text(
        "def explode(obs):\n    raise RuntimeError('boom')\n\n"
        "def short(obs):\n    return (1.0 if len(obs.text or '') < 40 else 0.0, 'short enough')\n\n"
        "class HasDigits:\n    async def score(self, obs):\n"
        "        return {'passed': any(ch.isdigit() for ch in obs.text or ''), 'reason': 'digits'}\n")
    report = await _run(project, "u.yaml")
    assert _case(report, "raises")["scores"][0]["reason"] == (
        f"{project / 'evals' / 'u.yaml'}: case raises: scorer explode raised RuntimeError: boom")
    assert _case(report, "raises")["passed"] is False
    assert _case(report, "fine")["scores"][0] == {"name": "short", "score": 1.0, "passed": True,
                                                   "reason": "short enough", "threshold": 0.5, "cost": None}
    assert _case(report, "async_class")["scores"][0]["passed"] is True
    assert (report["passed"], report["failed"]) == (2, 1)


async def test_repeats_run_each_case_that_many_times(tmp_path: Path) -> None:
    report = await _run(make_project(tmp_path, {"basic.yaml": DATASET}), "basic.yaml", repeats=3, concurrency=3)
    assert sorted((c["name"], c["repeat"]) for c in report["cases"]) == [
        ("multiplies", 0), ("multiplies", 1), ("multiplies", 2),
        ("wrong_answer", 0), ("wrong_answer", 1), ("wrong_answer", 2)]
    assert (report["passed"], report["failed"]) == (3, 3)


async def test_seeded_history_is_in_the_thread_before_the_input(tmp_path: Path) -> None:
    dataset = """
agent: assistant
cases:
  - name: seeded
    input:
      message: "What is 3 + 4?"
      history: [{role: user, content: "Remember the number 99."}, {role: assistant, content: "I will."}]
      files: {"notes.txt": "ninety-nine"}
"""
    project = make_project(tmp_path, {"h.yaml": dataset})
    rt = await Runtime.open(project, database_url=f"sqlite:///{project / 'eval.db'}", take_over=False)
    try:
        report = await run_experiment(rt, [load_dataset(project / "evals" / "h.yaml")])
        thread_id = report["cases"][0]["threadId"]
        contents = [(m.role, m.content) for m in await rt.store.list_messages(thread_id)][:3]
        notes = await rt.store.read_file(thread_id, "notes.txt")
    finally:
        await rt.aclose()
    assert contents == [("user", "Remember the number 99."), ("assistant", "I will."), ("user", "What is 3 + 4?")]
    assert notes == b"ninety-nine"


async def test_model_and_prompt_overrides_run_the_variant(tmp_path: Path) -> None:
    with OpenAIStub(lambda body: StubReply(text="from the variant")) as stub:
        project = make_project(tmp_path, {"basic.yaml": DATASET}, models={"variant": stub_model_file("variant", stub.base_url)})
        report = await _run(project, "basic.yaml", model="variant", system="You answer tersely.")
        sent = stub.requests[0]["messages"][0]
    assert {c["reply"] for c in report["cases"]} == {"from the variant"}
    assert sent == {"role": "system", "content": "You answer tersely."}
    assert report["options"]["model"] == "variant"


async def test_llm_judge_grades_through_the_stub_and_records_its_cost(tmp_path: Path) -> None:
    verdict = json.dumps({"score": 0.9, "reason": "the product is right"})
    usage = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
    dataset = """
agent: assistant
cases:
  - name: judged
    input: "What is 12 * 7?"
    reference: "84"
    expect: {judge: {rubric: "The reply gives the right product.", model: judge, threshold: 0.8}}
"""
    with OpenAIStub(lambda body: StubReply(text=verdict, usage=usage)) as stub:
        project = make_project(tmp_path, {"j.yaml": dataset},
                               models={"judge": stub_model_file("judge", stub.base_url, prices=True)})
        report = await _run(project, "j.yaml")
        prompt = stub.requests[0]["messages"][1]["content"]
    assert _case(report, "judged")["scores"] == [{"name": "judge", "score": 0.9, "passed": True,
                                                  "reason": "the product is right", "threshold": 0.8,
                                                  "cost": 0.002}]
    assert "The reply gives the right product." in prompt
    assert "Reply:\n12 * 7 = 84" in prompt
    assert "Reference answer:\n84" in prompt


@scorer(name="mentions_product", threshold=1.0)
def _mentions_product(obs: Observation) -> bool:
    return "84" in (obs.text or "")


async def test_scorers_from_code_apply_to_every_case(tmp_path: Path) -> None:
    project = make_project(tmp_path, {"basic.yaml": DATASET})
    rt = await Runtime.open(project, database_url=f"sqlite:///{project / 'eval.db'}", take_over=False)
    try:
        report = await run_experiment(rt, [load_dataset(project / "evals" / "basic.yaml")],
                                      scorers=[_mentions_product])
    finally:
        await rt.aclose()
    assert [s["name"] for s in _case(report, "multiplies")["scores"]] == ["mentions_product", "contains", "tools"]
    assert all(s["passed"] for s in _case(report, "multiplies")["scores"])
