"""Usage limits: each limit ends the turn with outcome usage_limit, keeping what was done."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from engine_helpers import stub_model
from standardagents import UsageLimits, define_agent, define_prompt, define_tool
from standardagents.exceptions import DefinitionError
from standardagents.testing.openai_stub import StubReply

USAGE = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}


@define_tool
def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"facts about {topic}"


async def plain(make_runtime: Any, stub: Any, side: dict[str, Any] | None = None, **agent_fields: Any) -> Any:
    """An agent without tools (its first request is estimated at 12 tokens)."""
    return await make_runtime(define_agent(name="plain", side_a={"prompt": "bare", **(side or {})}, **agent_fields),
                              define_prompt(name="bare", prompt="You help."), stub_model(stub))


def call(n: int = 1, usage: dict[str, int] | None = None) -> StubReply:
    return StubReply(tool_calls=[("lookup", json.dumps({"topic": f"t{i}"})) for i in range(n)], usage=usage or USAGE)


async def runtime(make_runtime: Any, stub: Any, **agent_fields: Any) -> Any:
    return await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}, **agent_fields),
                              define_prompt(name="main", prompt="You help.", tools=["lookup"]), lookup, stub_model(stub))


async def test_the_request_limit_stops_before_the_next_request_keeping_the_work(stub, make_runtime):
    stub.queue(call(), call(), "done")
    rt = await runtime(make_runtime, stub)
    sub = rt.subscribe()
    result = await rt.run("helper", "go", usage_limits={"requests": 2})
    assert (result.stop_reason, result.outcome) == ("interrupted", "usage_limit")
    assert result.payload is not None and (result.payload["limit"], result.payload["max"]) == ("requests", 2)
    assert "limit of 2 model requests per turn" in (result.error or "")
    assert len(stub.requests) == 2
    stored = await rt.store.list_messages(result.thread_id)
    assert [m.role for m in stored if not m.hidden] == ["user", "assistant", "tool", "assistant", "tool"]
    events = []
    while not sub.queue.empty():
        events.append(sub.queue.get_nowait())
    assert [e.data["limit"] for e in events if e.type == "usage_limit"] == ["requests"]
    assert [e.data["outcome"] for e in events if e.type == "done"] == ["usage_limit"]


async def test_the_input_token_limit_is_checked_with_the_estimate_before_the_first_request(stub, make_runtime):
    rt = await runtime(make_runtime, stub)
    result = await rt.run("helper", "tell me everything about the tides " * 20, usage_limits={"input_tokens": 50})
    assert result.outcome == "usage_limit" and result.payload["limit"] == "input_tokens"
    assert result.payload["used"] > 50 and stub.requests == []
    assert "would reach" in (result.error or "")


async def test_the_output_token_limit_stops_the_tools_of_the_reply_that_passed_it(stub, make_runtime):
    stub.queue(call(usage={"prompt_tokens": 10, "completion_tokens": 50, "total_tokens": 60}))
    rt = await runtime(make_runtime, stub)
    result = await rt.run("helper", "go", usage_limits=UsageLimits(output_tokens=40))
    assert result.outcome == "usage_limit"
    assert (result.payload["limit"], result.payload["used"]) == ("output_tokens", 50)
    stored = [m for m in await rt.store.list_messages(result.thread_id) if not m.hidden]
    assert [m.role for m in stored] == ["user", "assistant", "tool"]
    assert stored[2].tool_status == "error" and "output tokens per turn" in (stored[2].content or "")
    assert len(stub.requests) == 1


async def test_the_total_token_limit_counts_the_estimate_of_the_next_request(stub, make_runtime):
    stub.queue(StubReply(text="a", usage=USAGE), "b")
    rt = await plain(make_runtime, stub, {"stop_on_response": False, "max_steps": 3})
    result = await rt.run("plain", "one", usage_limits={"totalTokens": 35})
    assert result.outcome == "usage_limit" and result.payload["limit"] == "total_tokens"
    assert len(stub.requests) == 1


async def test_the_tool_call_limit_stops_before_running_too_many_calls(stub, make_runtime):
    stub.queue(call(1), call(2), "done")
    rt = await runtime(make_runtime, stub)
    result = await rt.run("helper", "go", usage_limits={"tool_calls": 2})
    assert result.outcome == "usage_limit"
    assert (result.payload["limit"], result.payload["used"], result.payload["max"]) == ("tool_calls", 3, 2)
    rows = await rt.store.list_tool_results(result.thread_id)
    assert [r["status"] for r in rows if r["tool_name"] == "lookup"][:1] == ["success"]
    assert len(stub.requests) == 2


@pytest.mark.parametrize(("limit", "value"), [("thread_total_tokens", 40), ("thread_input_tokens", 25),
                                              ("thread_output_tokens", 20)])
async def test_thread_limits_count_the_earlier_turns(stub, make_runtime, limit, value):
    stub.queue(StubReply(text="first", usage=USAGE), StubReply(text="second", usage=USAGE))
    rt = await plain(make_runtime, stub, usage_limits={limit: value})
    first = await rt.run("plain", "one")
    assert first.outcome == "response"
    second = await rt.send(first.thread_id, "two")
    assert second.outcome == "usage_limit" and second.payload["limit"] == limit
    assert len(stub.requests) == 1


async def test_a_call_limit_overrides_the_agent_limit(stub, make_runtime):
    stub.queue(call(), "done")
    rt = await runtime(make_runtime, stub, usage_limits={"requests": 1, "tool_calls": 5})
    result = await rt.run("helper", "go", usage_limits={"requests": 3})
    assert result.outcome == "response" and len(stub.requests) == 2


def test_bad_limits_name_their_field():
    with pytest.raises(DefinitionError, match="requests"):
        define_agent(name="a", side_a={"prompt": "p"}, usage_limits={"requests": 0})
    with pytest.raises(DefinitionError, match="tokens_per_turn"):
        define_agent(name="a", side_a={"prompt": "p"}, usage_limits={"tokens_per_turn": 3})


async def test_rest_refuses_bad_limits_with_422(client: httpx.AsyncClient, actors: Any):
    headers = actors.auth("alice")
    tid = (await client.post("/api/threads", json={"agent": "helper"}, headers=headers)).json()["id"]
    r = await client.post(f"/api/threads/{tid}/messages?wait=true", json={"content": "x", "usageLimits": {"requests": -1}},
                          headers=headers)
    assert r.status_code == 422 and "usageLimits" in r.json()["error"]["message"]
    ok = await client.post(f"/api/threads/{tid}/messages?wait=true", json={"content": "1+2", "usageLimits": {"requests": 1}},
                           headers=headers)
    assert ok.status_code == 200 and ok.json()["outcome"] == "usage_limit"


def test_the_request_estimate_follows_every_change_of_the_message_list():
    """A step's estimate reuses the last one's per message; whatever the list became (grown,
    a message replaced, folded shorter, reordered), it equals a fresh count."""
    from standardagents.engine.limits import UsageMeter
    from standardagents.providers.base import ModelRequest
    from standardagents.toolcalls import estimate_tokens

    meter = UsageMeter(UsageLimits(input_tokens=10**9), [])
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    history = [{"role": "user", "content": "tell me about the tides " * 5}]
    lists = []
    for i in range(4):
        history = [*history, {"role": "assistant", "content": f"reply {i} " * (i + 3)}]
        lists.append([{"role": "system", "content": "You help."}, *history])
    lists.append([lists[-1][0], {"role": "user", "content": "summary"}, *lists[-1][-2:]])  # folded shorter
    lists.append([*lists[-1][:2], {"role": "assistant", "content": "replaced " * 40}, lists[-1][-1]])
    lists.append(list(reversed(lists[-1])))
    lists.append(lists[2])  # an earlier, longer list again
    for messages in lists:
        expected = estimate_tokens(messages) + estimate_tokens(json.dumps(tools, separators=(",", ":")))
        assert meter._estimate(ModelRequest(model="m", messages=messages, tools=tools)) == expected
