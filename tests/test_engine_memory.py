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
        assert rt._locks == {}
    # a message queued behind another on the same thread shares its lock, which then goes too
    thread = await rt.create_thread("helper")
    first, second = await rt.start(thread.id, "one"), await rt.start(thread.id, "two")
    await asyncio.gather(first, second)
    assert rt._locks == {}
    assert len(await rt.store.list_messages(thread.id)) == 4


def test_the_cache_evicts_its_oldest_entries_first():
    from standardagents.records import Message

    cache = LLMCache(max_entries=3)
    messages = [Message(thread_id="t", role="user", content=f"m{i}") for i in range(5)]
    assert [m["content"] for m in cache.convert(messages, None, False)] == ["m0", "m1", "m2", "m3", "m4"]
    assert len(cache) == 3
    assert [key[0] for key in cache._cache] == [m.id for m in messages[2:]]
