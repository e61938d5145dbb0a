"""The OpenAI wire stub speaks the protocol the official SDK expects."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from standardagents.testing import OpenAIStub, StubReply


@pytest.fixture(scope="module")
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


@pytest.fixture(autouse=True)
def fresh(stub: OpenAIStub) -> None:
    stub.reset()
    stub.responder = None


def sse_payloads(text: str) -> list[Any]:
    lines = [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]
    return [line if line == "[DONE]" else json.loads(line) for line in lines]


def post(stub: OpenAIStub, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{stub.base_url}/chat/completions", json=body, timeout=5)


BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_base_url_is_loopback_v1(stub: OpenAIStub) -> None:
    assert stub.base_url.startswith("http://127.0.0.1:")
    assert stub.base_url.endswith("/v1")


def test_empty_queue_answers_ok(stub: OpenAIStub) -> None:
    data = post(stub, BODY).json()
    assert data["object"] == "chat.completion"
    assert data["choices"][0]["message"]["content"] == "ok"


def test_requests_are_recorded_in_order(stub: OpenAIStub) -> None:
    post(stub, {**BODY, "model": "first"})
    post(stub, {**BODY, "model": "second"})
    assert [r["model"] for r in stub.wait_requests(2, timeout=5)] == ["first", "second"]


def test_queued_replies_come_before_the_responder(stub: OpenAIStub) -> None:
    stub.responder = lambda body: StubReply(text="from responder")
    stub.queue("queued")
    texts = [post(stub, BODY).json()["choices"][0]["message"]["content"] for _ in range(2)]
    assert texts == ["queued", "from responder"]


def test_stream_follows_openai_chunk_order(stub: OpenAIStub) -> None:
    stub.queue(StubReply(text="abcdef", chunk_size=2))
    payloads = sse_payloads(post(stub, {**BODY, "stream": True,
                                        "stream_options": {"include_usage": True}}).text)
    assert payloads[-1] == "[DONE]"
    chunks = payloads[:-1]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:4]] == ["ab", "cd", "ef"]
    assert chunks[4]["choices"][0]["finish_reason"] == "stop"
    assert chunks[5]["choices"] == [] and chunks[5]["usage"]["total_tokens"] > 0


def test_stream_without_include_usage_sends_no_usage_chunk(stub: OpenAIStub) -> None:
    payloads = sse_payloads(post(stub, {**BODY, "stream": True}).text)
    assert all(p == "[DONE]" or p["choices"] for p in payloads)


def test_stream_splits_tool_arguments_across_several_chunks(stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("add", '{"a": 1, "b": 2}')], chunk_size=100))
    chunks = sse_payloads(post(stub, {**BODY, "stream": True}).text)[:-1]
    parts = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls", [])]
    assert parts[0]["id"] and parts[0]["function"]["name"] == "add"
    argument_parts = [p["function"]["arguments"] for p in parts[1:]]
    assert len(argument_parts) >= 3
    assert all("id" not in p for p in parts[1:])
    assert "".join(argument_parts) == '{"a": 1, "b": 2}'


def test_error_status_returns_openai_error_body(stub: OpenAIStub) -> None:
    stub.queue(StubReply(error_status=503))
    response = post(stub, BODY)
    assert response.status_code == 503
    assert "message" in response.json()["error"]


def test_models_endpoint_lists_models() -> None:
    with OpenAIStub(models=["alpha", "beta"]) as server:
        data = httpx.get(f"{server.base_url}/models", timeout=5).json()
    assert [m["id"] for m in data["data"]] == ["alpha", "beta"]


def test_official_sdk_parses_streamed_tool_calls(stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("add", '{"a": 1}'), ("sub", '{"b": 2}')]))
    client = openai.OpenAI(base_url=stub.base_url, api_key="k")
    try:
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                stream=True)
        arguments: dict[int, str] = {}
        for chunk in stream:
            for choice in chunk.choices:
                for call in choice.delta.tool_calls or []:
                    arguments[call.index] = arguments.get(call.index, "") + (call.function.arguments or "")  # type: ignore[union-attr]
    finally:
        client.close()
    assert arguments == {0: '{"a": 1}', 1: '{"b": 2}'}


async def test_async_context_manager_serves(stub: OpenAIStub) -> None:
    async with OpenAIStub(lambda body: "async reply") as server:
        async with httpx.AsyncClient() as client:
            response = await client.post(f"{server.base_url}/chat/completions", json=BODY)
        await server.wait_requests_async(1)
    assert response.json()["choices"][0]["message"]["content"] == "async reply"


def test_standalone_process_serves_tool_rounds() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "standardagents.testing.openai_stub", "--port", "0",
         "--tool-rounds", "2", "--max-seconds", "30"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY ")
        base_url = line.split()[1]
        tools = [{"type": "function", "function": {"name": "add", "parameters": {
            "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]}}}]
        messages: list[dict[str, Any]] = [{"role": "user", "content": "add"}]
        kinds = []
        for _ in range(3):
            data = httpx.post(f"{base_url}/chat/completions", timeout=5,
                              json={"model": "m", "messages": messages, "tools": tools}).json()
            message = data["choices"][0]["message"]
            kinds.append("tool" if message.get("tool_calls") else "text")
            messages.append(message)
            for call in message.get("tool_calls") or []:
                assert set(json.loads(call["function"]["arguments"])) == {"a", "b"}
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": "3"})
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    assert kinds == ["tool", "tool", "text"]
