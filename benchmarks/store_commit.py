"""Median cost of the store calls on the engine's per-step path, on a SQLite file.

``commit_step`` of one assistant message with a tool call, one tool message, one tool
result and an execution upsert; and ``list_messages`` of a 40-message thread.
Run: ``.venv/bin/python benchmarks/store_commit.py [--rounds N]``.

``--steady N`` also times N steps' commits back to back (the reply, then the tool result,
the loop yielding between them as a server's does) and reports the mean wall and CPU time
per commit, checkpoints included, and the WAL file's size at the end: the figures a median
hides. To compare two versions, run it with ``PYTHONPATH`` set to each source tree in turn.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from standardagents.records import ExecutionRecord, Message, ThreadRecord, ToolCall, Usage
from standardagents.store import SQLStore

__all__ = ["main"]


async def _bench(path: Path, rounds: int) -> tuple[float, float]:
    store = SQLStore(f"sqlite:///{path}")
    await store.open()
    thread = await store.create_thread(ThreadRecord(agent="bench"))
    execution = ExecutionRecord(thread_id=thread.id)
    commit_us: list[float] = []
    for i in range(rounds + 50):
        call = ToolCall(id=f"call_{i}", name="lookup", arguments='{"q": "weather"}')
        assistant = Message(thread_id=thread.id, role="assistant", content=None, tool_calls=[call],
                            usage=Usage(120, 12, 132), side="a")
        tool = Message(thread_id=thread.id, role="tool", content="sunny", tool_call_id=call.id,
                       name="lookup", tool_status="success")
        result = {"thread_id": thread.id, "message_id": tool.id, "tool_call_id": call.id,
                  "tool_name": "lookup", "arguments": call.arguments, "status": "success",
                  "result": "sunny"}
        execution.step_count = i + 1
        execution.state = {"pending": [], "steps": {"a": i + 1}}
        start = time.perf_counter_ns()
        await store.commit_step(messages=[assistant, tool], tool_results=[result],
                                execution=execution)
        elapsed = time.perf_counter_ns() - start
        if i >= 50:  # warm-up rounds fill caches
            commit_us.append(elapsed / 1000)

    short = await store.create_thread(ThreadRecord(agent="bench"))
    await store.commit_step(messages=[Message(thread_id=short.id, role="user", content=f"m{i}")
                                      for i in range(40)])
    list_us: list[float] = []
    for i in range(rounds + 20):
        start = time.perf_counter_ns()
        got = await store.list_messages(short.id)
        elapsed = time.perf_counter_ns() - start
        assert len(got) == 40
        if i >= 20:
            list_us.append(elapsed / 1000)
    await store.close()
    return statistics.median(commit_us), statistics.median(list_us)


async def _steady(path: Path, steps: int) -> tuple[float, float, int]:
    store = SQLStore(f"sqlite:///{path}")
    await store.open()
    thread = await store.create_thread(ThreadRecord(agent="bench"))
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(steps):
        call = ToolCall(id=f"call_{i}", name="lookup", arguments='{"q": "weather"}')
        reply = Message(thread_id=thread.id, role="assistant", content=None, tool_calls=[call],
                        usage=Usage(120, 12, 132))
        tool = Message(thread_id=thread.id, role="tool", content="sunny", tool_call_id=call.id,
                       name="lookup", tool_status="success")
        await store.commit_step(messages=[reply])
        await asyncio.sleep(0)
        await store.commit_step(messages=[tool], tool_results=[{
            "thread_id": thread.id, "message_id": tool.id, "tool_call_id": call.id, "tool_name": "lookup",
            "arguments": call.arguments, "status": "success", "result": "sunny"}])
        await asyncio.sleep(0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    wal = path.with_name(path.name + "-wal")
    size = wal.stat().st_size if wal.exists() else 0
    await store.close()
    return wall / (2 * steps) * 1e6, cpu / (2 * steps) * 1e6, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--steady", type=int, default=0, help="also time this many steps' commits back to back")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        commit, listing = asyncio.run(_bench(Path(tmp) / "bench.db", args.rounds))
    print(f"commit_step (2 messages + 1 tool result + execution upsert), SQLite file: "
          f"median {commit:.1f} µs over {args.rounds} rounds")
    print(f"list_messages (40 messages), SQLite file: median {listing:.1f} µs over {args.rounds} rounds")
    if args.steady:
        with tempfile.TemporaryDirectory() as tmp:
            wall, cpu, wal = asyncio.run(_steady(Path(tmp) / "steady.db", args.steady))
        print(f"steady commits ({2 * args.steady} back to back, checkpoints included): mean {wall:.1f} µs wall, "
              f"{cpu:.1f} µs CPU per commit; WAL file at the end {wal / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
