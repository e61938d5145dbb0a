"""ask, ask_json and parse_json against a canned model provider."""

from __future__ import annotations

from typing import Any

import pytest

from standardagents.exceptions import ProviderError
from standardagents.providers.base import ModelProvider, ModelRequest, ModelResponse
from standardagents.toolcalls import ask, ask_json, parse_json


class CannedProvider(ModelProvider):
    """Answers each request with the next canned text and keeps the requests it saw."""

    name = "canned"

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return ModelResponse(text=self.answers.pop(0), finish_reason="stop")


async def test_ask_sends_system_and_prompt_and_returns_text() -> None:
    provider = CannedProvider("  A title  ")
    answer = await ask(provider, "m1", "Name this", system="Be brief", max_tokens=20)
    assert answer == "A title"
    sent = provider.requests[0]
    assert sent.model == "m1" and sent.max_tokens == 20
    assert sent.messages == [
        {"role": "system", "content": "Be brief"},
        {"role": "user", "content": "Name this"},
    ]


async def test_ask_drops_reasoning() -> None:
    provider = CannedProvider("<think>hmm</think>\nParis")
    assert await ask(provider, "m", "Capital of France?") == "Paris"


async def test_ask_json_reads_a_fenced_answer_in_prose() -> None:
    provider = CannedProvider(
        'Sure! Here it is:\n```json\n{"title": "Trip", "tags": ["a"]}\n```\nEnjoy.'
    )
    assert await ask_json(provider, "m", "q") == {"title": "Trip", "tags": ["a"]}


async def test_ask_json_shows_the_schema_and_coerces_to_it() -> None:
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    provider = CannedProvider('{"score": "7"}')
    assert await ask_json(provider, "m", "rate it", schema=schema) == {"score": 7}
    assert '"score"' in provider.requests[0].messages[0]["content"]


async def test_ask_json_asks_again_after_a_bad_answer() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    provider = CannedProvider('{"nope": 1}', '{"ok": true}')
    assert await ask_json(provider, "m", "q", schema=schema) == {"ok": True}
    retry = provider.requests[1].messages
    assert retry[-2] == {"role": "assistant", "content": '{"nope": 1}'}
    assert "schema" in retry[-1]["content"]


async def test_ask_json_gives_up_with_a_provider_error() -> None:
    provider = CannedProvider("no idea", "still no idea")
    with pytest.raises(ProviderError) as info:
        await ask_json(provider, "m", "q", attempts=2)
    assert info.value.code == "bad_answer"
    assert len(provider.requests) == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("[1, 2]", [1, 2]),
        ('```\n["x"]\n```', ["x"]),
        ('The list: ["a", "b"] as asked.', ["a", "b"]),
        ("<think>{\"wrong\": 1}</think>{'right': 2,}", {"right": 2}),
        ('Result: {"a": [1, 2,]} ok', {"a": [1, 2]}),
    ],
)
def test_parse_json(text: str, expected: Any) -> None:
    assert parse_json(text) == expected


def test_parse_json_without_json_raises() -> None:
    with pytest.raises(ValueError):
        parse_json("plain words")
