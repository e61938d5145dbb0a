"""End to end against a real uvicorn server on 127.0.0.1: the official ``openai`` client
through the OpenAI-compatible door (streamed and not), and an SSE client on the API."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from httpx_sse import aconnect_sse


def _client(server: Any, key: str | None = None) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key=key or server.token, max_retries=0)


async def test_models_are_the_primary_agents(live_server: Any) -> None:
    async with _client(live_server) as client:
        models = await client.models.list()
    assert [m.id for m in models.data] == ["helper"]


async def test_chat_completion_runs_the_agent_on_a_new_thread(live_server: Any) -> None:
    async with _client(live_server) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="helper", messages=[{"role": "user", "content": "add 1 and 2"}])
        completion = raw.parse()
    thread_id = raw.headers["x-thread-id"]
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].message.content
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model_extra is not None and completion.model_extra["thread"] == thread_id
    async with httpx.AsyncClient(base_url=live_server.base_url, headers=live_server.headers) as c:
        messages = (await c.get(f"/api/threads/{thread_id}/messages")).json()["messages"]
    assert messages[0]["content"] == "add 1 and 2"
    assert messages[-1]["content"] == completion.choices[0].message.content


async def test_streamed_chat_completion_delivers_the_reply_in_chunks(live_server: Any) -> None:
    async with _client(live_server) as client:
        stream = await client.chat.completions.create(
            model="helper", messages=[{"role": "user", "content": "add"}], stream=True)
        pieces, finishes = [], []
        async for chunk in stream:
            delta = chunk.choices[0].delta
            if delta.content:
                pieces.append(delta.content)
            if chunk.choices[0].finish_reason:
                finishes.append(chunk.choices[0].finish_reason)
    assert len(pieces) > 1
    assert "".join(pieces)
    assert finishes == ["stop"]


async def test_chat_completion_continues_the_thread_named_in_the_body(live_server: Any) -> None:
    async with _client(live_server) as client:
        first = await client.chat.completions.with_raw_response.create(
            model="helper", messages=[{"role": "user", "content": "one"}])
        thread_id = first.headers["x-thread-id"]
        second = await client.chat.completions.with_raw_response.create(
            model="helper", messages=[{"role": "user", "content": "two"}], extra_body={"thread": thread_id})
        third = await client.chat.completions.with_raw_response.create(
            model="helper", messages=[{"role": "user", "content": "three"}], extra_headers={"X-Thread-Id": thread_id})
    assert second.headers["x-thread-id"] == thread_id
    assert third.headers["x-thread-id"] == thread_id
    async with httpx.AsyncClient(base_url=live_server.base_url, headers=live_server.headers) as c:
        messages = (await c.get(f"/api/threads/{thread_id}/messages")).json()["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == ["one", "two", "three"]


async def test_chat_completion_with_an_invalid_key_is_401(live_server: Any) -> None:
    async with _client(live_server, key="sat_wrong") as client:
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "hi"}])


async def test_chat_completion_with_an_unknown_model_is_404(live_server: Any) -> None:
    async with _client(live_server) as client:
        with pytest.raises(openai.NotFoundError):
            await client.chat.completions.create(model="nobody", messages=[{"role": "user", "content": "hi"}])


async def test_chat_completion_without_user_message_is_422(live_server: Any) -> None:
    async with _client(live_server) as client:
        with pytest.raises(openai.UnprocessableEntityError):
            await client.chat.completions.create(model="helper", messages=[{"role": "system", "content": "x"}])


async def test_sse_message_stream_over_the_network(live_server: Any) -> None:
    async with httpx.AsyncClient(base_url=live_server.base_url, headers=live_server.headers, timeout=20) as c:
        tid = (await c.post("/api/threads", json={"agent": "helper"})).json()["id"]
        async with aconnect_sse(c, "POST", f"/api/threads/{tid}/messages", params={"stream": "true"},
                                json={"content": "add"}) as source:
            events = [json.loads(sse.data) async for sse in source.aiter_sse()]
    types = [e["type"] for e in events]
    assert types[-1] == "done"
    assert "tool_call_done" in types
    assert "".join(e["data"]["delta"] for e in events if e["type"] == "message_chunk")
