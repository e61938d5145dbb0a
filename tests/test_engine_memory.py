"""A long-lived runtime keeps no per-thread state after the threads' turns end: the message
conversion cache is bounded and no lock is kept per thread ever run."""

from __future__ import annotations

import asyncio

from standardagents import define_agent, define_model, define_prompt
from standardagents.engine.context import LLMCache


async def test_the_conversion_cache_and_the_thread_locks_stay_bounded(make_runtime):
    agent = define_agent(name="helper", side_a={"prompt": "main", "stop_on_response": True})
    rt = await make_runtime(agent, define_prompt(name="main", prompt="You help."),
                            define_model(name="default", provider="test", model="offline"))
    rt.llm_cache = LLMCache(max_entries=40)
    for round_ in range(3):
        threads = [await rt.create_thread("helper") for _ in range(20)]
        results = await asyncio.gather(*(rt.send(t.id, f"hello {round_}") for t in threads))
        assert all(r.stop_reason == "complete" for r in results)
        assert len(rt.llm_cache) <= 40
        assert rt.inflight.locks == {}
    # a message queued behind another on the same thread shares its lock, which then goes too
    thread = await rt.create_thread("helper")
    first, second = await rt.start(thread.id, "one"), await rt.start(thread.id, "two")
    await asyncio.gather(first, second)
    assert rt.inflight.locks == {}
    assert len(await rt.store.list_messages(thread.id)) == 4


def test_the_cache_keeps_what_is_in_use_and_drops_the_oldest():
    from standardagents.records import Message

    cache = LLMCache(max_entries=4)
    messages = [Message(thread_id="t", role="user", content=f"m{i}") for i in range(6)]
    first = cache.convert(messages, None, False)
    assert [m["content"] for m in first] == [f"m{i}" for i in range(6)]
    assert len(cache) <= 4
    recent = cache.convert(messages[-2:], None, False)
    assert [a is b for a, b in zip(first[-2:], recent, strict=True)] == [True, True]  # kept
    oldest = cache.convert(messages[:1], None, False)
    assert oldest == first[:1] and oldest[0] is not first[0]  # dropped, converted anew
    assert len(cache) <= 4
