"""A turn's cost against its thread's length, with compaction on: a fresh thread against
threads of 1,000 and 10,000 messages that a compaction folded (all hidden behind one summary,
two messages kept visible, as compaction stores them), on SQLite and PostgreSQL.

Workload: an instant in-process model asks for the ``add`` tool once, then answers (two model
steps, one tool call per turn, everything persisted); the prompt has a compaction threshold
(its model a 100,000-token window, so the measured turns' own contexts stay under it). Each
thread runs ``--warmup`` turns, then ``--turns`` measured ones; every turn adds its four
messages to the thread, so the fresh thread and the long ones grow alike.

Printed per backend and thread length: the median CPU time of the benchmark process per turn
(the engine, the driver and the parsing of what the store returns; PostgreSQL's own server
CPU is not in it), the median wall time, and the mean rows of the ``messages`` table read per
turn, counted at the database driver (PostgreSQL's row count of each SELECT; the SQLite
store's raw cursor, wrapped to count each fetch); then the ratios to the fresh thread.

``--callgrind`` counts instructions instead of CPU time (valgrind's callgrind; each thread
length in a process of its own, only the measured turns counted): deterministic where times
on a loaded machine are not. It counts this process only (on PostgreSQL, not the server).

Runs against whatever ``standardagents`` is imported: for a before/after comparison, run it
once with ``PYTHONPATH=<an older tree>/src``.

Usage: ``python benchmarks/history_length.py [--turns 30] [--warmup 5] [--lengths 1000,10000]
[--backends sqlite,postgres] [--pg postgresql://postgres@127.0.0.1:5432/test] [--callgrind]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import event

from standardagents import Runtime, define_agent, define_model, define_prompt, define_tool
from standardagents.project import build_registry
from standardagents.providers.base import ModelProvider, ModelRequest, ModelResponse
from standardagents.records import Message, ToolCall
from standardagents.store import SQLStore
from standardagents.toolcalls import SUMMARY_PREFIX


class InstantModel(ModelProvider):
    """Answers at once: one ``add`` call, then text."""

    def __init__(self) -> None:
        self.step = 0

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.step += 1
        if self.step % 2:
            return ModelResponse(tool_calls=[ToolCall(f"call_{self.step}", "add", '{"a": 1, "b": 2}')])
        return ModelResponse(text="The sum is 3.")


@define_tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _reads_messages(sql: str) -> bool:
    return sql.lstrip().upper().startswith("SELECT") and "FROM messages" in sql


class RowsRead:
    """Rows of ``messages`` the store fetched, counted at the driver (as the tests count them)."""

    def __init__(self, store: SQLStore) -> None:
        self.rows = 0
        if store.dialect == "sqlite":
            store._cursor = _CountingCursor(store._cursor, self)
        else:
            assert store._aengine is not None
            event.listen(store._aengine.sync_engine, "after_cursor_execute", self._after)

    def _after(self, _conn: Any, cursor: Any, statement: str, *_rest: Any) -> None:
        if _reads_messages(statement):
            self.rows += max(0, cursor.rowcount)


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


async def _compacted_thread(rt: Runtime, length: int) -> str:
    """A thread of ``length`` messages: all but two hidden behind a summary stored last."""
    thread = await rt.create_thread("bench")
    if not length:
        return thread.id
    folded = length - 3
    batch: list[Message] = []
    for i in range(folded):
        batch.append(Message(thread_id=thread.id, role="user" if i % 2 == 0 else "assistant",
                             content=f"an earlier message, number {i}, of a long conversation", hidden=True))
        if len(batch) == 1000:
            await rt.store.commit_step(messages=batch)
            batch = []
    kept = [Message(thread_id=thread.id, role="user", content="the last question"),
            Message(thread_id=thread.id, role="assistant", content="the last answer")]
    summary = Message(thread_id=thread.id, role="user", content=f"{SUMMARY_PREFIX}\nwhat came before",
                      metadata={"summary": True, "insertBefore": kept[0].id})
    await rt.store.commit_step(messages=[*batch, *kept, summary])
    assert await rt.store.count_messages(thread.id) == length
    return thread.id


def _mark() -> None:
    """Where the measured turns begin and end, for ``--callgrind``: valgrind writes its counts
    when this calls ``getloadavg``, which nothing else here calls."""
    os.getloadavg()


async def measure(url: str, schema: str | None, length: int, turns: int, warmup: int,
                  mark: bool = False) -> dict[str, Any]:
    registry = build_registry(
        define_agent(name="bench", side_a={"prompt": "bench_prompt", "max_steps": 5}),
        define_prompt(name="bench_prompt", prompt="You add numbers.", tools=["add"], compaction_threshold=0.8),
        define_model(name="default", provider="test", model="instant", stream=False, context_window=100_000),
        add,
    )
    store = SQLStore(url, schema=schema)
    rt = await Runtime.open(registry, store=store)
    rt.use_provider("default", InstantModel())
    try:
        thread_id = await _compacted_thread(rt, length)
        for _ in range(warmup):
            await rt.send(thread_id, "add 1 and 2")
        counter = RowsRead(store)
        cpu: list[float] = []
        wall: list[float] = []
        gc.collect()
        gc.disable()
        if mark:
            _mark()
        for _ in range(turns):
            c0, w0 = time.process_time_ns(), time.perf_counter_ns()
            result = await rt.send(thread_id, "add 1 and 2")
            cpu.append((time.process_time_ns() - c0) / 1e6)
            wall.append((time.perf_counter_ns() - w0) / 1e6)
            assert result.stop_reason == "complete", result
        if mark:
            _mark()
        gc.enable()
    finally:
        await rt.aclose()
    return {"length": length, "cpu_ms": statistics.median(cpu), "wall_ms": statistics.median(wall),
            "rows": counter.rows / turns}


async def _drop_schema(url: str, schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def _instructions(valgrind: str, url: str, schema: str | None, length: int,
                  args: argparse.Namespace) -> tuple[int, float]:
    """Instructions of the measured turns in a worker under callgrind, and its rows read per turn."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    # the heartbeat beats by the clock, and valgrind slows it fiftyfold: no beat in a run
    env["STANDARDAGENTS_EXECUTION_LEASE"] = "86400"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        done = subprocess.run([valgrind, "--tool=callgrind", "--dump-before=getloadavg", f"--callgrind-out-file={out}",
                               sys.executable, __file__, "--worker", json.dumps([url, schema, length]),
                               "--turns", str(args.turns), "--warmup", str(args.warmup)],
                              env=env, capture_output=True, text=True, check=True)
        found = re.search(r"^summary: (\d+)$", Path(f"{out}.2").read_text(), re.MULTILINE)
    if found is None:
        raise SystemExit(f"callgrind wrote no summary for a thread of {length}")
    return int(found.group(1)), float(json.loads(done.stdout.strip().splitlines()[-1])["rows"])


async def _one(url: str, schema: str | None, length: int, args: argparse.Namespace) -> dict[str, Any]:
    if not args.callgrind:
        return await measure(url, schema, length, args.turns, args.warmup)
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("--callgrind: valgrind is not installed (e.g. apt-get install valgrind)")
    count, rows = await asyncio.to_thread(_instructions, valgrind, url, schema, length, args)
    return {"length": length, "cpu_ms": count / args.turns / 1e6, "wall_ms": float("nan"), "rows": rows}


async def amain(args: argparse.Namespace) -> None:
    if args.worker:
        url, schema, length = json.loads(args.worker)
        print(json.dumps(await measure(url, schema, length, args.turns, args.warmup, mark=True)))
        return
    lengths = [0, *(int(x) for x in args.lengths.split(","))]
    cpu = "M instr/turn" if args.callgrind else "CPU ms/turn"
    print(f"{'backend':<10} {'messages':>9} {cpu:>12} {'wall ms/turn':>13} {'rows/turn':>10}"
          f" {'CPU x':>7} {'rows x':>7}")
    for backend in args.backends.split(","):
        results = []
        with tempfile.TemporaryDirectory() as tmp:
            for length in lengths:
                schema = None
                if backend == "sqlite":
                    url = f"sqlite:///{Path(tmp) / f'h{length}.db'}"
                else:
                    url, schema = args.pg, f"bench_history_{uuid.uuid4().hex[:10]}"
                try:
                    results.append(await _one(url, schema, length, args))
                finally:
                    if schema is not None:
                        await _drop_schema(url, schema)
        fresh = results[0]
        for r in results:
            name = "fresh" if r["length"] == 0 else f"{r['length']:,}"
            print(f"{backend:<10} {name:>9} {r['cpu_ms']:>12.2f} {r['wall_ms']:>13.2f} {r['rows']:>10.1f}"
                  f" {r['cpu_ms'] / fresh['cpu_ms']:>7.2f} {r['rows'] / max(fresh['rows'], 1e-9):>7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--lengths", default="1000,10000")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--callgrind", action="store_true",
                        help="instructions per turn under valgrind's callgrind instead of CPU time")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    main()
