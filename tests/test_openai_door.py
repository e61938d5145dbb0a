"""The OpenAI door with the official ``openai`` SDK (sync, async, streamed) against a served
app whose agent's model is the OpenAI stub: the request's messages as the thread's history,
usage summed over the turn, errors in OpenAI's shape, sampling parameters passed on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from server_fixtures import LiveServer, serve_app, write_project
from standardagents.testing import OpenAIStub, StubReply

_MORE_AGENTS = {
    "agents/agents/more.py": """
        from standardagents import define_agent
        guarded = define_agent(name="guarded", type="ai_human", input_guardrails=["no_secrets"],
                               side_a={"prompt": "plain_prompt", "stop_on_response": True})
        careful = define_agent(name="careful", type="ai_human",
                               side_a={"prompt": "careful_prompt", "stop_on_response": True})
        offline = define_agent(name="offline", type="ai_human",
                               side_a={"prompt": "down_prompt", "stop_on_response": True})
        strict = define_agent(name="strict", type="ai_human", busy="reject",
                              side_a={"prompt": "plain_prompt", "stop_on_response": True})
        boss = define_agent(name="boss", type="ai_human",
                            side_a={"prompt": "boss_prompt", "stop_on_response": True})
        scout = define_agent(name="scout", type="dual_ai", primary=False, expose_as_tool=True,
                             tool_description="Look around and report.",
                             max_session_turns=2,
                             side_a={"prompt": "plain_prompt",
                                     "session_stop": {"name": "deliver", "message_property": "summary"}},
                             side_b={"prompt": "plain_prompt"})
    """,
    "agents/models/down.py": """
        from standardagents import define_model
        down = define_model(name="down", provider="openai", model="m", base_url="http://127.0.0.1:9/v1",
                            max_retries=0)
    """,
    "agents/prompts/more.py": """
        from standardagents import define_prompt
        careful_prompt = define_prompt(name="careful_prompt", prompt="You are careful.", tools=["wipe"])
        down_prompt = define_prompt(name="down_prompt", prompt="x", model="down")
        boss_prompt = define_prompt(name="boss_prompt", prompt="You delegate.", tools=["scout"])
    """,
    "agents/tools/more.py": """
        from standardagents import define_tool

        @define_tool(guardrail=True)
        def no_secrets(text: str) -> dict:
            '''Trip on anything that looks like a secret.'''
            found = "password" in text.lower()
            return {"tripwire": found, "info": {"reason": "secret-looking text"} if found else None}

        @define_tool(needs_approval=True)
        def wipe() -> str:
            '''Wipe everything.'''
            return "wiped"
    """,
}


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as s:
        yield s


@pytest.fixture
def door(stub: OpenAIStub, tmp_path: Path) -> Iterator[LiveServer]:
    project = write_project(tmp_path / "project", {"agents/models/default.py": f"""
        from standardagents import define_model
        default = define_model(name="default", provider="openai", model="stub-model",
                               base_url="{stub.base_url}", max_retries=0)
    """, **_MORE_AGENTS})
    yield from serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'door.db'}")


def _async(server: LiveServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key=server.token, max_retries=0)


def _sync(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key=server.token, max_retries=0)


def _stored(server: LiveServer, thread_id: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=server.base_url, headers=server.headers) as c:
        messages: list[dict[str, Any]] = c.get(f"/api/threads/{thread_id}/messages").json()["messages"]
    return messages


def _sent_messages(stub: OpenAIStub, index: int = -1) -> list[dict[str, Any]]:
    """The messages the agent's model received (its own system prompt left out)."""
    return [m for m in stub.requests[index]["messages"] if m.get("content") != "You add numbers."]


async def test_the_request_history_becomes_the_new_threads_history(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue("Your name is Ada.")
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_x", "type": "function", "function": {"name": "add", "arguments": '{"a":1}'}}]},
        {"role": "tool", "tool_call_id": "call_x", "content": "3"},
        {"role": "assistant", "content": "Nice to meet you."},
        {"role": "user", "content": [{"type": "text", "text": "What is my name?"}]},
    ]
    async with _async(door) as client:
        raw = await client.chat.completions.with_raw_response.create(model="helper", messages=history)  # type: ignore[arg-type]
    assert raw.parse().choices[0].message.content == "Your name is Ada."
    sent = _sent_messages(stub)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["content"] == "My name is Ada."
    assert sent[2]["tool_calls"][0]["id"] == "call_x"
    assert sent[3] == {"role": "tool", "tool_call_id": "call_x", "content": "3"}
    assert sent[-1]["content"] == "What is my name?"
    stored = _stored(door, raw.headers["x-thread-id"])
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant", "user", "assistant"]
    assert stored[-1]["content"] == "Your name is Ada."


async def test_a_named_thread_stores_only_the_messages_it_does_not_hold(door: LiveServer, stub: OpenAIStub) -> None:
    # the first turn runs one of the agent's own tools: the client never sees that traffic
    stub.queue(StubReply(tool_calls=[("add", '{"a":2,"b":3}')]), "It is 5.", "Still Ada.")
    async with _async(door) as client:
        first = await client.chat.completions.with_raw_response.create(
            model="helper", messages=[{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": "I am Ada. Add 2 and 3."}])
        thread_id = first.headers["x-thread-id"]
        answer = first.parse().choices[0].message.content
        assert answer == "It is 5."
        await client.chat.completions.create(
            model="helper", extra_headers={"X-Thread-Id": thread_id},
            messages=[{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": "I am Ada. Add 2 and 3."},
                      {"role": "assistant", "content": answer},
                      {"role": "user", "content": "Who am I?"}])
    stored = _stored(door, thread_id)
    assert [(m["role"], m["content"]) for m in stored if m["role"] in ("system", "user")] == [
        ("system", "Be brief."), ("user", "I am Ada. Add 2 and 3."), ("user", "Who am I?")]
    assert [m["content"] for m in stored if m["role"] == "assistant" and m["content"]] == ["It is 5.", "Still Ada."]
    roles = [m["role"] for m in _sent_messages(stub)]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]


async def test_new_messages_of_a_named_thread_are_appended_in_order(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue("first", "second")
    async with _async(door) as client:
        first = await client.chat.completions.with_raw_response.create(
            model="helper", messages=[{"role": "user", "content": "one"}])
        thread_id = first.headers["x-thread-id"]
        await client.chat.completions.create(
            model="helper", extra_body={"thread": thread_id},
            messages=[{"role": "user", "content": "one"}, {"role": "assistant", "content": "first"},
                      {"role": "user", "content": "an aside"}, {"role": "assistant", "content": "noted elsewhere"},
                      {"role": "user", "content": "two"}])
    stored = _stored(door, thread_id)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "one"), ("assistant", "first"), ("user", "an aside"), ("assistant", "noted elsewhere"),
        ("user", "two"), ("assistant", "second")]


async def test_a_history_ending_with_an_assistant_message_is_422(door: LiveServer) -> None:
    async with _async(door) as client:
        with pytest.raises(openai.UnprocessableEntityError, match="end with a user message"):
            await client.chat.completions.create(model="helper", messages=[
                {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])


def test_a_bad_tool_call_in_the_history_is_400_and_creates_no_thread(door: LiveServer) -> None:
    with _sync(door) as client:
        with pytest.raises(openai.BadRequestError, match=r"messages\[0\]\.tool_calls\[0\]"):
            client.chat.completions.create(model="helper", messages=[  # type: ignore[call-overload]
                {"role": "assistant", "content": None, "tool_calls": [{"id": 5}]},
                {"role": "user", "content": "hi"}])
    with httpx.Client(base_url=door.base_url, headers=door.headers) as c:
        assert c.get("/api/threads").json()["threads"] == []


_STEP_USAGE = [{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
               {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27}]


def test_usage_sums_every_model_call_of_the_turn(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("add", "{}")], usage=_STEP_USAGE[0]), StubReply(text="3", usage=_STEP_USAGE[1]))
    with _sync(door) as client:
        completion = client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "add"}])
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens, completion.usage.total_tokens) == (30, 12, 42)


def test_what_subagents_spent_is_apart_from_the_turns_usage(door: LiveServer, stub: OpenAIStub) -> None:
    def used(prompt: int, completion: int) -> dict[str, int]:
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    stub.queue(StubReply(tool_calls=[("scout", '{"message": "look"}')], usage=used(10, 2)),
               StubReply(tool_calls=[("deliver", '{"summary": "found it"}')], usage=used(100, 20)),
               StubReply(text="The scout found it.", usage=used(11, 3)))
    with _sync(door) as client:
        completion = client.chat.completions.create(model="boss", messages=[{"role": "user", "content": "go"}])
    assert completion.choices[0].message.content == "The scout found it."
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (21, 5)
    assert (completion.usage.model_extra or {})["subagents"] == used(100, 20)
    stub.queue(StubReply(tool_calls=[("scout", '{"message": "look"}')], usage=used(10, 2)),
               StubReply(tool_calls=[("deliver", '{"summary": "found it"}')], usage=used(100, 20)),
               StubReply(text="Found again.", usage=used(11, 3)))
    with _sync(door) as client:
        response = client.responses.create(model="boss", input="go")
    assert response.output_text == "Found again." and response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (21, 5)
    apart = (response.usage.model_extra or {})["subagents"]
    assert (apart["input_tokens"], apart["output_tokens"], apart["total_tokens"]) == (100, 20, 120)


async def test_a_stream_ends_with_the_turns_usage_when_asked(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("add", "{}")], usage=_STEP_USAGE[0]), StubReply(text="three", usage=_STEP_USAGE[1]))
    async with _async(door) as client:
        stream = await client.chat.completions.create(
            model="helper", messages=[{"role": "user", "content": "add"}], stream=True,
            stream_options={"include_usage": True})
        chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "three"
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None and (last.usage.prompt_tokens, last.usage.completion_tokens) == (30, 12)
    assert all(c.usage is None for c in chunks[:-1])


# errors and parameters -----------------------------------------------------------------------

_HI = [{"role": "user", "content": "hi"}]


def test_the_models_429_is_a_429_with_retry_after(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue(StubReply(error_status=429, retry_after=7))
    with _sync(door) as client, pytest.raises(openai.RateLimitError, match="429") as caught:
        client.chat.completions.create(model="helper", messages=_HI)  # type: ignore[arg-type]
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.code == "rate_limit_exceeded"


@pytest.mark.parametrize(("model_status", "door_status"), [(503, 503), (500, 502)])
def test_a_failing_model_is_a_5xx_naming_the_failure(door: LiveServer, stub: OpenAIStub,
                                                     model_status: int, door_status: int) -> None:
    stub.queue(StubReply(error_status=model_status))
    with _sync(door) as client, pytest.raises(openai.InternalServerError, match=f"HTTP {model_status}") as caught:
        client.chat.completions.create(model="helper", messages=_HI)  # type: ignore[arg-type]
    assert caught.value.status_code == door_status


async def test_an_unreachable_model_is_a_502_streamed_or_not(door: LiveServer) -> None:
    async with _async(door) as client:
        with pytest.raises(openai.InternalServerError, match="connection") as caught:
            await client.chat.completions.create(model="offline", messages=_HI)  # type: ignore[arg-type]
        assert caught.value.status_code == 502
        with pytest.raises(openai.InternalServerError, match="connection") as streamed:
            await client.chat.completions.create(model="offline", messages=_HI, stream=True)  # type: ignore[arg-type]
        assert streamed.value.status_code == 502


async def test_a_stream_failing_midway_ends_with_an_error_object(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue(StubReply(text="a long answer that breaks off", chunk_size=3, drop_after_chunks=4))
    pieces: list[str] = []
    finishes: list[str] = []
    async with _async(door) as client:
        stream = await client.chat.completions.create(model="helper", messages=_HI, stream=True)  # type: ignore[arg-type]
        with pytest.raises(openai.APIError, match="model failed"):
            async for chunk in stream:
                pieces.append(chunk.choices[0].delta.content or "")
                if chunk.choices[0].finish_reason:
                    finishes.append(chunk.choices[0].finish_reason)
    assert "".join(pieces)
    assert finishes == []


def test_a_tripped_guardrail_is_a_400_with_its_reason(door: LiveServer) -> None:
    with _sync(door) as client, pytest.raises(openai.BadRequestError, match=r"no_secrets.*secret-looking") as caught:
        client.chat.completions.create(model="guarded", messages=[{"role": "user", "content": "my password is x"}])
    assert caught.value.code == "guardrail_tripped"


def test_a_text_part_whose_text_is_not_a_string_is_a_400_on_both_endpoints(door: LiveServer) -> None:
    with _sync(door) as client:
        with pytest.raises(openai.BadRequestError, match="text must be a string"):
            client.chat.completions.create(model="helper", messages=[  # type: ignore[list-item]
                {"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "output_text", "text": 5}]},
                {"role": "user", "content": "again"}])
        with pytest.raises(openai.BadRequestError, match="'text' must be a string"):
            client.responses.create(model="helper", input=[  # type: ignore[list-item, typeddict-item]
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": 5}]}])


async def test_a_second_message_to_a_busy_thread_that_rejects_is_a_409_in_openais_shape(
        door: LiveServer, stub: OpenAIStub) -> None:
    # the model stalls mid-reply: the first turn is still running when the second message comes
    stub.queue(StubReply(text="a slow answer " * 40, chunk_size=4, stall_after_chunks=2, stall_seconds=10))
    async with _async(door) as client:
        first = await client.chat.completions.with_raw_response.create(
            model="strict", messages=_HI, stream=True)  # type: ignore[arg-type]
        thread = first.headers["x-thread-id"]
        stream = first.parse()
        async for _chunk in stream:  # the turn is running once its first chunk arrived
            break
        with pytest.raises(openai.ConflictError) as caught:
            await client.chat.completions.create(model="strict", messages=[{"role": "user", "content": "and?"}],
                                                 extra_body={"thread": thread})
        await stream.close()
    assert caught.value.code == "thread_busy"
    body = caught.value.body
    assert isinstance(body, dict) and "busy" in str(body.get("message"))
    assert body.get("type") == "invalid_request_error" and "param" in body  # OpenAI's error object


def test_a_call_waiting_for_approval_is_a_409_saying_so(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue(StubReply(tool_calls=[("wipe", "{}")]))
    with _sync(door) as client, pytest.raises(openai.ConflictError, match="approv") as caught:
        client.chat.completions.create(model="careful", messages=[{"role": "user", "content": "wipe it"}])
    assert caught.value.code == "approval_required"


@pytest.mark.parametrize(("extra", "says"), [({"n": 2}, "n must be 1"), ({"logprobs": True}, "logprobs"),
                                             ({"temperature": 3}, "temperature"), ({"stop": [1]}, "stop")])
def test_what_the_door_cannot_honour_is_a_400_saying_so(door: LiveServer, stub: OpenAIStub,
                                                        extra: dict[str, Any], says: str) -> None:
    with _sync(door) as client, pytest.raises(openai.BadRequestError, match=says):
        client.chat.completions.create(model="helper", messages=_HI, extra_body=extra)  # type: ignore[arg-type]
    assert stub.requests == []


async def test_sampling_parameters_reach_the_agents_model(door: LiveServer, stub: OpenAIStub) -> None:
    async with _async(door) as client:
        await client.chat.completions.create(model="helper", messages=_HI, temperature=0.3, top_p=0.9,  # type: ignore[arg-type]
                                             max_completion_tokens=50, stop=["END"], seed=7)
        stream = await client.chat.completions.create(model="helper", messages=_HI, max_tokens=20,  # type: ignore[arg-type]
                                                      stop="STOP", stream=True)
        assert [c async for c in stream]
    first, second = stub.requests
    assert {k: first.get(k) for k in ("temperature", "top_p", "max_tokens", "stop", "seed")} == {
        "temperature": 0.3, "top_p": 0.9, "max_tokens": 50, "stop": ["END"], "seed": 7}
    assert (second["max_tokens"], second["stop"]) == (20, ["STOP"])


# the Responses API -------------------------------------------------------------------------

async def test_responses_continue_a_thread_by_previous_response_id(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue(StubReply(text="Hello Ada.", usage=_STEP_USAGE[0]), "You are Ada.")
    async with _async(door) as client:
        first = await client.responses.create(model="helper", instructions="Be brief.", input="My name is Ada.")
        assert first.output_text == "Hello Ada."
        assert first.usage is not None and (first.usage.input_tokens, first.usage.output_tokens) == (10, 5)
        second = await client.responses.create(model="helper", previous_response_id=first.id,
                                               instructions="Be brief.", input="What is my name?")
        assert second.output_text == "You are Ada."
        again = await client.responses.retrieve(first.id)
    assert again.output_text == "Hello Ada."
    sent = _sent_messages(stub)
    assert [(m["role"], m["content"]) for m in sent] == [
        ("system", "Be brief."), ("user", "My name is Ada."), ("assistant", "Hello Ada."), ("user", "What is my name?")]


async def test_responses_refuse_to_change_the_history_of_a_thread_running_a_turn(
        door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue("Hello.")
    stub.queue(StubReply(text="a slow answer " * 40, chunk_size=4, stall_after_chunks=2, stall_seconds=10))
    async with _async(door) as client:
        first = await client.responses.create(model="helper", input="Hi.")
        stream = await client.responses.create(model="helper", previous_response_id=first.id, input="Go on.",
                                               stream=True)
        async for _event in stream:  # the second turn is running once its first event arrived
            break
        with pytest.raises(openai.ConflictError, match="running a turn"):
            await client.responses.create(model="helper", previous_response_id=first.id, input=[
                {"role": "user", "content": "An aside."}, {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "And?"}])
        await stream.close()
    async with httpx.AsyncClient(base_url=door.base_url, headers=door.headers) as c:
        thread = (await c.get("/api/threads")).json()["threads"][0]["id"]
        contents = [m["content"] for m in (await c.get(f"/api/threads/{thread}/messages")).json()["messages"]]
    assert "An aside." not in contents and "Noted." not in contents


def test_response_input_items_become_the_history(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue("It was 3.")
    with _sync(door) as client:
        response = client.responses.create(model="helper", store=False, input=[
            {"role": "user", "content": "Add 1 and 2."},
            {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": '{"a":1,"b":2}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "3"},
            {"role": "user", "content": [{"type": "input_text", "text": "What was it?"}]}])
        assert response.output_text == "It was 3."
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(response.id)
    sent = _sent_messages(stub)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[1]["tool_calls"][0]["id"] == "call_1" and sent[2]["content"] == "3"


async def test_a_streamed_response_sends_the_responses_events(door: LiveServer, stub: OpenAIStub) -> None:
    stub.queue(StubReply(text="streamed answer", chunk_size=4))
    async with _async(door) as client:
        stream = await client.responses.create(model="helper", input="hi", stream=True)
        events = [event async for event in stream]
    types = [e.type for e in events]
    assert types[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert types[-1] == "response.completed"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]  # type: ignore[union-attr]
    assert len(deltas) > 1 and "".join(deltas) == "streamed answer"
    assert events[-1].response.output_text == "streamed answer"  # type: ignore[union-attr]


async def test_a_response_whose_model_is_down_fails(door: LiveServer) -> None:
    async with _async(door) as client:
        with pytest.raises(openai.InternalServerError, match="connection"):
            await client.responses.create(model="offline", input="hi")
        stream = await client.responses.create(model="offline", input="hi", stream=True)
        events = [event async for event in stream]
    assert events[-1].type == "response.failed"
    assert "connection" in (events[-1].response.error.message if events[-1].response.error else "")  # type: ignore[union-attr]
