"""The SQL store on real SQLite and PostgreSQL databases: every method, atomic steps,
ordering, filtering, files, env scopes, tokens, effects, subagents and cascading deletes."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from standardagents.exceptions import ExecutionTakenOver, NotFoundError, StoreError
from standardagents.records import (
    ExecutionRecord,
    Fence,
    LogRecord,
    Message,
    ThreadRecord,
    ToolCall,
    Usage,
)
from standardagents.store import (
    DATABASE_URL_ENV,
    SQLStore,
    Store,
    SubagentRecord,
    open_store,
    resolve_url,
)
from standardagents.store.schema import metadata as schema_metadata

if TYPE_CHECKING:
    from store_fixtures import Backend


# ---------------------------------------------------------------- helpers


async def _thread(store: SQLStore, **kw: object) -> ThreadRecord:
    return await store.create_thread(ThreadRecord(agent=str(kw.pop("agent", "helper")), **kw))  # type: ignore[arg-type]


def _msg(thread_id: str, content: str, **kw: object) -> Message:
    return Message(thread_id=thread_id, role=kw.pop("role", "user"), content=content, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- opening and migrations


async def test_sql_store_satisfies_store_protocol(store: SQLStore) -> None:
    assert isinstance(store, Store)


async def test_opening_twice_keeps_schema_and_data(backend: Backend) -> None:
    first = backend.new_store()
    await first.open()
    thread = await _thread(first)
    await first.close()
    second = backend.new_store()
    await second.open()
    await second.open()
    try:
        assert await second.get_thread(thread.id) == thread
    finally:
        await second.close()
    from alembic.script import ScriptDirectory

    from standardagents.store.migrate import alembic_config

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert await backend.fetch("SELECT version_num FROM alembic_version") == [(head,)]


def _schema_drift(backend: Backend) -> list[object]:
    if backend.name == "sqlite":
        engine = create_engine(backend.url)
    else:
        url = backend.url.replace("postgresql://", "postgresql+psycopg://", 1)
        engine = create_engine(url, connect_args={"options": f"-csearch_path={backend.schema}"})
    try:
        with engine.connect() as conn:
            return list(compare_metadata(MigrationContext.configure(conn), schema_metadata))
    finally:
        engine.dispose()


async def test_migrations_create_exactly_the_declared_schema(store: SQLStore, backend: Backend) -> None:
    assert await asyncio.to_thread(_schema_drift, backend) == []


async def test_concurrent_opens_of_fresh_database_all_succeed(backend: Backend) -> None:
    stores = [backend.new_store() for _ in range(3)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        thread = await _thread(stores[0])
        assert await stores[2].get_thread(thread.id) == thread
    finally:
        for s in stores:
            await s.close()


async def test_first_call_opens_store_lazily(backend: Backend) -> None:
    s = backend.new_store()
    try:
        thread = await _thread(s)
        assert (await s.get_thread(thread.id)) == thread
    finally:
        await s.close()


async def test_postgres_url_forms_map_to_async_driver() -> None:
    for url in ("postgres://u@h/db", "postgresql://u@h/db", "postgresql+psycopg://u@h/db"):
        assert SQLStore(url).dialect == "postgresql"


async def test_unsupported_url_is_rejected_with_store_error() -> None:
    with pytest.raises(StoreError, match="unsupported database URL"):
        SQLStore("mysql://u@h/db")


async def test_unreachable_postgres_raises_store_error() -> None:
    s = SQLStore("postgresql://postgres@127.0.0.1:1/none")
    with pytest.raises(StoreError, match="cannot open PostgreSQL database"):
        await s.open()


async def test_open_store_prefers_explicit_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATABASE_URL_ENV, "sqlite:///elsewhere.db")
    assert open_store(f"sqlite:///{tmp_path}/a.db", project_dir=tmp_path).url == f"sqlite:///{tmp_path}/a.db"


async def test_open_store_uses_env_url_without_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATABASE_URL_ENV, f"sqlite:///{tmp_path}/env.db")
    assert open_store(None, project_dir=tmp_path).url == f"sqlite:///{tmp_path}/env.db"


async def test_open_store_defaults_to_project_sqlite_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    s = open_store(None, project_dir=tmp_path)
    await s.open()
    try:
        await _thread(s)
    finally:
        await s.close()
    assert (tmp_path / ".standardagents" / "standardagents.db").is_file()
    assert resolve_url(None, project_dir=tmp_path) == s.url


# ---------------------------------------------------------------- threads


async def test_thread_round_trips(store: SQLStore) -> None:
    thread = await store.create_thread(ThreadRecord(
        agent="support", user_id="u1", title="Hello", parent_id="p1", package="pkg",
        metadata={"tags": ["a"]}))
    assert await store.get_thread(thread.id) == thread


async def test_unknown_thread_is_none(store: SQLStore) -> None:
    assert await store.get_thread("thr_missing") is None


async def test_list_threads_filters_by_agent_user_and_parent(store: SQLStore) -> None:
    a = await _thread(store, agent="a", user_id="u1")
    await _thread(store, agent="b", user_id="u1")
    c = await _thread(store, agent="a", user_id="u2", parent_id=a.id)
    assert {t.id for t in await store.list_threads(agent="a")} == {a.id, c.id}
    assert [t.id for t in await store.list_threads(agent="a", user_id="u2")] == [c.id]
    assert [t.id for t in await store.list_threads(parent_id=a.id)] == [c.id]


async def test_list_threads_paginates_newest_first(store: SQLStore) -> None:
    made = [await store.create_thread(ThreadRecord(agent="a", created_at=1000 + i)) for i in range(5)]
    newest_first = [t.id for t in reversed(made)]
    assert [t.id for t in await store.list_threads(limit=2)] == newest_first[:2]
    assert [t.id for t in await store.list_threads(limit=2, offset=2)] == newest_first[2:4]


async def test_update_thread_changes_fields(store: SQLStore) -> None:
    thread = await _thread(store)
    updated = await store.update_thread(thread.id, title="New", metadata={"k": 1})
    assert (updated.title, updated.metadata) == ("New", {"k": 1})
    assert await store.get_thread(thread.id) == updated


async def test_update_unknown_thread_raises_not_found(store: SQLStore) -> None:
    with pytest.raises(NotFoundError):
        await store.update_thread("thr_missing", title="x")


async def test_update_thread_rejects_unknown_field(store: SQLStore) -> None:
    thread = await _thread(store)
    with pytest.raises(StoreError, match="colour"):
        await store.update_thread(thread.id, colour="red")


# ---------------------------------------------------------------- messages


async def test_message_round_trips_every_field(store: SQLStore) -> None:
    thread = await _thread(store)
    message = Message(
        thread_id=thread.id, role="assistant", content="hi", parts=[{"type": "text", "text": "hi"}],
        tool_calls=[ToolCall("c1", "lookup", '{"q": 1}')], tool_call_id=None, name="bot", side="b",
        silent=True, hidden=True, attachments=[{"path": "/f.png"}], usage=Usage(1, 2, 3, 4, 5),
        reasoning="thinking", status="partial", tool_status="error", metadata={"m": [1, 2]},
        updated_at=123,
    )
    stored = await store.add_message(message)
    assert await store.get_message(message.id) == stored


async def test_add_message_assigns_increasing_seq(store: SQLStore) -> None:
    thread = await _thread(store)
    first = await store.add_message(_msg(thread.id, "one"))
    second = await store.add_message(_msg(thread.id, "two"))
    assert first.seq is not None and second.seq is not None and second.seq > first.seq


async def test_get_unknown_message_raises_not_found(store: SQLStore) -> None:
    with pytest.raises(NotFoundError):
        await store.get_message("msg_missing")


async def test_update_message_changes_fields_and_stamps_time(store: SQLStore) -> None:
    thread = await _thread(store)
    message = await store.add_message(_msg(thread.id, "draft", role="assistant"))
    updated = await store.update_message(message.id, {
        "content": "final", "status": "complete", "tool_calls": [ToolCall("c9", "f")],
        "usage": Usage(3, 4, 7)})
    assert (updated.content, updated.tool_calls, updated.usage) == ("final", [ToolCall("c9", "f")], Usage(3, 4, 7))
    assert updated.updated_at is not None
    assert await store.get_message(message.id) == updated


async def test_update_unknown_message_raises_not_found(store: SQLStore) -> None:
    with pytest.raises(NotFoundError):
        await store.update_message("msg_missing", {"content": "x"})


async def test_list_messages_orders_by_seq(store: SQLStore) -> None:
    thread = await _thread(store)
    # created_at deliberately runs backwards: order comes from seq, not time
    ids = [(await store.add_message(_msg(thread.id, str(i), created_at=10_000 - i))).id for i in range(5)]
    assert [m.id for m in await store.list_messages(thread.id)] == ids
    assert [m.id for m in await store.list_messages(thread.id, newest_first=True)] == ids[::-1]


async def test_list_messages_excludes_silent_on_request(store: SQLStore) -> None:
    thread = await _thread(store)
    loud = await store.add_message(_msg(thread.id, "loud"))
    await store.add_message(_msg(thread.id, "quiet", silent=True))
    assert [m.id for m in await store.list_messages(thread.id, include_silent=False)] == [loud.id]
    assert len(await store.list_messages(thread.id)) == 2


async def test_list_messages_excludes_hidden_on_request(store: SQLStore) -> None:
    thread = await _thread(store)
    seen = await store.add_message(_msg(thread.id, "seen"))
    await store.add_message(_msg(thread.id, "compacted", hidden=True))
    assert [m.id for m in await store.list_messages(thread.id, include_hidden=False)] == [seen.id]


async def test_list_messages_paginates(store: SQLStore) -> None:
    thread = await _thread(store)
    ids = [(await store.add_message(_msg(thread.id, str(i)))).id for i in range(7)]
    assert [m.id for m in await store.list_messages(thread.id, limit=3)] == ids[:3]
    assert [m.id for m in await store.list_messages(thread.id, limit=3, offset=3)] == ids[3:6]
    assert [m.id for m in await store.list_messages(thread.id, offset=5)] == ids[5:]
    assert [m.id for m in await store.list_messages(thread.id, limit=2, newest_first=True)] == ids[:-3:-1]


async def test_list_messages_only_returns_own_thread(store: SQLStore) -> None:
    a, b = await _thread(store), await _thread(store)
    mine = await store.add_message(_msg(a.id, "mine"))
    await store.add_message(_msg(b.id, "theirs"))
    assert [m.id for m in await store.list_messages(a.id)] == [mine.id]


async def test_count_messages_respects_silent(store: SQLStore) -> None:
    thread = await _thread(store)
    for i in range(3):
        await store.add_message(_msg(thread.id, str(i), silent=i == 0))
    assert await store.count_messages(thread.id) == 3
    assert await store.count_messages(thread.id, include_silent=False) == 2


# ---------------------------------------------------------------- commit_step


def _step(thread_id: str, execution: ExecutionRecord) -> dict[str, object]:
    call = ToolCall("call_1", "lookup", '{"q": "x"}')
    assistant = Message(thread_id=thread_id, role="assistant", tool_calls=[call])
    tool = Message(thread_id=thread_id, role="tool", content="found", tool_call_id="call_1")
    result = {"thread_id": thread_id, "message_id": tool.id, "tool_call_id": "call_1",
              "tool_name": "lookup", "arguments": call.arguments, "status": "success", "result": "found"}
    return {"messages": [assistant, tool], "tool_results": [result], "execution": execution}


async def test_commit_step_stores_everything_and_returns_seqs(store: SQLStore) -> None:
    thread = await _thread(store)
    execution = ExecutionRecord(thread_id=thread.id, step_count=1, state={"pending": ["x"]})
    step = _step(thread.id, execution)
    inserted = await store.commit_step(**step)  # type: ignore[arg-type]
    listed = await store.list_messages(thread.id)
    assert [m.seq for m in inserted] == [m.seq for m in listed]
    assert all(m.seq is not None for m in inserted)
    results = await store.list_tool_results(thread.id)
    assert [(r["tool_call_id"], r["result"], r["message_id"]) for r in results] == [
        ("call_1", "found", inserted[1].id)]
    assert await store.get_execution(execution.id) == execution


async def test_commit_step_applies_message_updates(store: SQLStore) -> None:
    thread = await _thread(store)
    draft = await store.add_message(_msg(thread.id, "draft", role="assistant", status="partial"))
    await store.commit_step(updates=[(draft.id, {"status": "complete", "content": "done"})])
    got = await store.get_message(draft.id)
    assert got is not None and (got.status, got.content) == ("complete", "done")


async def test_commit_step_failure_midway_leaves_no_rows(store: SQLStore, backend: Backend) -> None:
    thread = await _thread(store)
    existing = await store.add_message(_msg(thread.id, "already here"))
    execution = ExecutionRecord(thread_id=thread.id)
    step = _step(thread.id, execution)
    duplicate = Message(thread_id=thread.id, role="user", content="dup", id=existing.id)
    step["messages"] = [*step["messages"], duplicate]  # type: ignore[misc]
    with pytest.raises(StoreError):
        await store.commit_step(**step)  # type: ignore[arg-type]
    assert [m.id for m in await store.list_messages(thread.id)] == [existing.id]
    assert await store.list_tool_results(thread.id) == []
    assert await store.get_execution(execution.id) is None
    assert all(m.seq is None for m in step["messages"])  # type: ignore[attr-defined]
    assert await backend.fetch("SELECT id FROM messages") == [(existing.id,)]


async def test_commit_step_with_unknown_update_rolls_back(store: SQLStore) -> None:
    thread = await _thread(store)
    execution = ExecutionRecord(thread_id=thread.id)
    step = _step(thread.id, execution)
    with pytest.raises(StoreError, match="msg_missing"):
        await store.commit_step(**step, updates=[("msg_missing", {"content": "x"})])  # type: ignore[arg-type]
    assert await store.list_messages(thread.id) == []
    assert await store.get_execution(execution.id) is None


async def test_store_keeps_working_after_failed_step(store: SQLStore) -> None:
    thread = await _thread(store)
    existing = await store.add_message(_msg(thread.id, "a"))
    with pytest.raises(StoreError):
        await store.commit_step(messages=[_msg(thread.id, "b", id=existing.id)])
    after = await store.add_message(_msg(thread.id, "c"))
    assert [m.id for m in await store.list_messages(thread.id)] == [existing.id, after.id]


async def test_list_tool_results_filters_by_call_id(store: SQLStore) -> None:
    thread = await _thread(store)
    await store.commit_step(tool_results=[
        {"thread_id": thread.id, "tool_call_id": "c1", "tool_name": "f", "status": "success", "result": "1"},
        {"thread_id": thread.id, "tool_call_id": "c2", "tool_name": "f", "status": "error", "error": "boom",
         "stack": "trace", "attachments": [{"path": "/x"}], "metadata": {"k": 1}},
    ])
    [row] = await store.list_tool_results(thread.id, tool_call_id="c2")
    assert (row["status"], row["error"], row["stack"], row["attachments"], row["metadata"]) == (
        "error", "boom", "trace", [{"path": "/x"}], {"k": 1})


# ---------------------------------------------------------------- executions


async def test_save_execution_upserts(store: SQLStore) -> None:
    thread = await _thread(store)
    execution = ExecutionRecord(thread_id=thread.id, state={"a": 1})
    await store.save_execution(execution)
    execution.status, execution.step_count, execution.state = "complete", 4, {"a": 2}
    execution.stop_reason, execution.stopped_by = "done", "b"
    await store.save_execution(execution)
    assert await store.get_execution(execution.id) == execution


async def test_list_executions_filters_by_thread_and_status(store: SQLStore) -> None:
    a, b = await _thread(store), await _thread(store)
    running = ExecutionRecord(thread_id=a.id)
    done = ExecutionRecord(thread_id=a.id, status="complete")
    other = ExecutionRecord(thread_id=b.id)
    for e in (running, done, other):
        await store.save_execution(e)
    assert {e.id for e in await store.list_executions(thread_id=a.id)} == {running.id, done.id}
    assert {e.id for e in await store.list_executions(status="running")} == {running.id, other.id}
    assert [e.id for e in await store.list_executions(thread_id=a.id, status="complete")] == [done.id]


async def test_touch_executions_refreshes_only_running_ones(store: SQLStore) -> None:
    thread = await _thread(store)
    running = ExecutionRecord(thread_id=thread.id, updated_at=1000)
    done = ExecutionRecord(thread_id=thread.id, status="complete", updated_at=1000)
    for e in (running, done):
        await store.save_execution(e)
    assert await store.touch_executions([Fence(running.id, 0), Fence(done.id, 0)], 5000) == []
    assert (await store.get_execution(running.id)).updated_at == 5000
    assert (await store.get_execution(done.id)).updated_at == 1000
    assert await store.touch_executions([], 6000) == []


async def _taken_over(store: SQLStore) -> tuple[ThreadRecord, ExecutionRecord]:
    """A running execution at epoch 0 that another process then claimed (epoch 1)."""
    thread = await _thread(store)
    mine = ExecutionRecord(thread_id=thread.id, updated_at=1000)
    await store.save_execution(mine)
    theirs = replace(mine, state={"owner": "other"}, updated_at=2000, epoch=1)
    assert await store.replace_execution(theirs, expected_status="running", expected_updated_at=1000)
    return thread, mine


async def test_touch_executions_names_the_ones_taken_over_and_leaves_them_alone(store: SQLStore) -> None:
    thread, mine = await _taken_over(store)
    kept = ExecutionRecord(thread_id=thread.id, updated_at=1000)
    await store.save_execution(kept)
    assert await store.touch_executions([Fence(mine.id, 0), Fence(kept.id, 0)], 5000) == [mine.id]
    assert (await store.get_execution(mine.id)).updated_at == 2000
    assert (await store.get_execution(kept.id)).updated_at == 5000


async def test_a_step_of_an_execution_taken_over_writes_nothing(store: SQLStore) -> None:
    thread, mine = await _taken_over(store)
    before = await store.add_message(Message(thread_id=thread.id, role="user", content="hi"))
    reply = Message(thread_id=thread.id, role="assistant", content="late")
    with pytest.raises(ExecutionTakenOver) as caught:
        await store.commit_step(messages=[reply], updates=[(before.id, {"content": "changed"})],
                                execution=replace(mine, step_count=1))
    assert (caught.value.execution_id, caught.value.epoch) == (mine.id, 0)
    with pytest.raises(ExecutionTakenOver):
        await store.commit_step(messages=[reply], updates=[(before.id, {"content": "changed"})],
                                fence=Fence(mine.id, 0))
    assert [m.content for m in await store.list_messages(thread.id)] == ["hi"]
    stored = await store.get_execution(mine.id)
    assert (stored.epoch, stored.step_count, stored.state) == (1, 0, {"owner": "other"})


async def test_saving_an_execution_taken_over_is_refused(store: SQLStore) -> None:
    _, mine = await _taken_over(store)
    with pytest.raises(ExecutionTakenOver):
        await store.save_execution(replace(mine, status="complete"))
    assert (await store.get_execution(mine.id)).status == "running"


async def test_the_holder_of_the_current_epoch_writes_its_steps(store: SQLStore) -> None:
    thread, mine = await _taken_over(store)
    theirs = await store.get_execution(mine.id)
    reply = Message(thread_id=thread.id, role="assistant", content="theirs")
    await store.commit_step(messages=[reply], fence=Fence(mine.id, 1))
    await store.commit_step(execution=replace(theirs, step_count=2))
    assert [m.content for m in await store.list_messages(thread.id)] == ["theirs"]
    assert (await store.get_execution(mine.id)).step_count == 2


async def test_a_claim_is_released_and_refreshed_only_by_its_owner(store: SQLStore) -> None:
    assert await store.claim_env("lock", "", "thr_y", {"owner": "a"}, 1000) is True
    assert await store.touch_env("lock", "", ["thr_y"], 1500, "b") == 0
    assert await store.release_env("lock", "", "thr_y", "b") is False
    assert await store.get_env("lock", "", "thr_y") == {"owner": "a"}
    assert await store.touch_env("lock", "", ["thr_y"], 1500, "a") == 1
    assert await store.release_env("lock", "", "thr_y", "a") is True
    assert await store.get_env("lock", "", "thr_y") is None


async def test_list_scope_returns_every_entry_of_a_scope_oldest_first(store: SQLStore) -> None:
    await store.set_env("inbox", "thr_a", "msg_1", {"n": 1})
    await store.set_env("inbox", "thr_b", "msg_2", {"n": 2})
    await store.set_env("thread", "thr_a", "other", 3)
    assert await store.list_scope("inbox") == [("thr_a", "msg_1", {"n": 1}), ("thr_b", "msg_2", {"n": 2})]
    assert await store.delete_env("inbox", "thr_a", "msg_1")
    assert await store.list_scope("inbox") == [("thr_b", "msg_2", {"n": 2})]


async def test_claim_env_is_an_atomic_claim_with_takeover_of_stale_ones(store: SQLStore) -> None:
    assert await store.claim_env("lock", "", "thr_x", {"owner": "a"}, 1000) is True
    assert await store.claim_env("lock", "", "thr_x", {"owner": "b"}, 2000) is False
    assert await store.claim_env("lock", "", "thr_x", {"owner": "b"}, 2000, stale_before=900) is False
    assert await store.get_env("lock", "", "thr_x") == {"owner": "a"}
    assert await store.touch_env("lock", "", ["thr_x"], 1500) == 1
    assert await store.claim_env("lock", "", "thr_x", {"owner": "b"}, 3000, stale_before=1400) is False
    assert await store.claim_env("lock", "", "thr_x", {"owner": "b"}, 3000, stale_before=1600) is True
    assert await store.get_env("lock", "", "thr_x") == {"owner": "b"}


# ---------------------------------------------------------------- logs


async def test_logs_are_listed_in_order_with_pagination(store: SQLStore) -> None:
    thread = await _thread(store)
    for i in range(4):
        await store.add_log(LogRecord(thread_id=thread.id, level="info", message=f"m{i}", data={"i": i}))
    page = await store.list_logs(thread.id, limit=2, offset=1)
    assert [(log.message, log.data) for log in page] == [("m1", {"i": 1}), ("m2", {"i": 2})]
    assert all(log.id is not None for log in page)


# ---------------------------------------------------------------- files


async def test_file_round_trips_bytes(store: SQLStore) -> None:
    thread = await _thread(store)
    data = bytes(range(256)) * 3
    record = await store.write_file(thread.id, "/img/a.bin", data, mime_type="application/octet-stream",
                                    metadata={"w": 1})
    assert await store.read_file(thread.id, "/img/a.bin") == data
    assert (record.size, record.mime_type, record.metadata) == (768, "application/octet-stream", {"w": 1})
    assert await store.stat_file(thread.id, "/img/a.bin") == record


async def test_overwriting_file_keeps_created_at(store: SQLStore) -> None:
    thread = await _thread(store)
    first = await store.write_file(thread.id, "/a.txt", b"one")
    second = await store.write_file(thread.id, "/a.txt", b"three")
    assert (second.created_at, second.size) == (first.created_at, 5)
    assert await store.read_file(thread.id, "/a.txt") == b"three"


async def test_missing_file_reads_none(store: SQLStore) -> None:
    thread = await _thread(store)
    assert await store.read_file(thread.id, "/nope") is None
    assert await store.stat_file(thread.id, "/nope") is None


async def test_list_files_matches_prefix_literally(store: SQLStore) -> None:
    thread = await _thread(store)
    for path in ("/docs/a.md", "/docs/b.md", "/do_s/c.md", "/docs%/d.md", "/other.md"):
        await store.write_file(thread.id, path, b"x")
    assert [f.path for f in await store.list_files(thread.id, "/docs/")] == ["/docs/a.md", "/docs/b.md"]
    assert [f.path for f in await store.list_files(thread.id, "/do_")] == ["/do_s/c.md"]
    assert len(await store.list_files(thread.id)) == 5


async def test_delete_file(store: SQLStore) -> None:
    thread = await _thread(store)
    await store.write_file(thread.id, "/a", b"x")
    assert await store.delete_file(thread.id, "/a") is True
    assert await store.delete_file(thread.id, "/a") is False
    assert await store.read_file(thread.id, "/a") is None


# ---------------------------------------------------------------- env values


async def test_env_values_are_scoped(store: SQLStore) -> None:
    await store.set_env("thread", "t1", "KEY", {"v": 1})
    await store.set_env("user", "t1", "KEY", "user-value")
    await store.set_env("instance", "", "KEY", [1, 2])
    assert await store.get_env("thread", "t1", "KEY") == {"v": 1}
    assert await store.get_env("user", "t1", "KEY") == "user-value"
    assert await store.get_env("instance", "", "KEY") == [1, 2]
    assert await store.get_env("thread", "t2", "KEY") is None


async def test_env_set_overwrites_and_lists(store: SQLStore) -> None:
    await store.set_env("thread", "t1", "A", 1)
    await store.set_env("thread", "t1", "A", 2)
    await store.set_env("thread", "t1", "B", "b")
    assert await store.list_env("thread", "t1") == {"A": 2, "B": "b"}


async def test_env_delete(store: SQLStore) -> None:
    await store.set_env("user", "u", "A", 1)
    assert await store.delete_env("user", "u", "A") is True
    assert await store.delete_env("user", "u", "A") is False
    assert await store.list_env("user", "u") == {}


async def test_env_unknown_scope_is_rejected(store: SQLStore) -> None:
    with pytest.raises(StoreError, match="unknown env scope"):
        await store.set_env("galaxy", "x", "A", 1)


# ---------------------------------------------------------------- users and tokens


async def test_users_round_trip(store: SQLStore) -> None:
    alice = await store.create_user("Alice", email="alice@example.com", is_admin=True)
    bob = await store.create_user("Bob")
    assert await store.get_user(alice.id) == alice
    assert await store.get_user_by_email("alice@example.com") == alice
    assert {u.id for u in await store.list_users()} == {alice.id, bob.id}
    assert await store.get_user("usr_missing") is None


async def test_duplicate_email_is_rejected(store: SQLStore) -> None:
    await store.create_user("A", email="same@example.com")
    with pytest.raises(StoreError):
        await store.create_user("B", email="same@example.com")


async def test_token_plaintext_is_never_stored(store: SQLStore, backend: Backend) -> None:
    user = await store.create_user("Alice")
    record, plaintext = await store.create_api_token(user.id, "ci")
    assert record.token_hash == hashlib.sha256(plaintext.encode()).hexdigest()
    rows = await backend.fetch("SELECT * FROM api_tokens")
    assert len(rows) == 1
    assert not any(plaintext in str(value) for value in rows[0])
    assert plaintext.startswith(record.prefix)


async def test_valid_token_verifies_to_its_user(store: SQLStore) -> None:
    user = await store.create_user("Alice")
    record, plaintext = await store.create_api_token(user.id, "ci")
    assert await store.verify_api_token(plaintext) == user
    [listed] = await store.list_api_tokens(user.id)
    assert listed.id == record.id and listed.last_used_at is not None


async def test_revoked_token_is_rejected(store: SQLStore) -> None:
    user = await store.create_user("Alice")
    record, plaintext = await store.create_api_token(user.id, "ci")
    assert await store.revoke_api_token(record.id) is True
    assert await store.verify_api_token(plaintext) is None
    assert await store.revoke_api_token(record.id) is False


async def test_unknown_token_is_rejected(store: SQLStore) -> None:
    user = await store.create_user("Alice")
    _, plaintext = await store.create_api_token(user.id, "ci")
    assert await store.verify_api_token(plaintext + "x") is None


async def test_token_for_unknown_user_raises_not_found(store: SQLStore) -> None:
    with pytest.raises(NotFoundError):
        await store.create_api_token("usr_missing", "ci")


# ---------------------------------------------------------------- user values


async def test_user_values_crud(store: SQLStore) -> None:
    await store.set_user_value("u1", "theme", "dark")
    await store.set_user_value("u1", "theme", {"mode": "light"})
    await store.set_user_value("u1", "lang", "en")
    await store.set_user_value("u2", "lang", "fr")
    assert await store.get_user_value("u1", "theme") == {"mode": "light"}
    assert await store.list_user_values("u1") == {"lang": "en", "theme": {"mode": "light"}}
    assert await store.delete_user_value("u1", "lang") is True
    assert await store.delete_user_value("u1", "lang") is False
    assert await store.get_user_value("u1", "lang") is None
    assert await store.get_user_value("u2", "lang") == "fr"


# ---------------------------------------------------------------- scheduled effects


async def test_claim_takes_only_due_effects(store: SQLStore) -> None:
    due = await store.schedule_effect("t1", "email", {"to": "a"}, run_at=1_000)
    await store.schedule_effect("t1", "email", {"to": "b"}, run_at=5_000)
    claimed = await store.claim_due_effects(2_000, "w1", limit=10, lease_ms=100)
    assert [(e.id, e.status, e.claimed_by, e.claimed_until, e.attempts, e.args) for e in claimed] == [
        (due.id, "running", "w1", 2_100, 1, {"to": "a"})]
    assert await store.claim_due_effects(2_000, "w2", limit=10, lease_ms=100) == []


async def test_claim_respects_limit_in_run_order(store: SQLStore) -> None:
    made = [await store.schedule_effect("t1", "x", run_at=100 - i) for i in range(5)]
    claimed = await store.claim_due_effects(1_000, "w", limit=2, lease_ms=10)
    assert [e.id for e in claimed] == [made[4].id, made[3].id]


async def test_expired_lease_can_be_reclaimed(store: SQLStore) -> None:
    effect = await store.schedule_effect("t1", "x", run_at=0)
    await store.claim_due_effects(10, "dead-worker", limit=1, lease_ms=50)
    assert await store.claim_due_effects(40, "w2", limit=1, lease_ms=50) == []
    [again] = await store.claim_due_effects(61, "w2", limit=1, lease_ms=50)
    assert (again.id, again.claimed_by, again.attempts) == (effect.id, "w2", 2)


async def test_finish_effect_records_result_for_owner_only(store: SQLStore) -> None:
    effect = await store.schedule_effect("t1", "x", run_at=0)
    await store.claim_due_effects(1, "w1", limit=1, lease_ms=1_000)
    assert await store.finish_effect(effect.id, {"ok": True}, worker_id="w2") is False
    assert await store.finish_effect(effect.id, {"ok": True}, worker_id="w1") is True
    done = await store.get_effect(effect.id)
    assert done is not None and (done.status, done.result) == ("done", {"ok": True})


async def test_failed_effect_retries_at_given_time(store: SQLStore) -> None:
    effect = await store.schedule_effect("t1", "x", run_at=0)
    await store.claim_due_effects(1, "w1", limit=1, lease_ms=1_000)
    assert await store.fail_effect(effect.id, "boom", retry_at=500) is True
    assert await store.claim_due_effects(499, "w1", limit=1, lease_ms=1_000) == []
    [retry] = await store.claim_due_effects(500, "w1", limit=1, lease_ms=1_000)
    assert (retry.id, retry.last_error, retry.attempts) == (effect.id, "boom", 2)


async def test_failed_effect_without_retry_is_final(store: SQLStore) -> None:
    effect = await store.schedule_effect("t1", "x", run_at=0)
    await store.claim_due_effects(1, "w1", limit=1, lease_ms=1_000)
    await store.fail_effect(effect.id, "boom")
    assert [e.id for e in await store.list_effects(status="failed")] == [effect.id]
    assert await store.claim_due_effects(10_000, "w1", limit=1, lease_ms=1) == []


async def test_cancelled_effect_is_never_claimed(store: SQLStore) -> None:
    effect = await store.schedule_effect("t1", "x", run_at=0)
    assert await store.cancel_effect(effect.id) is True
    assert await store.claim_due_effects(10, "w", limit=5, lease_ms=1) == []
    assert await store.cancel_effect(effect.id) is False
    assert [e.status for e in await store.list_effects(thread_id="t1")] == ["cancelled"]


async def test_effects_are_claimed_once_by_concurrent_claimers(backend: Backend) -> None:
    setup = backend.new_store()
    ids = {(await setup.schedule_effect("t1", "x", {"n": i}, run_at=0)).id for i in range(30)}
    await setup.close()
    barrier = threading.Barrier(2)
    claims: dict[str, list[str]] = {}

    def claimer(worker: str) -> None:
        async def run() -> None:
            s = backend.new_store()
            await s.open()
            got: list[str] = []
            try:
                barrier.wait(timeout=30)
                while batch := await s.claim_due_effects(10, worker, limit=2, lease_ms=60_000):
                    got.extend(e.id for e in batch)
            finally:
                await s.close()
            claims[worker] = got

        asyncio.run(run())

    threads = [threading.Thread(target=claimer, args=(w,)) for w in ("w1", "w2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    all_claims = claims["w1"] + claims["w2"]
    assert sorted(all_claims) == sorted(ids)
    assert len(all_claims) == len(set(all_claims))


# ---------------------------------------------------------------- subagents


async def test_subagent_links_round_trip(store: SQLStore) -> None:
    link = await store.add_subagent(SubagentRecord(parent_thread_id="p", child_thread_id="c1",
                                                   agent="researcher", relationship="child"))
    await store.add_subagent(SubagentRecord(parent_thread_id="other", child_thread_id="c2", agent="x"))
    assert await store.get_subagent(link.id) == link
    assert [s.id for s in await store.list_subagents("p")] == [link.id]


async def test_update_subagent_sets_status_and_result(store: SQLStore) -> None:
    link = await store.add_subagent(SubagentRecord(parent_thread_id="p", child_thread_id="c", agent="a"))
    updated = await store.update_subagent(link.id, status="complete", result={"answer": 42})
    assert (updated.status, updated.result) == ("complete", {"answer": 42})
    assert await store.get_subagent(link.id) == updated


async def test_update_unknown_subagent_raises_not_found(store: SQLStore) -> None:
    with pytest.raises(NotFoundError):
        await store.update_subagent("sub_missing", status="complete")


# ---------------------------------------------------------------- deleting threads

_THREAD_TABLES = {
    "messages": "thread_id", "tool_results": "thread_id", "executions": "thread_id",
    "logs": "thread_id", "thread_files": "thread_id", "scheduled_effects": "thread_id",
    "env_values": "scope_id", "subagents": "parent_thread_id", "threads": "id",
}


async def _fill_thread(store: SQLStore, thread_id: str) -> None:
    step = _step(thread_id, ExecutionRecord(thread_id=thread_id))
    await store.commit_step(**step)  # type: ignore[arg-type]
    await store.add_log(LogRecord(thread_id=thread_id, level="info", message="x"))
    await store.write_file(thread_id, "/f", b"x")
    await store.set_env("thread", thread_id, "K", 1)
    await store.schedule_effect(thread_id, "x")
    await store.add_subagent(SubagentRecord(parent_thread_id=thread_id, child_thread_id="c", agent="a"))


async def test_delete_thread_removes_its_rows_everywhere(store: SQLStore, backend: Backend) -> None:
    doomed, kept = await _thread(store), await _thread(store)
    await _fill_thread(store, doomed.id)
    await _fill_thread(store, kept.id)
    assert await store.delete_thread(doomed.id) is True
    for table, column in _THREAD_TABLES.items():
        sql = f"SELECT count(*) FROM {table} WHERE {column} = {backend.param(1)}"
        assert await backend.fetch(sql, doomed.id) == [(0,)], table
        assert await backend.fetch(sql, kept.id) != [(0,)], table


async def test_delete_unknown_thread_returns_false(store: SQLStore) -> None:
    assert await store.delete_thread("thr_missing") is False
