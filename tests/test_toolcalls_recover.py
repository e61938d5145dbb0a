"""recover_tool_calls: calls typed into a reply as text."""

from __future__ import annotations

import json

import pytest

from standardagents.toolcalls import RecoveredCall, recover_tool_calls

TOOLS = ["get_weather", "search"]


def test_hermes_tool_call_tag() -> None:
    text = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    calls, rest = recover_tool_calls(text, TOOLS)
    assert calls == [RecoveredCall("get_weather", {"city": "Oslo"}, calls[0].raw)]
    assert calls[0].raw.startswith("<tool_call>") and calls[0].raw.endswith("</tool_call>")
    assert rest == "Let me check."


def test_several_tool_call_tags_keep_their_order() -> None:
    text = (
        '<tool_call>{"name": "search", "arguments": {"q": "a"}}</tool_call>\n'
        '<tool_call>{"name": "get_weather", "arguments": {"city": "b"}}</tool_call>'
    )
    calls, rest = recover_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in calls] == [
        ("search", {"q": "a"}),
        ("get_weather", {"city": "b"}),
    ]
    assert rest == ""


def test_fenced_json_with_arguments() -> None:
    text = 'I will search.\n```json\n{"name": "search", "arguments": {"q": "cats"}}\n```\nDone.'
    calls, rest = recover_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in calls] == [("search", {"q": "cats"})]
    assert rest == "I will search.\n\nDone."


def test_fenced_json_with_parameters_key() -> None:
    text = '```json\n{"name": "search", "parameters": {"q": "dogs"}}\n```'
    calls, _ = recover_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in calls] == [("search", {"q": "dogs"})]


def test_llama_function_tag() -> None:
    text = 'Checking <function=get_weather>{"city": "Rome"}</function> now'
    calls, rest = recover_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", {"city": "Rome"})]
    assert rest == "Checking now"


def test_mistral_tool_calls_list() -> None:
    text = '[TOOL_CALLS][{"name": "search", "arguments": {"q": "x"}}, {"name": "get_weather", "arguments": {"city": "y"}}]'
    calls, rest = recover_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in calls] == [
        ("search", {"q": "x"}),
        ("get_weather", {"city": "y"}),
    ]
    assert rest == ""


def test_mistral_args_form() -> None:
    text = 'Sure [TOOL_CALLS]search[ARGS]{"q": "z"}'
    calls, rest = recover_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in calls] == [("search", {"q": "z"})]
    assert rest == "Sure"


def test_llama_python_tag_with_end_token() -> None:
    text = '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Lima"}}<|eom_id|>'
    calls, rest = recover_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", {"city": "Lima"})]
    assert rest == ""


def test_python_tag_with_semicolon_separated_calls() -> None:
    text = '<|python_tag|>{"name": "search", "parameters": {"q": 1}}; {"name": "search", "parameters": {"q": 2}}'
    calls, _ = recover_tool_calls(text, TOOLS)
    assert [c.arguments for c in calls] == [{"q": 1}, {"q": 2}]


def test_arguments_sent_as_json_string_are_decoded() -> None:
    args = json.dumps({"q": "s"})
    text = f'<tool_call>{{"name": "search", "arguments": {json.dumps(args)}}}</tool_call>'
    calls, _ = recover_tool_calls(text, TOOLS)
    assert calls[0].arguments == {"q": "s"}


def test_almost_json_call_is_repaired() -> None:
    text = "<tool_call>{'name': 'search', 'arguments': {'q': 'x',}}</tool_call>"
    calls, _ = recover_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in calls] == [("search", {"q": "x"})]


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "delete_all", "arguments": {}}</tool_call>',
        '```json\n{"name": "delete_all", "arguments": {}}\n```',
        '<function=delete_all>{"x": 1}</function>',
        '[TOOL_CALLS][{"name": "delete_all", "arguments": {}}]',
        '<|python_tag|>{"name": "delete_all", "parameters": {}}',
    ],
)
def test_unknown_tool_names_stay_in_the_text(text: str) -> None:
    calls, rest = recover_tool_calls(text, TOOLS)
    assert calls == []
    assert rest == text


def test_plain_json_example_in_prose_is_not_a_call() -> None:
    text = 'The config looks like:\n```json\n{"city": "Oslo"}\n```'
    calls, rest = recover_tool_calls(text, TOOLS)
    assert calls == []
    assert rest == text


def test_text_without_calls_is_returned_unchanged() -> None:
    text = "  Just an answer.\n\n\n\nWith spacing.  "
    assert recover_tool_calls(text, TOOLS) == ([], text)


def test_blank_runs_left_by_removal_are_collapsed() -> None:
    text = 'A\n\n<tool_call>{"name": "search", "arguments": {}}</tool_call>\n\n\nB'
    _, rest = recover_tool_calls(text, TOOLS)
    assert rest == "A\n\nB"


def test_fence_inside_a_tool_call_tag_is_one_call() -> None:
    text = 'A\n<tool_call>\n```json\n{"name": "search", "arguments": {"q": 1}}\n```\n</tool_call>'
    calls, rest = recover_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in calls] == [("search", {"q": 1})]
    assert rest == "A"


def test_unclosed_tag_at_the_end_still_yields_the_call() -> None:
    calls, rest = recover_tool_calls(
        'ok <tool_call>{"name": "search", "arguments": {"q": 1}}', TOOLS
    )
    assert [(c.name, c.arguments) for c in calls] == [("search", {"q": 1})]
    assert rest == "ok"


def test_cut_off_call_is_left_in_the_text() -> None:
    text = '<tool_call>{"name": "search", "arguments": {"q": "cut'
    assert recover_tool_calls(text, TOOLS) == ([], text)
