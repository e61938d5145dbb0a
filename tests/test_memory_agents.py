"""Agents that remember: memory tools, automatic recall across a user's threads (never into
another user's), its token budget, the working-memory document and what the step records
show. The model is the OpenAI wire stub; what it was sent is read from ``stub.requests``."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import memory_fixtures
from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_prompt
from standardagents.engine.steps import load_execution
from standardagents.memory.agents import (
    MEMORY_HEADER,
    WORKING_HEADER,
    memory_filter,
    memory_for,
    remove_memory_filter,
)
from standardagents.project import build_registry
from standardagents.store import SQLStore, open_store
from standardagents.testing.openai_stub import OpenAIStub, StubReply

memory_db = memory_fixtures.memory_db
pgvector_url = memory_fixtures.pgvector_url


def _definitions(stub: OpenAIStub, **memory: Any) -> list[Any]:
    return [
        stub_model(stub, stream=False),
        define_prompt(name="helper_prompt", prompt="You are a helpful assistant.", model="default"),
        define_agent(name="helper", side_a={"prompt": "helper_prompt", "stop_on_response": True},
                     memory=memory),
    ]


async def _runtime(stub: OpenAIStub, store: Any, **memory: Any) -> Runtime:
    return await Runtime.open(build_registry(*_definitions(stub, **memory)), store=store)


def _memory_messages(request: dict[str, Any], header: str = MEMORY_HEADER) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "system" and m["content"].startswith(header)]


def _save(text: str) -> StubReply:
    return StubReply(tool_calls=[("memory_save", json.dumps({"content": text}))])


async def test_a_fact_from_one_thread_is_recalled_in_the_users_next_thread_only(stub: OpenAIStub, memory_db: SQLStore) -> None:
    rt = await _runtime(stub, memory_db)
    try:
        stub.queue(_save("The user's dog is called Rex"), "Noted.", "Your dog is Rex.", "I do not know.")
        await rt.run("helper", "Remember that my dog is called Rex", user_id="u1")
        await rt.run("helper", "What is my dog called?", user_id="u1")
        recalled = _memory_messages(stub.requests[2])
        assert recalled == [f"{MEMORY_HEADER}\n- The user's dog is called Rex"]
        await rt.run("helper", "What is my dog called?", user_id="u2")
        assert _memory_messages(stub.requests[3]) == []
    finally:
        await rt.aclose()


async def test_the_step_records_show_what_was_saved_and_what_was_recalled(stub: OpenAIStub, tmp_path: Any) -> None:
    rt = await _runtime(stub, open_store(f"sqlite:///{tmp_path / 'rt.db'}"))
    try:
        stub.queue(_save("The user works as a dentist"), "Noted.", "A dentist.")
        first = await rt.run("helper", "Remember I work as a dentist", user_id="u1")
        steps = (await load_execution(rt.store, await rt.store.get_execution(first.execution_id)))["steps"]
        call = steps[0]["toolCalls"][0]
        assert (call["name"], json.loads(call["arguments"]), call["status"]) == (
            "memory_save", {"content": "The user works as a dentist"}, "success")
        item = (await (await memory_for(rt)).search(("user", "u1")))[0]
        assert item.value == {"text": "The user works as a dentist"}
        assert item.written_by == {"threadId": first.thread_id, "executionId": first.execution_id,
                                   "tool": "memory_save", "userId": "u1"}
        second = await rt.run("helper", "What is my job as a dentist?", user_id="u1")
        steps = (await load_execution(rt.store, await rt.store.get_execution(second.execution_id)))["steps"]
        recall = steps[0]["memory"]["recall"]
        assert [(r["key"], r["namespace"]) for r in recall["recalled"]] == [(item.key, ["user", "u1", "memories"])]
        assert recall["query"] == "What is my job as a dentist?"
    finally:
        await rt.aclose()


async def test_recall_stays_within_its_token_budget(stub: OpenAIStub, tmp_path: Any) -> None:
    rt = await _runtime(stub, open_store(f"sqlite:///{tmp_path / 'rt.db'}"), recall_budget=60, min_score=0.0)
    try:
        memory = await memory_for(rt)
        for i in range(6):
            await memory.put(("user", "u1", "memories"), f"k{i}", {"text": f"Fact {i} about the garden: " + "roses " * 8})
        stub.queue("ok")
        result = await rt.run("helper", "Tell me about my garden roses", user_id="u1")
        steps = (await load_execution(rt.store, await rt.store.get_execution(result.execution_id)))["steps"]
        recall = steps[0]["memory"]["recall"]
        assert 0 < recall["tokens"] <= 60
        assert len(recall["recalled"]) == 1  # the header (24) and one fact (19) fit; a second would not
        assert {s["reason"] for s in recall["skipped"]} == {"over the budget of 60 tokens"}
        assert len(_memory_messages(stub.requests[0])[0].splitlines()) == 2
    finally:
        await rt.aclose()


async def test_the_working_memory_document_is_rewritten_by_the_tool_and_read_next_turn(stub: OpenAIStub, tmp_path: Any) -> None:
    rt = await _runtime(stub, open_store(f"sqlite:///{tmp_path / 'rt.db'}"), working_memory=True, recall=False)
    try:
        stub.queue(StubReply(tool_calls=[("memory_update_working", json.dumps({"document": "Name: Ada\nLikes: tea"}))]),
                   "Updated.", "Hello Ada.")
        first = await rt.run("helper", "I am Ada and I like tea", user_id="u1")
        assert _memory_messages(stub.requests[0], WORKING_HEADER) == [f"{WORKING_HEADER}\n(empty)"]
        await rt.run("helper", "Hi again", user_id="u1")
        assert _memory_messages(stub.requests[2], WORKING_HEADER) == [f"{WORKING_HEADER}\nName: Ada\nLikes: tea"]
        assert first.thread_id
    finally:
        await rt.aclose()


async def test_a_secret_is_not_saved_and_the_model_is_told(stub: OpenAIStub, tmp_path: Any) -> None:
    rt = await _runtime(stub, open_store(f"sqlite:///{tmp_path / 'rt.db'}"))
    try:
        stub.queue(_save("The user's password is hunter2"), "I will not keep that.")
        await rt.run("helper", "Remember my password is hunter2", user_id="u1")
        tool_message = next(m for m in stub.requests[1]["messages"] if m["role"] == "tool")
        assert tool_message["content"].startswith("Not saved: it looks like a secret")
        assert await (await memory_for(rt)).search(("user", "u1")) == []
    finally:
        await rt.aclose()


def test_the_memory_option_accepts_camel_case_and_names_a_bad_field() -> None:
    agent = define_agent(name="a", side_a={"prompt": "p"}, memory={"recallBudget": 50, "workingMemory": True})
    assert agent.memory is not None and (agent.memory.recall_budget, agent.memory.working_memory) == (50, True)
    with pytest.raises(Exception, match="recal_budget"):
        define_agent(name="a", side_a={"prompt": "p"}, memory={"recal_budget": 50})


async def test_a_registered_memory_filter_changes_what_an_agent_saves(stub: OpenAIStub, tmp_path: Any) -> None:
    @memory_filter
    def no_emails(namespace: Any, key: str, value: dict[str, Any]) -> dict[str, Any]:
        return {**value, "text": re.sub(r"\S+@\S+", "[email]", value["text"])}

    rt = await _runtime(stub, open_store(f"sqlite:///{tmp_path / 'rt.db'}"))
    try:
        stub.queue(_save("The user's email is ada@example.com"), "Noted.")
        await rt.run("helper", "Remember my email is ada@example.com", user_id="u1")
        items = await (await memory_for(rt)).search(("user", "u1"))
        assert [i.value for i in items] == [{"text": "The user's email is [email]"}]
    finally:
        remove_memory_filter(no_emails)
        await rt.aclose()
