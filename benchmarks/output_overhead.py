"""What typed results, cost accounting and usage limits add to a step.

Workload: an instant model asks for the ``add`` tool K times, then answers with a JSON
invoice; one run is K+1 model steps, really persisted on a SQLite file. Variants of the same
turn on one runtime, taking turns run by run, medians over many runs:

* ``plain``: no output type, a model without prices (the answer is not parsed);
* ``typed+cost``: ``output_type=Invoice`` (request shaping, validation of the answer) and a
  model priced from the genai-prices data on every step;
* ``typed+cost+limits``: the same with usage limits checked before every request and tool call;
* ``plain again``: ``plain`` once more, a control: its distance from ``plain`` is the noise.

Usage: ``python benchmarks/output_overhead.py [--runs 200] [--rounds 9] [--k 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from standardagents import Runtime, define_agent, define_model, define_prompt, define_tool
from standardagents.project import build_registry
from standardagents.providers.base import ModelProvider, ModelRequest, ModelResponse
from standardagents.records import ToolCall, Usage
from standardagents.store import open_store


class LineItem(BaseModel):
    description: str
    amount: float


class Invoice(BaseModel):
    customer: str
    total: float
    items: list[LineItem]


ANSWER = json.dumps({"customer": "ACME", "total": 3.0, "items": [{"description": "sum", "amount": 3.0}]})


class InstantModel(ModelProvider):
    """Answers at once with usage: ``k`` tool calls, then the JSON invoice."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.step = 0

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.step += 1
        usage = Usage(prompt_tokens=400 + 40 * self.step, completion_tokens=20, total_tokens=420 + 40 * self.step,
                      cached_tokens=256)
        if self.step <= self.k:
            return ModelResponse(tool_calls=[ToolCall(f"call_{self.step}", "add", '{"a": 1, "b": 2}')], usage=usage,
                                 model="gpt-4o-mini")
        self.step = 0
        return ModelResponse(text=ANSWER, usage=usage, model="gpt-4o-mini")


@define_tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


VARIANTS = ["plain", "plain again", "typed+cost", "typed+cost+limits"]


async def open_runtime(k: int, workdir: Path) -> Runtime:
    """One runtime on one SQLite file for every variant: ``bench_plain`` answers on a model
    without prices, ``bench_priced`` on a model priced from the price data. Separate runtimes
    (or files) per variant would differ by where they sit in memory and on disk, which moves
    the figures more than what is measured."""
    registry = build_registry(
        define_agent(name="bench_plain", side_a={"prompt": "plain_prompt", "max_steps": k + 5}),
        define_agent(name="bench_priced", side_a={"prompt": "priced_prompt", "max_steps": k + 5}),
        define_prompt(name="plain_prompt", prompt="You add numbers.", tools=["add"], model="unpriced"),
        define_prompt(name="priced_prompt", prompt="You add numbers.", tools=["add"], model="priced"),
        define_model(name="unpriced", provider="test", model="instant", stream=False),
        define_model(name="priced", provider="openai", model="gpt-4o-mini", stream=False),
        add)
    rt = await Runtime.open(registry, store=open_store(f"sqlite:///{workdir / 'bench.db'}"))
    rt.use_provider("unpriced", InstantModel(k))
    rt.use_provider("priced", InstantModel(k))
    return rt


def call_of(variant: str, k: int) -> tuple[str, dict[str, Any]]:
    """The agent one variant runs and the options of its calls."""
    if variant.startswith("plain"):
        return "bench_plain", {}
    options: dict[str, Any] = {"output_type": Invoice}
    if variant == "typed+cost+limits":
        options["usage_limits"] = {"requests": k + 5, "total_tokens": 10_000_000, "tool_calls": k + 5,
                                   "cost_usd": 100.0}
    return "bench_priced", options


async def measure(k: int, runs: int, workdir: Path) -> dict[str, tuple[float, float]]:
    """Median microseconds per step of each variant: wall time and this process's CPU time
    (the CPU figure is what other processes on a busy machine disturb least). The variants
    take turns run by run on one runtime, so the machine's load weighs on all of them alike."""
    rt = await open_runtime(k, workdir)
    calls = {v: call_of(v, k) for v in VARIANTS}
    wall: dict[str, list[int]] = {v: [] for v in VARIANTS}
    cpu: dict[str, list[int]] = {v: [] for v in VARIANTS}
    try:
        for _ in range(max(5, runs // 10)):
            for agent, options in calls.values():
                await rt.run(agent, "add 1 and 2", **options)
        gc.collect()
        gc.disable()
        for i in range(runs):
            order = VARIANTS if i % 2 == 0 else VARIANTS[::-1]
            for v in order:
                agent, options = calls[v]
                t0 = time.perf_counter_ns()
                c0 = time.process_time_ns()
                result = await rt.run(agent, "add 1 and 2", **options)
                cpu[v].append(time.process_time_ns() - c0)
                wall[v].append(time.perf_counter_ns() - t0)
                assert result.stop_reason == "complete", result
                assert (result.cost is not None) is (agent == "bench_priced"), result
                assert (result.value is not None) is ("output_type" in options), result
        gc.enable()
    finally:
        await rt.aclose()
    return {v: (statistics.median(wall[v]) / 1000 / (k + 1), statistics.median(cpu[v]) / 1000 / (k + 1))
            for v in VARIANTS}


async def amain(args: argparse.Namespace) -> None:
    rounds: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            workdir = Path(tmp) / f"r{i}"
            workdir.mkdir()
            for v, figures in (await measure(args.k, args.runs, workdir)).items():
                rounds[v].append(figures)
    print(f"Per-step cost of typed output + cost accounting (+ limits), K={args.k} tool steps + 1 answer, "
          f"SQLite file, Python {sys.version.split()[0]}; median of {args.rounds} rounds x {args.runs} runs, "
          f"variants interleaved run by run on one runtime")
    base_wall = statistics.median(w for w, _ in rounds["plain"])
    base_cpu = statistics.median(c for _, c in rounds["plain"])
    for v in VARIANTS:
        wall = statistics.median(w for w, _ in rounds[v])
        cpu = statistics.median(c for _, c in rounds[v])
        print(f"{v:>18}: wall {wall:7.0f} µs/step (x{wall / base_wall:5.3f})   "
              f"CPU {cpu:7.0f} µs/step (x{cpu / base_cpu:5.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    main()
