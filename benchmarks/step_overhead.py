"""The engine's added cost per model step and per tool call, on a SQLite file.

Workload (the same as the peer frameworks' in-process benchmark): an instant scripted model
asks for the ``add`` tool until the run holds K tool results, then answers; one run is K+1
model steps and K tool calls, on a new thread. Everything is really persisted (SQLite file,
WAL). Figures are medians over many runs, in microseconds:

* ``µs/step`` = run time / (K+1), thread creation and the user's message included;
* the marginal cost of a step = the slope of run time over K+1 (setup excluded);
* ``µs/tool call`` = the extra cost of a second tool call per step, divided by K;
* peak memory = tracemalloc peak of one run, and the process RSS.

``--event-log`` runs with the server's event log attached (as ``serve`` does): events are
written in batches, and each turn's ``done`` is written with the turn's end.

Usage: ``python benchmarks/step_overhead.py [--runs 200] [--ks 1,10,20,40] [--event-log]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from standardagents import Runtime, define_agent, define_model, define_prompt, define_tool
from standardagents.eventlog import EventLog
from standardagents.project import build_registry
from standardagents.providers.base import ModelProvider, ModelRequest, ModelResponse
from standardagents.records import ToolCall
from standardagents.store import open_store


class InstantModel(ModelProvider):
    """Answers at once: ``calls`` tool calls per step for ``k`` steps, then text."""

    def __init__(self, k: int, calls: int) -> None:
        self.k = k
        self.calls = calls
        self.step = 0

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.step += 1
        if self.step <= self.k:
            return ModelResponse(tool_calls=[ToolCall(f"call_{self.step}_{i}", "add", '{"a": 1, "b": 2}')
                                             for i in range(self.calls)])
        self.step = 0
        return ModelResponse(text="The sum is 3.")


@define_tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def measure(k: int, calls: int, runs: int, workdir: Path, event_log: bool = False) -> dict[str, Any]:
    registry = build_registry(
        define_agent(name="bench", side_a={"prompt": "bench_prompt", "max_steps": k + 5}),
        define_prompt(name="bench_prompt", prompt="You add numbers.", tools=["add"]),
        define_model(name="default", provider="test", model="instant", stream=False),
        add,
    )
    store = open_store(f"sqlite:///{workdir / f'k{k}_c{calls}.db'}")
    rt = await Runtime.open(registry, store=store)
    rt.use_provider("default", InstantModel(k, calls))
    log = EventLog(rt.bus, store) if event_log else None
    if log is not None:
        log.start()
    try:
        for _ in range(max(5, runs // 10)):
            await rt.run("bench", "add 1 and 2")
        samples = []
        gc.collect()
        gc.disable()
        for _ in range(runs):
            t0 = time.perf_counter_ns()
            result = await rt.run("bench", "add 1 and 2")
            samples.append(time.perf_counter_ns() - t0)
            assert result.stop_reason == "complete", result
        gc.enable()
        tracemalloc.start()
        await rt.run("bench", "add 1 and 2")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        if log is not None:
            await log.aclose()
        await rt.aclose()
    run_us = statistics.median(samples) / 1000
    return {"k": k, "calls": calls, "run_us": run_us, "step_us": run_us / (k + 1), "peak_kb": peak / 1024}


async def amain(args: argparse.Namespace) -> None:
    ks = [int(x) for x in args.ks.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in ks:
            runs = args.runs if k <= 10 else max(20, args.runs * 10 // k)
            one = await measure(k, 1, runs, Path(tmp), args.event_log)
            two = await measure(k, 2, runs, Path(tmp), args.event_log)
            one["tool_call_us"] = max(0.0, (two["run_us"] - one["run_us"]) / k)
            rows.append(one)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"Engine overhead per step (instant model, SQLite file{', event log' if args.event_log else ''}, medians), "
          f"Python {sys.version.split()[0]}")
    print(f"{'K':>4} {'µs/run':>10} {'µs/step':>9} {'µs/tool call':>13} {'peak KB/run':>12}")
    for r in rows:
        print(f"{r['k']:>4} {r['run_us']:>10.0f} {r['step_us']:>9.0f} {r['tool_call_us']:>13.0f} {r['peak_kb']:>12.0f}")
    base = rows[0]["step_us"]
    for r in rows[1:]:
        print(f"step cost at K={r['k']} / K={rows[0]['k']}: {r['step_us'] / base:.2f}x")
    if len(rows) >= 2:
        # run time = setup + (K+1) * step: the slope is the marginal cost of one more step
        xs = [r["k"] + 1 for r in rows]
        ys = [r["run_us"] for r in rows]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
        print(f"marginal cost of one step (model call + tool call + both commits): {slope:.0f} µs; "
              f"per-run setup (thread, user message, execution record): {my - slope * mx:.0f} µs")
    print(f"max RSS: {rss_mb:.0f} MB")
    if args.json:
        print(json.dumps(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--ks", default="1,10,20,40")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--event-log", action="store_true", help="attach the server's event log")
    asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    main()
