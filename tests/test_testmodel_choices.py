"""The offline test model chooses as a sensible model would: the tools a message is about, with
arguments drawn from the message, then an answer in words from the results; a message about
nothing its tools do gets a plain answer. Through the provider and through the quickstart's
assistant on a real runtime."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from standardagents import Runtime
from standardagents.providers import ModelRequest, TestModelProvider
from standardagents.records import ToolCall

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        parameters["required"] = required
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


CALCULATE = _fn("calculate", "Evaluate an arithmetic expression exactly.",
                {"expression": {"type": "string", "description": 'An arithmetic expression such as "17 * (3 + 4)".'}},
                ["expression"])
CLOCK = _fn("current_time", "The current date and time.",
            {"timezone_name": {"type": "string", "default": "UTC", "description": "The timezone."}})
RESEARCHER = _fn("researcher", "Research a question in depth and return a summary with a notes file attached.",
                 {"message": {"type": "string"}}, ["message"])
ADD = _fn("add", "Add two integers.", {"a": {"type": "integer", "maximum": 100}, "b": {"type": "integer"}}, ["a", "b"])
TOOLS = [CALCULATE, CLOCK, RESEARCHER]


async def _calls(text: str, tools: list[dict[str, Any]] = TOOLS) -> list[tuple[str, dict[str, Any]]]:
    reply = await TestModelProvider().request(ModelRequest(model="t", messages=[{"role": "user", "content": text}],
                                                           tools=tools))
    return [(c.name, json.loads(c.arguments)) for c in reply.tool_calls]


async def test_arithmetic_calls_only_the_calculator_with_the_expression() -> None:
    assert await _calls("What is 12 * 7?") == [("calculate", {"expression": "12 * 7"})]


async def test_operator_words_become_the_expression() -> None:
    assert await _calls("What is 17 times (3 plus 4)?") == [("calculate", {"expression": "17 * (3 + 4)"})]


async def test_a_question_about_the_time_calls_only_the_clock_with_the_timezone_it_names() -> None:
    assert await _calls("What time is it in Europe/Paris?") == [("current_time", {"timezone_name": "Europe/Paris"})]


async def test_a_parameter_with_a_default_keeps_it_when_the_message_gives_nothing_for_it() -> None:
    assert await _calls("What is the date today?") == [("current_time", {"timezone_name": "UTC"})]


async def test_a_request_for_research_calls_the_researcher_with_the_message() -> None:
    text = "Research why tabs beat spaces"
    assert await _calls(text) == [("researcher", {"message": text})]


async def test_a_message_about_several_tools_calls_each_of_them() -> None:
    named = [name for name, _ in await _calls("What is 6 * 7, and what time is it?")]
    assert named == ["calculate", "current_time"]


async def test_a_message_about_nothing_the_tools_do_gets_a_plain_answer() -> None:
    reply = await TestModelProvider().request(ModelRequest(
        model="t", messages=[{"role": "system", "content": "You help."}, {"role": "user", "content": "Hello there"}],
        tools=TOOLS))
    assert (reply.tool_calls, reply.text) == ([], "Test reply to: Hello there (as instructed: You help.)")


async def test_a_bare_go_ahead_calls_every_tool() -> None:
    assert [name for name, _ in await _calls("go on, again please")] == ["calculate", "current_time", "researcher"]


async def test_numbers_in_the_message_fill_number_parameters_within_their_bounds() -> None:
    assert await _calls("add 2 and 40", [ADD]) == [("add", {"a": 2, "b": 40})]
    # 500 is above a's maximum: the next number fits a, and b gets the schema's value
    assert await _calls("add 500 and 7", [ADD]) == [("add", {"a": 7, "b": 1})]


def _after(call: ToolCall, result: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [call.to_dict()]},
            {"role": "tool", "tool_call_id": call.id, "content": result}]


async def _answer(call: ToolCall, result: str) -> str:
    reply = await TestModelProvider().request(ModelRequest(model="t", messages=_after(call, result), tools=TOOLS))
    assert reply.tool_calls == []
    return reply.text


async def test_the_answer_reads_an_arithmetic_result() -> None:
    assert await _answer(ToolCall("c1", "calculate", '{"expression": "12 * 7"}'), "12 * 7 = 84") == "12 * 7 = 84"
    assert await _answer(ToolCall("c1", "calculate", '{"expression": "6 * 7"}'), "42") == "6 * 7 = 42"


async def test_the_answer_gives_a_subagents_message_and_the_files_it_attached() -> None:
    result = json.dumps({"message": "Research complete.", "attachments": [{"name": "notes.md", "path": "x/notes.md"}]})
    assert await _answer(ToolCall("c1", "researcher", '{"message": "q"}'), result) == \
        "Research complete. (attached: notes.md)"


async def test_the_answer_lists_other_results_by_tool() -> None:
    assert await _answer(ToolCall("c1", "current_time", "{}"), "Monday 09:00 UTC") == \
        "Tool results: current_time -> Monday 09:00 UTC"


@pytest.fixture
async def quickstart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Runtime]:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "STANDARDAGENTS_MODEL"):
        monkeypatch.delenv(var, raising=False)
    rt = await Runtime.open(QUICKSTART, database_url=f"sqlite:///{tmp_path / 'qs.db'}")
    yield rt
    await rt.aclose()


async def test_the_quickstarts_first_question_is_answered_with_one_calculator_call(quickstart: Runtime) -> None:
    result = await quickstart.run("assistant", "What is 12 * 7?")
    assert (result.stop_reason, result.text) == ("complete", "12 * 7 = 84")
    calls = [(c.name, c.arguments) for m in await quickstart.store.list_messages(result.thread_id)
             for c in m.tool_calls or ()]
    assert calls == [("calculate", '{"expression": "12 * 7"}')]


async def test_the_quickstarts_greeting_is_answered_without_a_tool(quickstart: Runtime) -> None:
    result = await quickstart.run("assistant", "Hello!")
    roles = [m.role for m in await quickstart.store.list_messages(result.thread_id)]
    assert (roles, result.text.startswith("Test reply to: Hello!")) == (["user", "assistant"], True)
