"""A turn reads the part of its thread a model context can hold (from the oldest message not
hidden on), on SQLite and PostgreSQL, and sees what another worker stored or showed again."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import event

from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_prompt, define_tool
from standardagents.engine.compaction import place_summaries
from standardagents.project import build_registry
from standardagents.records import Message, ThreadRecord, Usage
from standardagents.store import SQLStore
from standardagents.testing.openai_stub import OpenAIStub, StubReply
from standardagents.toolcalls import SUMMARY_PREFIX
from store_fixtures import Backend

AGENT = define_agent(name="helper", side_a={"prompt": "main"})
PROMPT = define_prompt(name="main", prompt="You help.")


class RowsRead:
    """Rows of the ``messages`` table the store fetched, counted at the database driver:
    PostgreSQL reports each SELECT's row count to SQLAlchemy's ``after_cursor_execute``; the
    SQLite store reads messages through its raw ``sqlite3`` cursor, wrapped here to count
    what each fetch returns."""

    def __init__(self, store: SQLStore) -> None:
        self.rows = 0
        if store.dialect == "sqlite":
            store._cursor = _CountingCursor(store._cursor, self)
        else:
            assert store._aengine is not None
            event.listen(store._aengine.sync_engine, "after_cursor_execute", self._after)

    def _after(self, _conn: Any, cursor: Any, statement: str, *_rest: Any) -> None:
        if _reads_messages(statement):
            self.rows += cursor.rowcount


def _reads_messages(sql: str) -> bool:
    return sql.lstrip().upper().startswith("SELECT") and "FROM messages" in sql


class _CountingCursor:
    def __init__(self, inner: Any, counter: RowsRead) -> None:
        self._inner = inner
        self._counter = counter
        self._sql = ""

    def execute(self, sql: str, params: Any = ()) -> _CountingCursor:
        self._inner.execute(sql, params)
        self._sql = sql
        return self

    def fetchall(self) -> list[Any]:
        rows = self._inner.fetchall()
        if _reads_messages(self._sql):
            self._counter.rows += len(rows)
        return rows

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture
async def open_runtime(backend: Backend) -> AsyncIterator[Callable[..., Any]]:
    """Runtimes on the backend's one database (each with a store of its own: two workers)."""
    made: list[Runtime] = []

    async def factory(*definitions: Any) -> Runtime:
        rt = await Runtime.open(build_registry(*definitions), store=backend.new_store())
        made.append(rt)
        return rt

    yield factory
    for rt in made:
        await rt.aclose()


async def _compacted_thread(rt: Runtime, folded: int, kept: int,
                            spent: Usage | None = None) -> tuple[str, list[Message]]:
    """A thread whose first ``folded`` messages a compaction hid behind a summary, then
    ``kept`` visible ones (stored as compaction leaves them: the summary last, placed
    before the first kept message). ``spent``: the usage of the second folded message (a reply)."""
    thread = await rt.create_thread("helper")
    old = [Message(thread_id=thread.id, role="user" if i % 2 == 0 else "assistant", content=f"old {i}", hidden=True)
           for i in range(folded)]
    if spent is not None:
        old[1].usage = spent
    kept_messages = [Message(thread_id=thread.id, role="user" if i % 2 == 0 else "assistant", content=f"kept {i}")
                     for i in range(kept)]
    summary = Message(thread_id=thread.id, role="user", content=f"{SUMMARY_PREFIX}\nwhat came before",
                      metadata={"summary": True, "insertBefore": kept_messages[0].id,
                                "folded": [m.id for m in old[-10:]]})
    await rt.store.commit_step(messages=[*old, *kept_messages, summary])
    return thread.id, [summary, *kept_messages]


def _sent(stub: OpenAIStub) -> list[str]:
    return [m.get("content") or "" for m in stub.requests[-1]["messages"]]


async def test_a_turn_on_a_compacted_thread_reads_only_its_context_rows(stub, open_runtime):
    stub.queue("ok")
    rt = await open_runtime(AGENT, PROMPT, stub_model(stub))
    thread_id, window = await _compacted_thread(rt, folded=2000, kept=3)
    counter = RowsRead(rt.store)
    await rt.send(thread_id, "hello")
    assert counter.rows == len(window)


async def test_the_model_gets_the_summary_the_kept_messages_and_the_new_one(stub, open_runtime):
    stub.queue("ok")
    rt = await open_runtime(AGENT, PROMPT, stub_model(stub))
    thread_id, _window = await _compacted_thread(rt, folded=50, kept=3)
    await rt.send(thread_id, "hello")
    assert _sent(stub) == ["You help.", f"{SUMMARY_PREFIX}\nwhat came before", "kept 0", "kept 1", "kept 2", "hello"]


async def test_a_message_another_worker_stored_is_in_the_next_turn(stub, open_runtime):
    stub.queue("ok")
    first = await open_runtime(AGENT, PROMPT, stub_model(stub))
    second = await open_runtime(AGENT, PROMPT, stub_model(stub))
    thread_id, _window = await _compacted_thread(first, folded=50, kept=3)
    await (await second.state(thread_id)).inject_message("from the other worker")
    await first.send(thread_id, "hello")
    assert _sent(stub)[-2:] == ["from the other worker", "hello"]


async def test_a_folded_message_another_worker_shows_again_is_in_the_next_turn(stub, open_runtime):
    stub.queue("ok")
    first = await open_runtime(AGENT, PROMPT, stub_model(stub))
    second = await open_runtime(AGENT, PROMPT, stub_model(stub))
    thread_id, _window = await _compacted_thread(first, folded=50, kept=3)
    old = await second.store.list_messages(thread_id, limit=1, offset=10)
    await second.store.update_message(old[0].id, {"hidden": False})
    await first.send(thread_id, "hello")
    assert _sent(stub) == ["You help.", "old 10", f"{SUMMARY_PREFIX}\nwhat came before", "kept 0", "kept 1",
                           "kept 2", "hello"]


async def test_a_compaction_in_the_turn_then_the_other_workers_message_reach_the_model(stub, open_runtime):
    long = "word " * 400

    def responder(body: dict[str, Any]) -> Any:
        if body["messages"][0]["content"].startswith("You compress conversations"):
            return "The user talked about words a lot."
        return "noted"

    stub.responder = responder
    prompt = define_prompt(name="main", prompt="You help.", compaction_threshold=0.5)
    first = await open_runtime(AGENT, prompt, stub_model(stub, context_window=4000))
    second = await open_runtime(AGENT, prompt, stub_model(stub, context_window=4000))
    thread = await first.create_thread("helper")
    for i in range(4):
        await first.send(thread.id, f"message {i} {long}")
    stored = await first.store.list_messages(thread.id)
    assert any(m.metadata.get("summary") for m in stored)
    await (await second.state(thread.id)).inject_message("from the other worker")
    await first.send(thread.id, "and now?")
    sent = json.dumps(stub.requests[-1]["messages"])
    assert "The user talked about words" in sent and "from the other worker" in sent and "message 0" not in sent


async def test_get_messages_still_gives_the_whole_thread_while_the_turn_holds_its_context(stub, open_runtime):
    seen: dict[str, int] = {}

    async def count(state: Any, _args: dict[str, Any]) -> str:
        seen["stored"] = len(await state.get_messages())
        seen["history"] = len(state.execution.message_history)
        return "counted"

    tool = define_tool(name="count", description="Count the messages.",
                       parameters={"type": "object", "properties": {}}, execute=count)
    stub.queue(StubReply(tool_calls=[("count", "{}")]), "done")
    prompt = define_prompt(name="main", prompt="You help.", tools=["count"])
    rt = await open_runtime(AGENT, prompt, tool, stub_model(stub))
    thread_id, window = await _compacted_thread(rt, folded=500, kept=3)
    await rt.send(thread_id, "count")
    # the user's message and the reply that called the tool joined both
    assert seen == {"stored": 500 + len(window) + 2, "history": len(window) + 2}


async def test_the_context_read_starts_at_the_oldest_message_not_hidden(store):
    thread = await _store_thread(store, [True, True, False, True, False])
    assert [m.content for m in await store.list_context_messages(thread)] == ["2", "3", "4"]


async def test_the_context_read_of_a_thread_all_hidden_is_its_newest_message(store):
    thread = await _store_thread(store, [True, True, True])
    assert [m.content for m in await store.list_context_messages(thread)] == ["2"]


async def test_the_context_read_of_an_empty_thread_is_empty(store):
    thread = await _store_thread(store, [])
    assert await store.list_context_messages(thread) == []


async def _store_thread(store: SQLStore, hidden: list[bool]) -> str:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    others = await store.create_thread(ThreadRecord(agent="helper"))  # a neighbour's rows stay out
    await store.commit_step(messages=[Message(thread_id=others.id, role="user", content="x")])
    await store.commit_step(messages=[Message(thread_id=thread.id, role="user", content=str(i), hidden=h)
                                      for i, h in enumerate(hidden)])
    return thread.id


async def test_a_thread_usage_limit_still_counts_what_the_folded_turns_spent(stub, open_runtime):
    stub.queue("never sent")
    agent = define_agent(name="helper", side_a={"prompt": "main"}, usage_limits={"thread_total_tokens": 1000})
    rt = await open_runtime(agent, PROMPT, stub_model(stub))
    thread_id, _window = await _compacted_thread(rt, folded=50, kept=3,
                                                 spent=Usage(prompt_tokens=900, completion_tokens=200))
    result = await rt.send(thread_id, "hello")
    assert (result.outcome, result.payload["limit"]) == ("usage_limit", "thread_total_tokens")
    assert stub.requests == []


# ---------------------------------------------------------------- placement, exactly as before


@st.composite
def _threads(draw: Any, on_summaries: bool = True) -> tuple[list[Message], int]:
    """Stored messages (hidden or not, some of them summaries anchored on an earlier message
    or on a deleted one; on an earlier summary too when ``on_summaries``) and where a window
    starts."""
    n = draw(st.integers(1, 14))
    out: list[Message] = []
    for i in range(n):
        metadata: dict[str, Any] = {}
        targets = [f"m{k}" for k in range(i) if on_summaries or not out[k].metadata]
        if draw(st.booleans()):
            metadata = {"summary": True, "insertBefore": draw(st.sampled_from([*targets, "gone"]))}
        out.append(Message(thread_id="t", role="user", id=f"m{i}", hidden=draw(st.booleans()), metadata=metadata,
                           seq=i + 1))
    return out, draw(st.integers(0, n - 1))


def _placed_in_window(whole: list[Message], start: int) -> list[Message]:
    """What a turn places, knowing the window and its summaries' anchors before it."""
    window = whole[start:]
    earlier = {m.id: m.seq for m in whole[:start] if m.seq is not None}
    wanted = [m.metadata["insertBefore"] for m in window if m.metadata.get("summary")]
    return place_summaries(window, {a: earlier[a] for a in wanted if a in earlier})


@given(_threads(on_summaries=False))
def test_summaries_in_a_window_are_placed_as_over_the_whole_thread(case: tuple[list[Message], int]):
    whole, start = case
    inside = {m.id for m in whole[start:]}
    expected = [m.id for m in place_summaries(whole) if m.id in inside]
    assert [m.id for m in _placed_in_window(whole, start)] == expected


@given(_threads())
def test_placing_summaries_keeps_every_message_once(case: tuple[list[Message], int]):
    whole, start = case
    assert sorted(m.id for m in place_summaries(whole)) == sorted(m.id for m in whole)
    assert sorted(m.id for m in _placed_in_window(whole, start)) == sorted(m.id for m in whole[start:])


def test_a_summary_of_a_summary_goes_before_it():
    kept = Message(thread_id="t", role="user", id="kept")
    first = Message(thread_id="t", role="user", id="first", metadata={"summary": True, "insertBefore": "kept"})
    second = Message(thread_id="t", role="user", id="second", metadata={"summary": True, "insertBefore": "first"})
    assert [m.id for m in place_summaries([kept, first, second])] == ["second", "first", "kept"]
