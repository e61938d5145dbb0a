"""Two `serve` workers on PostgreSQL take turns on a compacted thread: each turn reads the
thread's context from the database (the summary, what it kept, what the other worker added
since), never the folded messages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from standardagents.records import Message
from standardagents.store import open_store
from standardagents.testing.openai_stub import OpenAIStub
from standardagents.toolcalls import SUMMARY_PREFIX
from store_fixtures import own_postgres_database
from test_server_workers import _admin_token, _stubbed_model, _two_workers, _write_files

PROJECT = {
    "agents/agents/talker.py": (
        "from standardagents import define_agent\n"
        "talker = define_agent(name='talker', side_a={'prompt': 'talker_prompt'})\n"),
    "agents/prompts/talker_prompt.py": (
        "from standardagents import define_prompt\n"
        "talker_prompt = define_prompt(name='talker_prompt', prompt='You talk.', model='stubbed',"
        " compaction_threshold=0.8)\n"),
}


@pytest.fixture
async def database() -> AsyncIterator[str]:
    async for url in own_postgres_database("sa_history"):
        yield url


async def _fold(database: str, thread_id: str) -> None:
    """The thread as a compaction leaves it: 300 messages hidden, two kept, the summary last."""
    store = open_store(database)
    await store.open()
    try:
        folded = [Message(thread_id=thread_id, role="user" if i % 2 == 0 else "assistant", content=f"old {i}",
                          hidden=True) for i in range(300)]
        kept = [Message(thread_id=thread_id, role="user", content="kept question"),
                Message(thread_id=thread_id, role="assistant", content="kept answer")]
        summary = Message(thread_id=thread_id, role="user", content=f"{SUMMARY_PREFIX}\nearlier",
                          metadata={"summary": True, "insertBefore": kept[0].id})
        await store.commit_step(messages=[*folded, *kept, summary])
    finally:
        await store.close()


async def test_each_worker_reads_the_context_the_other_left(stub: OpenAIStub, database: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    base = stub.base_url
    _write_files(project, {**PROJECT, "agents/models/stubbed.py": _stubbed_model(base)["agents/models/stubbed.py"]
                           .replace("max_retries=0)", "max_retries=0, context_window=100000)")})
    stub.queue("first answer", "second answer")
    token = await _admin_token(database)
    async with _two_workers(project, database, token) as workers:
        one, two = await workers.discover()
        thread = (await workers.request(one, "POST", "/api/threads", json={"agent": "talker"})).json()["id"]
        await _fold(database, thread)
        first = await workers.request(one, "POST", f"/api/threads/{thread}/messages?wait=true",
                                      json={"content": "first question"})
        assert first.status_code == 200, first.text
        second = await workers.request(two, "POST", f"/api/threads/{thread}/messages?wait=true",
                                       json={"content": "second question"})
        assert second.status_code == 200, second.text
    sent = [[m.get("content") for m in r["messages"]] for r in stub.requests]
    assert sent == [
        ["You talk.", f"{SUMMARY_PREFIX}\nearlier", "kept question", "kept answer", "first question"],
        ["You talk.", f"{SUMMARY_PREFIX}\nearlier", "kept question", "kept answer", "first question",
         "first answer", "second question"],
    ]
