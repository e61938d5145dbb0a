"""Built-in scorers on real turns of the offline model: guardrails, typed output, JSON
schema, budgets, and the tool trajectory in any order or exactly."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from standardagents import define_agent, define_prompt, define_tool
from standardagents.evals import define_dataset, run_experiment


@define_tool
def no_secrets(text: str) -> dict[str, Any]:
    """Trip on anything that looks like a secret."""
    found = "password" in text.lower()
    return {"tripwire": found, "info": {"reason": "secret-looking text"} if found else None}


@define_tool
def add(a: int = 1, b: int = 2) -> str:
    """Add two integers."""
    return str(a + b)


@define_tool
def multiply(a: int = 2, b: int = 3) -> str:
    """Multiply two integers."""
    return str(a * b)


class Answer(BaseModel):
    value: int
    unit: str


def _scores(report: dict[str, Any], name: str) -> list[tuple[str, float, bool, str]]:
    case = next(c for c in report["cases"] if c["name"] == name)
    return [(s["name"], s["score"], s["passed"], s["reason"]) for s in case["scores"]]


async def test_no_guardrail_fails_a_turn_an_input_guardrail_stopped(make_runtime: Any) -> None:
    agent = define_agent(name="guarded", side_a={"prompt": "plain"}, input_guardrails=["no_secrets"])
    rt = await make_runtime(agent, define_prompt(name="plain", prompt="You help."), no_secrets)
    dataset = define_dataset("guards", "guarded", [
        {"name": "secret", "input": "my password is hunter2", "expect": {"no_guardrail": True}},
        {"name": "harmless", "input": "hello there", "expect": {"no_guardrail": True}},
    ])
    report = await run_experiment(rt, [dataset])
    assert _scores(report, "secret") == [("no_guardrail", 0.0, False, "tripped: no_secrets")]
    assert _scores(report, "harmless") == [("no_guardrail", 1.0, True, "none tripped")]


async def test_typed_output_is_checked_by_output_type_json_schema_and_equals(make_runtime: Any) -> None:
    agent = define_agent(name="typed", side_a={"prompt": "typed_prompt"})
    rt = await make_runtime(agent, define_prompt(name="typed_prompt", prompt="Answer.", output_type=Answer))
    schema = {"type": "object", "required": ["value", "unit"], "properties": {"value": {"type": "integer"}}}
    dataset = define_dataset("typed", "typed", [
        {"name": "valid", "input": "How far?", "expect": {"output_type": True, "json_schema": schema}},
        {"name": "wrong_value", "input": "How far?", "expect": {"equals": {"value": -1, "unit": "km"}}},
    ])
    report = await run_experiment(rt, [dataset])
    assert [(n, p) for n, _s, p, _r in _scores(report, "valid")] == [("json_schema", True), ("output_type", True)]
    (equals,) = _scores(report, "wrong_value")
    assert (equals[0], equals[2]) == ("equals", False)
    assert equals[3].endswith("expected {'value': -1, 'unit': 'km'}")


async def test_budgets_fail_a_turn_over_its_tokens_and_pass_one_within(make_runtime: Any) -> None:
    agent = define_agent(name="plain", side_a={"prompt": "plain"})
    rt = await make_runtime(agent, define_prompt(name="plain", prompt="You help."))
    dataset = define_dataset("budgets", "plain", [
        {"name": "tight", "input": "hello", "expect": {"max_tokens": 1}},
        {"name": "roomy", "input": "hello", "expect": {"max_tokens": 100000, "max_latency_ms": 60000, "max_cost": 1}},
    ])
    report = await run_experiment(rt, [dataset])
    ((name, score, passed, _reason),) = _scores(report, "tight")
    assert (name, passed) == ("max_tokens", False)
    assert 0 < score < 1
    assert [(n, p) for n, _s, p, _r in _scores(report, "roomy")] == [
        ("max_cost", True), ("max_latency_ms", True), ("max_tokens", True)]


async def test_tool_trajectory_in_any_order_and_exactly(make_runtime: Any) -> None:
    agent = define_agent(name="calc", side_a={"prompt": "calc_prompt", "stop_on_response": True})
    rt = await make_runtime(agent, define_prompt(name="calc_prompt", prompt="x", tools=["add", "multiply"]),
                            add, multiply)
    dataset = define_dataset("tools", "calc", [  # a bare go-ahead makes the offline model call every tool
        {"name": "any_order", "input": "go", "expect": {"tools": {"calls": [{"name": "multiply"}, {"name": "add"}],
                                                                 "order": "any"}}},
        {"name": "strict_order", "input": "go", "expect": {"tools": {"calls": [{"name": "multiply"}, {"name": "add"}]}}},
        {"name": "exactly_one", "input": "go", "expect": {"tools": {"calls": [{"name": "add"}], "exact": True}}},
    ])
    report = await run_experiment(rt, [dataset])
    assert _scores(report, "any_order")[0][2] is True
    assert _scores(report, "strict_order")[0][2:] == (False, "add not called in order")
    assert _scores(report, "exactly_one")[0][2:] == (False, "2 calls made, 1 expected: ['add', 'multiply']")
