"""Tool calls in the turn loop: validation, failures, concurrency, order, events."""

from __future__ import annotations

import asyncio
import json

from engine_helpers import stub_model
from standardagents import ModelRetry, define_agent, define_prompt, define_tool
from standardagents.testing.openai_stub import StubReply

AGENT = define_agent(name="helper", side_a={"prompt": "main"})


def prompt(*tools: str) -> object:
    return define_prompt(name="main", prompt="You help.", tools=list(tools))


@define_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@define_tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


@define_tool
def picky(value: str) -> str:
    """Asks the model to retry."""
    raise ModelRetry("use a value in upper case")


async def _tool_messages(rt, thread_id):
    return [m for m in await rt.store.list_messages(thread_id) if m.role == "tool"]


async def test_invalid_arguments_become_an_error_result_the_model_reads(stub, make_runtime):
    stub.queue(StubReply(tool_calls=[("add", json.dumps({"a": "not a number"}))]), "Sorry.")
    rt = await make_runtime(AGENT, prompt("add"), add, stub_model(stub))
    result = await rt.run("helper", "add")
    assert result.stop_reason == "complete"
    (tool,) = await _tool_messages(rt, result.thread_id)
    assert tool.tool_status == "error"
    assert "invalid arguments for add" in tool.content and "a:" in tool.content and "b:" in tool.content
    assert stub.requests[1]["messages"][-1]["content"] == tool.content


async def test_a_raising_tool_becomes_an_error_result_and_the_turn_goes_on(stub, make_runtime):
    stub.queue(StubReply(tool_calls=[("explode", '{"reason": "test"}')]), "It failed, sorry.")
    rt = await make_runtime(AGENT, prompt("explode"), explode, stub_model(stub))
    result = await rt.run("helper", "go")
    assert (result.stop_reason, result.text) == ("complete", "It failed, sorry.")
    (tool,) = await _tool_messages(rt, result.thread_id)
    assert tool.tool_status == "error" and "RuntimeError: boom: test" in tool.content
    rows = await rt.store.list_tool_results(result.thread_id)
    assert rows[0]["stack"] and "boom" in rows[0]["stack"]


async def test_model_retry_hands_its_message_to_the_model(stub, make_runtime):
    stub.queue(StubReply(tool_calls=[("picky", '{"value": "x"}')]), "ok")
    rt = await make_runtime(AGENT, prompt("picky"), picky, stub_model(stub))
    result = await rt.run("helper", "go")
    (tool,) = await _tool_messages(rt, result.thread_id)
    assert tool.content == "Error: use a value in upper case"


async def test_an_unknown_tool_becomes_an_error_result_listing_the_known_ones(stub, make_runtime):
    stub.queue(StubReply(tool_calls=[("no_such_tool", "{}")]), "ok")
    rt = await make_runtime(AGENT, prompt("add"), add, stub_model(stub))
    result = await rt.run("helper", "go")
    (tool,) = await _tool_messages(rt, result.thread_id)
    assert "unknown tool 'no_such_tool'" in tool.content and "add" in tool.content


async def test_concurrent_tool_calls_run_together_and_are_stored_in_call_order(stub, make_runtime):
    slow_started = asyncio.Event()
    fast_done = asyncio.Event()

    @define_tool
    async def slow() -> str:
        """Finishes only after the fast tool has finished."""
        slow_started.set()
        await asyncio.wait_for(fast_done.wait(), 5)
        return "slow result"

    @define_tool
    async def fast() -> str:
        """Finishes at once, once the slow tool runs."""
        await asyncio.wait_for(slow_started.wait(), 5)
        fast_done.set()
        return "fast result"

    stub.queue(StubReply(tool_calls=[("slow", "{}"), ("fast", "{}")]), "done")
    rt = await make_runtime(AGENT, prompt("slow", "fast"), slow, fast, stub_model(stub))
    sub = rt.subscribe()
    result = await rt.run("helper", "go")
    tools = await _tool_messages(rt, result.thread_id)
    assert [t.content for t in tools] == ["slow result", "fast result"]
    assert [t.seq for t in tools] == sorted(t.seq for t in tools)
    events = []
    while not sub.queue.empty():
        events.append(sub.queue.get_nowait())
    done_names = [e.data["name"] for e in events if e.type == "tool_call_done"]
    assert done_names == ["slow", "fast"]
    assert events[-1].type == "done" and events[-1].data["stopReason"] == "complete"


async def test_tool_call_started_carries_the_progress_argument(stub, make_runtime):
    @define_tool(progress_argument="path")
    def write_page(path: str, content: str) -> str:
        """Write a page."""
        return f"wrote {len(content)} chars to {path}"

    args = json.dumps({"path": "index.html", "content": "x" * 200})
    stub.queue(StubReply(tool_calls=[("write_page", args)], chunk_size=5), "written")
    rt = await make_runtime(AGENT, prompt("write_page"), write_page, stub_model(stub))
    sub = rt.subscribe()
    await rt.run("helper", "write it")
    started = []
    while not sub.queue.empty():
        e = sub.queue.get_nowait()
        if e.type == "tool_call_started":
            started.append(e.data)
    assert len(started) == 1
    assert started[0]["name"] == "write_page" and started[0]["progress"] == "index.html"


async def test_done_is_emitted_once_after_a_model_error(stub, make_runtime):
    stub.queue(StubReply(error_status=400, error_body={"error": {"message": "bad request: model unknown"}}))
    rt = await make_runtime(AGENT, prompt(), stub_model(stub))
    sub = rt.subscribe()
    result = await rt.run("helper", "hi")
    assert result.stop_reason == "error"
    assert "400" in (result.error or "") or "bad request" in (result.error or "")
    events = []
    while not sub.queue.empty():
        events.append(sub.queue.get_nowait())
    assert [e.type for e in events].count("done") == 1
    assert events[-1].type == "done" and events[-1].data["stopReason"] == "error"
    assert any(e.type == "error" for e in events)
    messages = await rt.store.list_messages(result.thread_id)
    assert messages[-1].status == "error" and messages[-1].hidden


async def test_a_retriable_error_falls_back_to_the_next_model(stub, make_runtime):
    stub.queue(StubReply(error_status=503), "answer from the fallback")
    primary = stub_model(stub, fallbacks=["backup"])
    backup = stub_model(stub, name="backup")
    rt = await make_runtime(AGENT, prompt(), primary, backup)
    result = await rt.run("helper", "hi")
    assert (result.stop_reason, result.text) == ("complete", "answer from the fallback")
    assert len(stub.requests) == 2


async def test_tool_results_with_new_files_are_stored_as_thread_files(stub, make_runtime):
    import base64

    from standardagents import ToolResult

    @define_tool
    def make_report() -> ToolResult:
        """Make a report file."""
        data = base64.b64encode(b"# Report").decode()
        return ToolResult("success", "made", attachments=[{"name": "report.md", "data": data, "mimeType": "text/markdown"}])

    stub.queue(StubReply(tool_calls=[("make_report", "{}")]), "here it is")
    rt = await make_runtime(AGENT, prompt("make_report"), make_report, stub_model(stub))
    result = await rt.run("helper", "report")
    (tool,) = await _tool_messages(rt, result.thread_id)
    assert tool.attachments == [{"path": "attachments/report.md", "name": "report.md", "mimeType": "text/markdown", "size": 8}]
    assert await rt.store.read_file(result.thread_id, "attachments/report.md") == b"# Report"


async def test_repairing_a_transcript_stores_every_missing_result_in_one_transaction(stub, make_runtime, tmp_path):
    import sqlite3

    from standardagents.records import Message, ThreadRecord, ToolCall

    stub.queue("moving on")
    rt = await make_runtime(AGENT, prompt("add"), add, stub_model(stub))
    # a thread left by an earlier process: a call was cut off before its results were stored
    thread = await rt.store.create_thread(ThreadRecord(agent="helper"))
    calls = [ToolCall(f"call_{i}", "add", '{"a": 1, "b": 2}') for i in range(3)]
    await rt.store.add_message(Message(thread_id=thread.id, role="user", content="add thrice"))
    await rt.store.add_message(Message(thread_id=thread.id, role="assistant", tool_calls=calls))
    database = rt.store.url.removeprefix("sqlite:///")
    # another connection reads the database the moment each repaired result is announced
    seen: list[int] = []

    def count_results(event):
        if event.type == "message_created" and event.data["message"]["role"] == "tool":
            with sqlite3.connect(database) as conn:
                seen.append(conn.execute("SELECT count(*) FROM messages WHERE thread_id = ? AND role = 'tool'",
                                         (thread.id,)).fetchone()[0])

    rt.bus.add_listener(count_results)
    result = await rt.send(thread.id, "never mind, next question")
    assert result.stop_reason == "complete"
    assert seen == [3, 3, 3]
    repaired = await _tool_messages(rt, thread.id)
    assert [m.tool_call_id for m in repaired] == ["call_0", "call_1", "call_2"]
    assert all(m.tool_status == "error" for m in repaired)


# blocking (synchronous) tools ---------------------------------------------------------------

class Gate:
    """A blocking tool's handle: it reports entering, then blocks until released."""

    def __init__(self) -> None:
        import threading

        self.entered = threading.Event()
        self.release = threading.Event()
        self.answered: list[bool] = []


def blocking_tool(gate: Gate, **options: object) -> object:
    @define_tool(name="wait_for_gate", **options)
    def wait_for_gate() -> str:
        """Block (a synchronous handler) until the test lets it go."""
        gate.entered.set()
        # bounded so a test run against a loop-blocking engine fails instead of hanging
        gate.answered.append(gate.release.wait(5))
        return "released"

    return wait_for_gate


async def test_a_blocking_tool_past_its_timeout_ends_with_an_error_result(stub, make_runtime):
    gate = Gate()
    stub.queue(StubReply(tool_calls=[("wait_for_gate", "{}")]), "It took too long.")
    rt = await make_runtime(AGENT, prompt("wait_for_gate"), blocking_tool(gate, timeout=0.2), stub_model(stub))
    try:
        result = await rt.run("helper", "go")
        still_blocked = not gate.release.is_set() and gate.answered == []
    finally:
        gate.release.set()
    assert (result.stop_reason, result.text) == ("complete", "It took too long.")
    (tool,) = await _tool_messages(rt, result.thread_id)
    assert tool.tool_status == "error" and "timed out after 0.2 s" in tool.content
    assert still_blocked  # the turn ended while the handler was still running (in its thread)


async def test_a_blocking_tool_leaves_the_event_loop_free_for_other_threads(stub, make_runtime):
    gate = Gate()
    stub.queue(StubReply(tool_calls=[("wait_for_gate", "{}")]))
    rt = await make_runtime(AGENT, prompt("wait_for_gate"), blocking_tool(gate), stub_model(stub))
    first = await rt.create_thread("helper")
    second = await rt.create_thread("helper")
    sub = rt.subscribe(second.id)
    running = await rt.start(first.id, "block")
    assert await asyncio.to_thread(gate.entered.wait, 10)
    # while the first thread's tool blocks, a whole streamed turn of another thread runs
    stub.queue(StubReply(text="meanwhile, an answer", chunk_size=4))
    other = await rt.send(second.id, "hello")
    events = []
    while not sub.queue.empty():
        events.append(sub.queue.get_nowait())
    assert (other.stop_reason, other.text) == ("complete", "meanwhile, an answer")
    assert "".join(e.data["delta"] for e in events if e.type == "message_chunk") == "meanwhile, an answer"
    assert gate.answered == []  # the blocking call has not returned yet
    stub.queue("done")
    gate.release.set()
    result = await running
    assert result.stop_reason == "complete" and gate.answered == [True]


async def test_many_blocking_tool_calls_of_one_step_all_run_at_once(stub, make_runtime):
    import threading

    calls = 12  # more than a default thread pool's workers on a small machine
    meeting = threading.Barrier(calls, timeout=10)

    @define_tool
    def meet(n: int) -> str:
        """Blocks until every call of the step has started."""
        meeting.wait()
        return f"met {n}"

    stub.queue(StubReply(tool_calls=[("meet", json.dumps({"n": i})) for i in range(calls)]), "all met")
    rt = await make_runtime(AGENT, prompt("meet"), meet, stub_model(stub))
    result = await rt.run("helper", "meet")
    assert (result.stop_reason, result.text) == ("complete", "all met")
    assert [t.content for t in await _tool_messages(rt, result.thread_id)] == [f"met {i}" for i in range(calls)]


async def test_quick_blocking_tools_reuse_an_idle_thread_and_never_wait_for_a_busy_one(stub, make_runtime):
    import threading

    gate = Gate()
    seen: list[int] = []

    @define_tool
    def where() -> str:
        """Reports the thread it runs on."""
        seen.append(threading.get_ident())
        return "here"

    rt = await make_runtime(AGENT, prompt("where", "wait_for_gate"), where, blocking_tool(gate), stub_model(stub))
    stub.queue(StubReply(tool_calls=[("where", "{}")]), "once")
    assert (await rt.run("helper", "where?")).text == "once"
    before = {t.ident for t in threading.enumerate()}
    stub.queue(StubReply(tool_calls=[("where", "{}")]), "twice")
    assert (await rt.run("helper", "where now?")).text == "twice"
    assert len(seen) == 2 and seen[1] in before  # the second call took a thread already there, idle
    # a handler that blocks keeps its thread: the next call runs at once on another one
    stub.queue(StubReply(tool_calls=[("wait_for_gate", "{}")]))
    blocked = await rt.create_thread("helper")
    running = await rt.start(blocked.id, "block")
    assert await asyncio.to_thread(gate.entered.wait, 10)
    stub.queue(StubReply(tool_calls=[("where", "{}")]), "thrice")
    other = await rt.run("helper", "where again?")
    assert (other.stop_reason, other.text) == ("complete", "thrice")
    assert gate.answered == [] and len(seen) == 3  # it did not wait for the blocked thread
    stub.queue("done")
    gate.release.set()
    assert (await running).stop_reason == "complete"
