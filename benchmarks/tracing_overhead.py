"""What tracing and metrics add to a step: the engine's per-step cost with observability off,
compared with the same engine without its observability call sites, and with tracing on (a
``BatchSpanProcessor``) or Prometheus metrics on.

Workload: an instant in-process model asks for the ``add`` tool K times, then answers (K+1
model steps, K tool calls, everything persisted to a SQLite file). Each mode runs in fresh
processes, the modes alternating round by round so that machine load drifts hit them alike;
figures are medians of µs per step over every run of a mode.

* ``stripped``: this checkout's source (or the tree at ``--baseline REF``) with the engine's
  observability call sites removed (``benchmarks/strip_observability.py``), imported instead
  of this checkout: the engine as it would be without the observability layer;
* ``off``: this checkout, no tracer provider, no metrics (the default outside a server);
* ``on``: an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` whose exporter drops the
  batches (export cost is on the processor's thread; what is measured is the turn's cost);
* ``metrics``: Prometheus instruments on, tracing off (what ``serve`` does by default);
* ``sdk-span``: for reference, one bare span of the OpenTelemetry SDK (start, end) into the
  same processor: a traced step makes two spans (``chat`` and ``execute_tool``);
* ``sdk in turn`` (same process as ``off``, ``on`` and ``metrics``): tracing off, but each
  model request makes the SDK floor's two spans (as a step makes them): what the SDK's calls
  alone cost amid a real turn, where caches are colder than in a tight loop.

CPU time (all threads of the process, so the batch processor's work counts) is reported
beside wall time: on a shared, loaded machine it is the steadier of the two.

``--callgrind`` counts instructions instead (valgrind's callgrind; skipped with a message
when valgrind is not installed): deterministic where times are noisy. Each of ``stripped``,
``off``, ``on`` and the SDK's floor (the SDK calls of the same traced turns, made without the
engine) runs once under valgrind, and only the ``--runs`` measured turns are counted (all
threads; start-up and warm-up left out), divided by their steps.

Usage: ``python benchmarks/tracing_overhead.py [--rounds 6] [--runs 60] [--k 10] [--callgrind]``
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
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from strip_observability import strip_tree  # noqa: E402

#: the floor spans' attributes at their start and their end
FLOOR_ATTRIBUTES: dict[str, Any] = {
    "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "m",
    "server.address": "127.0.0.1", "server.port": 8000, "standardagents.step": 1}
FLOOR_END: dict[str, Any] = {"gen_ai.response.model": "m", "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5}


def _sdk_floor(spans: int, as_a_step: bool = False) -> list[list[float]]:
    """[wall, CPU] µs of one bare SDK span (start with six attributes, end) into a
    ``BatchSpanProcessor``: the floor any instrumentation built on the SDK pays per span.

    ``as_a_step``: the SDK calls a traced step cannot do without, per span: started under a
    current parent span, made current (attach, detach), given its closing attributes, ended;
    what the engine adds beyond this is its own. The garbage collector is off while it runs,
    as in the engine's runs."""
    from opentelemetry import context, trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    tracer = provider.get_tracer("floor")
    attrs, end = FLOOR_ATTRIBUTES, FLOOR_END
    parent = tracer.start_span("invoke_agent floor")
    outer = context.attach(trace.set_span_in_context(parent)) if as_a_step else None
    out = []
    gc.collect()
    gc.disable()
    for _ in range(20):
        t0, c0 = time.perf_counter_ns(), time.process_time_ns()
        if as_a_step:
            for _ in range(spans):
                span = tracer.start_span("chat m", kind=trace.SpanKind.CLIENT, attributes=attrs)
                token = context.attach(trace.set_span_in_context(span))
                context.detach(token)
                span.set_attributes(end)
                span.end()
        else:
            for _ in range(spans):
                tracer.start_span("chat m", attributes=attrs).end()
        c1, t1 = time.process_time_ns(), time.perf_counter_ns()
        out.append([(t1 - t0) / 1000 / spans, (c1 - c0) / 1000 / spans])
    gc.enable()
    if outer is not None:
        context.detach(outer)
    parent.end()
    provider.shutdown()
    return out


def _mark() -> None:
    """Where the measured turns begin and end, for ``--callgrind``: valgrind writes its counts
    when this calls ``getloadavg``, which nothing else here calls."""
    os.getloadavg()


def _sdk_turn(k: int, turns: int, warmup: int) -> None:
    """The OpenTelemetry SDK's calls of ``turns`` traced turns of the workload, and nothing
    else: per turn an ``invoke_agent`` span, current throughout; ``k`` + 1 ``chat`` spans and
    ``k`` ``execute_tool`` spans under it, each made current, given its closing attributes and
    ended; the same attributes as the engine's spans carry here. What tracing adds to a turn
    beyond this is the engine's own code."""
    from opentelemetry import context, trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    tracer = provider.get_tracer("floor")
    agent: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bench", "gen_ai.conversation.id": "thr_" + "0" * 32,
        "standardagents.execution.id": "exe_" + "0" * 32, "standardagents.agent.type": "ai_human",
        "standardagents.side": "a", "standardagents.resumed": False}
    agent_end: dict[str, Any] = {"standardagents.outcome": "response", "standardagents.steps": k + 1,
                                 "standardagents.stop_reason": "complete"}
    chat: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "test",
                            "gen_ai.request.model": "instant", "standardagents.model": "default", "standardagents.step": 1}
    tool: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add", "gen_ai.tool.type": "function",
                            "standardagents.tool.origin": "code", "gen_ai.tool.description": "Add two integers.",
                            "gen_ai.tool.call.id": "call_1"}
    tool_end: dict[str, Any] = {"standardagents.tool.status": "success"}
    gc.collect()
    gc.disable()
    for turn in range(turns):
        if turn == warmup:
            _mark()
        parent = tracer.start_span("invoke_agent bench", attributes=agent)
        outer = context.attach(trace.set_span_in_context(parent))
        for step in range(k + 1):
            for name, kind, attrs, end in (("chat instant", trace.SpanKind.CLIENT, chat, {}),
                                           ("execute_tool add", trace.SpanKind.INTERNAL, tool, tool_end)):
                if step == k and kind is trace.SpanKind.INTERNAL:
                    break
                span = tracer.start_span(name, kind=kind, attributes=dict(attrs))
                token = context.attach(trace.set_span_in_context(span))
                context.detach(token)
                span.set_attributes(end)
                span.end()
        parent.set_attributes(agent_end)
        context.detach(outer)
        parent.end()
    _mark()
    gc.enable()
    provider.shutdown()


def _paired(runs: int, k: int) -> dict[str, list[list[float]]]:
    """One process, one runtime; off, on and metrics take turns run by run, so the machine's
    load hits the three alike (the steadier comparison of the three)."""
    from opentelemetry import context, trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from standardagents import observability
    from standardagents.observability import metrics

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    meter = metrics.enable()
    metrics._active = None
    floor_tracer = provider.get_tracer("floor")
    floor_parent = floor_tracer.start_span("invoke_agent floor")
    floor: list[Any] = []  # the token of the floor's parent context while a floor run runs

    def floor_spans() -> None:
        for _ in range(2 if floor else 0):
            span = floor_tracer.start_span("chat m", kind=trace.SpanKind.CLIENT, attributes=FLOOR_ATTRIBUTES)
            token = context.attach(trace.set_span_in_context(span))
            context.detach(token)
            span.set_attributes(FLOOR_END)
            span.end()

    out: dict[str, list[list[float]]] = {"off": [], "on": [], "metrics": [], "sdk in turn": []}
    modes = list(out)

    def configure(i: int) -> None:
        mode = modes[i % len(modes)]
        observability.set_tracer_provider(provider if mode == "on" else None)
        metrics._active = meter if mode == "metrics" else None
        if floor:
            context.detach(floor.pop())
        if mode == "sdk in turn":
            floor.append(context.attach(trace.set_span_in_context(floor_parent)))

    _run_bench(runs, k, configure, lambda i, value: out[modes[i % len(modes)]].append(value), floor_spans)
    return out


def _run_bench(runs: int, k: int, before_run: Any, record: Any, on_request: Any = None) -> None:
    from standardagents import Runtime, define_agent, define_model, define_prompt, define_tool
    from standardagents.project import build_registry
    from standardagents.providers.base import ModelProvider, ModelRequest, ModelResponse
    from standardagents.records import ToolCall
    from standardagents.store import open_store

    class InstantModel(ModelProvider):
        def __init__(self) -> None:
            self.step = 0

        async def request(self, request: ModelRequest) -> ModelResponse:
            if on_request is not None:
                on_request()
            self.step += 1
            if self.step <= k:
                return ModelResponse(tool_calls=[ToolCall(f"call_{self.step}", "add", '{"a": 1, "b": 2}')])
            self.step = 0
            return ModelResponse(text="The sum is 3.")

    @define_tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            registry = build_registry(
                define_agent(name="bench", side_a={"prompt": "bench_prompt", "max_steps": k + 5}),
                define_prompt(name="bench_prompt", prompt="You add numbers.", tools=["add"]),
                define_model(name="default", provider="test", model="instant", stream=False),
                add,
            )
            rt = await Runtime.open(registry, store=open_store(f"sqlite:///{Path(tmp) / 'bench.db'}"))
            rt.use_provider("default", InstantModel())
            try:
                for i in range(max(8, runs // 5)):
                    before_run(i)
                    await rt.run("bench", "add 1 and 2")
                gc.collect()
                gc.disable()
                for i in range(runs):
                    before_run(i)
                    t0, c0 = time.perf_counter_ns(), time.process_time_ns()
                    result = await rt.run("bench", "add 1 and 2")
                    c1, t1 = time.process_time_ns(), time.perf_counter_ns()
                    record(i, [(t1 - t0) / 1000 / (k + 1), (c1 - c0) / 1000 / (k + 1)])
                    assert result.stop_reason == "complete"
                gc.enable()
            finally:
                await rt.aclose()

    asyncio.run(main())


def _worker(mode: str, runs: int, k: int, warmup: int | None = None) -> Any:
    """Run in a fresh process: [wall, CPU] µs per step of each of ``runs`` runs (after
    ``warmup`` runs, by default a fifth of ``runs``, at least 5)."""
    from standardagents import Runtime, define_agent, define_model, define_prompt, define_tool
    from standardagents.project import build_registry
    from standardagents.providers.base import ModelProvider, ModelRequest, ModelResponse
    from standardagents.records import ToolCall
    from standardagents.store import open_store

    if mode == "sdk-span":
        return _sdk_floor(200)
    if mode == "sdk-turn":
        _sdk_turn(k, runs + (5 if warmup is None else warmup), 5 if warmup is None else warmup)
        return []
    if mode == "paired":
        return _paired(runs, k)
    if mode == "on":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        from standardagents import observability

        class Drop(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Drop()))
        observability.set_tracer_provider(provider)
    elif mode == "metrics":
        from standardagents.observability import metrics

        assert metrics.enable() is not None

    class InstantModel(ModelProvider):
        def __init__(self) -> None:
            self.step = 0

        async def request(self, request: ModelRequest) -> ModelResponse:
            self.step += 1
            if self.step <= k:
                return ModelResponse(tool_calls=[ToolCall(f"call_{self.step}", "add", '{"a": 1, "b": 2}')])
            self.step = 0
            return ModelResponse(text="The sum is 3.")

    @define_tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async def main() -> list[list[float]]:
        with tempfile.TemporaryDirectory() as tmp:
            registry = build_registry(
                define_agent(name="bench", side_a={"prompt": "bench_prompt", "max_steps": k + 5}),
                define_prompt(name="bench_prompt", prompt="You add numbers.", tools=["add"]),
                define_model(name="default", provider="test", model="instant", stream=False),
                add,
            )
            rt = await Runtime.open(registry, store=open_store(f"sqlite:///{Path(tmp) / 'bench.db'}"))
            rt.use_provider("default", InstantModel())
            try:
                for _ in range(max(5, runs // 5) if warmup is None else warmup):
                    await rt.run("bench", "add 1 and 2")
                out = []
                gc.collect()
                gc.disable()
                _mark()
                for _ in range(runs):
                    t0, c0 = time.perf_counter_ns(), time.process_time_ns()
                    result = await rt.run("bench", "add 1 and 2")
                    c1, t1 = time.process_time_ns(), time.perf_counter_ns()
                    out.append([(t1 - t0) / 1000 / (k + 1), (c1 - c0) / 1000 / (k + 1)])
                    assert result.stop_reason == "complete"
                _mark()
                gc.enable()
                return out
            finally:
                await rt.aclose()

    return asyncio.run(main())


def _baseline_tree(ref: str | None, into: Path) -> tuple[str, Path]:
    """The ``stripped`` tree: this checkout's source, or the tree at ``ref``, without the
    engine's observability call sites."""
    source = ROOT / "src"
    if ref is not None:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref, "src"],
                                 capture_output=True, check=True).stdout
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(into / "ref", filter="data")
        source = into / "ref" / "src"
    strip_tree(source, into / "src")
    return f"{ref or 'this checkout'} without its observability call sites", into / "src"


def _spawn(mode: str, runs: int, k: int, pythonpath: Path | None) -> list[list[float]]:
    env = dict(os.environ)
    for name in [n for n in env if n.startswith("OTEL_")]:
        del env[name]
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    done = subprocess.run([sys.executable, __file__, "--worker", mode, "--runs", str(runs), "--k", str(k)],
                          env=env, capture_output=True, text=True, check=True,
                          cwd=str(pythonpath.parent) if pythonpath is not None else None)
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--baseline", default=None,
                        help="git ref whose tree, stripped of observability, is the baseline (default: this checkout)")
    parser.add_argument("--callgrind", action="store_true",
                        help="instruction counts per step under valgrind's callgrind instead of times")
    parser.add_argument("--warmup", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--paired-only", action="store_true",
                        help="only the same-process comparison, printed for benchmarks/compare_trees.py")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker, args.runs, args.k, args.warmup)))
        return
    if args.paired_only:
        _print_paired(args.rounds, args.runs, args.k)
        return
    if args.callgrind:
        with tempfile.TemporaryDirectory() as tmp:
            ref, tree = _baseline_tree(args.baseline, Path(tmp))
            _print_instructions(args.runs, args.k, tree, ref)
        return
    with tempfile.TemporaryDirectory() as tmp:
        ref, tree = _baseline_tree(args.baseline, Path(tmp))
        samples: dict[str, list[list[float]]] = {"stripped": [], "off": [], "on": [], "metrics": [], "sdk-span": []}
        paired: dict[str, list[list[float]]] = {"off": [], "on": [], "metrics": [], "sdk in turn": []}
        for _ in range(args.rounds):
            for mode in samples:
                samples[mode].extend(_spawn(mode, args.runs, args.k, tree if mode == "stripped" else None))
            for mode, values in _spawn_paired(args.runs * 4, args.k).items():
                paired[mode].extend(values)
    print(f"workload: {args.k} tool steps + 1 answer per run, SQLite file; {args.rounds} rounds x {args.runs} runs "
          f"per mode; baseline {ref}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for index, what in ((1, "CPU time (process, all threads)"), (0, "wall time")):
        med = {mode: statistics.median(v[index] for v in values) for mode, values in samples.items()}
        pair = {mode: statistics.median(v[index] for v in values) for mode, values in paired.items()}
        print(f"{what}, median µs per step:")
        for mode in samples:
            print(f"  {mode:8s} {med[mode]:8.1f}" + ("   (one bare SDK span, for reference)" if mode == "sdk-span" else ""))
        print(f"  off / stripped = {med['off'] / med['stripped']:.3f}   (separate processes, alternating; target <= 1.03)")
        print("  same process, modes alternating run by run:")
        print(f"    off {pair['off']:.1f}, on {pair['on']:.1f}, metrics {pair['metrics']:.1f}")
        print(f"    on - off      = {pair['on'] - pair['off']:6.1f} µs/step (target < 30); on / off = {pair['on'] / pair['off']:.3f}")
        print(f"    metrics - off = {pair['metrics'] - pair['off']:6.1f} µs/step; metrics / off = {pair['metrics'] / pair['off']:.3f}")
        print(f"    sdk in turn - off = {pair['sdk in turn'] - pair['off']:6.1f} µs/step (the SDK's calls of two spans a step, "
              "made alone amid the turn)")
        print(f"    on - sdk in turn  = {pair['on'] - pair['sdk in turn']:6.1f} µs/step (the engine's own share)")


def _print_paired(rounds: int, runs: int, k: int) -> None:
    """off / on / metrics in one process per round, one line per mode (ratios against off),
    plus the SDK's own floor: two bare spans, what a traced step cannot go below."""
    paired: dict[str, list[list[float]]] = {"off": [], "on": [], "metrics": [], "sdk in turn": []}
    for _ in range(rounds):
        for mode, values in _spawn_paired(runs * 4, k).items():
            paired[mode].extend(values)
    med = {mode: [statistics.median(v[i] for v in values) for i in (0, 1)] for mode, values in paired.items()}
    for label, as_a_step in (("two sdk spans", False), ("two sdk spans as a step", True)):
        floor = _sdk_floor(200, as_a_step)
        med[label] = [2 * statistics.median(v[i] for v in floor) for i in (0, 1)]
    off = med["off"]
    for mode, (wall, cpu) in med.items():
        print(f"{mode}: wall {wall:.1f} µs/step (x{wall / off[0]:.3f})   CPU {cpu:.1f} µs/step (x{cpu / off[1]:.3f})")
    for mode in ("on", "metrics"):
        wall, cpu = med[mode][0] - off[0], med[mode][1] - off[1]
        if mode == "on":
            floor_wall, floor_cpu = med["two sdk spans as a step"]
            print(f"on - off - sdk floor: wall {wall - floor_wall:.1f} µs/step (x{wall / floor_wall:.3f})   "
                  f"CPU {cpu - floor_cpu:.1f} µs/step (x{cpu / floor_cpu:.3f})")
            print(f"on - sdk in turn (the engine's own share): wall {med['on'][0] - med['sdk in turn'][0]:.1f} µs/step   "
                  f"CPU {med['on'][1] - med['sdk in turn'][1]:.1f} µs/step")
        print(f"{mode} - off: wall {wall:.1f} µs/step (x{med[mode][0] / off[0]:.3f})   "
              f"CPU {cpu:.1f} µs/step (x{med[mode][1] / off[1]:.3f})")


def _print_instructions(runs: int, k: int, tree: Path, baseline: str) -> None:
    """Instructions per step of ``stripped``, ``off``, ``on`` and the SDK's floor."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("--callgrind: valgrind is not installed (e.g. apt-get install valgrind); no instruction counts")
        return
    per_step = {mode: _instructions(valgrind, mode, runs, k, tree if mode == "stripped" else None) / (runs * (k + 1))
                for mode in ("stripped", "off", "on", "sdk-turn")}
    stripped, off, on, floor = (per_step[m] for m in ("stripped", "off", "on", "sdk-turn"))
    print(f"instructions per step (callgrind; {runs} turns of {k} tool steps + 1 answer); stripped: {baseline}")
    print(f"  stripped  {stripped:12,.0f}")
    print(f"  off       {off:12,.0f}   off / stripped = {off / stripped:.4f} (target <= 1.03)")
    print(f"  on        {on:12,.0f}   on - off = {on - off:,.0f}; on / off = {on / off:.3f}")
    print(f"  sdk floor {floor:12,.0f}   (the OpenTelemetry SDK's calls of the same traced turns, alone)")
    print(f"  on - off - sdk floor = {on - off - floor:,.0f} per step: the engine's own share of tracing's "
          f"{on - off:,.0f} ({(on - off - floor) / (on - off):.1%})")


def _instructions(valgrind: str, mode: str, runs: int, k: int, pythonpath: Path | None) -> int:
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    env["PYTHONHASHSEED"] = "0"
    # the heartbeat beats by the clock, and valgrind slows the clock's turns fiftyfold: no beat
    # within a run, so that a count per step holds steps' work only
    env["STANDARDAGENTS_EXECUTION_LEASE"] = "86400"
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        # a count is written at each _mark(): the second holds the measured turns alone
        subprocess.run([valgrind, "--tool=callgrind", "--dump-before=getloadavg", f"--callgrind-out-file={out}",
                        sys.executable, __file__, "--worker", mode, "--runs", str(runs), "--k", str(k), "--warmup", "5"],
                       env=env, capture_output=True, text=True, check=True,
                       cwd=str(pythonpath.parent) if pythonpath is not None else None)
        found = re.search(r"^summary: (\d+)$", Path(f"{out}.2").read_text(), re.MULTILINE)
    if found is None:
        raise SystemExit(f"callgrind wrote no summary for {mode}")
    return int(found.group(1))


def _spawn_paired(runs: int, k: int) -> dict[str, list[list[float]]]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    done = subprocess.run([sys.executable, __file__, "--worker", "paired", "--runs", str(runs), "--k", str(k)],
                          env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    main()
