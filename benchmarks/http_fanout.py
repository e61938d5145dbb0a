"""HTTP fan-out benchmark: many concurrent tool-calling runs against a 50 ms model endpoint.

The OpenAI wire stub runs in another process on 127.0.0.1 and answers each request after
``--delay-ms``; every run makes ``--tool-rounds`` tool-call rounds against a trivial ``add``
tool and then gets its answer, so a run is ``tool_rounds + 1`` model requests and the ideal
batch wall time is ``(tool_rounds + 1) * delay``. For each client (our ``OpenAIProvider``,
and the bare ``openai`` SDK as the reference) and each mode (streamed or not) it reports the
median over ``--reps`` batches (after one warm-up) of the wall time, its ratio to the ideal,
and the client's CPU milliseconds per run (``time.process_time``).

    python benchmarks/http_fanout.py --n 200 --reps 3

``run_one(provider, stream)`` is one run; swap it to measure a fuller stack on the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import openai

from standardagents.providers import ModelRequest, OpenAIProvider, StreamEnd

__all__ = ["main", "run_one", "run_one_sdk"]

TOOLS: list[dict[str, Any]] = [{
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"]},
    },
}]
MAX_REQUESTS = 8  # a run never makes more than this many requests, whatever the server says


def _add(arguments: str) -> str:
    args = json.loads(arguments or "{}")
    return str(int(args.get("a", 0)) + int(args.get("b", 0)))


async def run_one(provider: OpenAIProvider, stream: bool) -> None:
    """One run through ``OpenAIProvider``: call ``add`` until the model answers with text."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Add 1 and 2, three times."}]
    for _ in range(MAX_REQUESTS):
        request = ModelRequest(model="stub-model", messages=messages, tools=TOOLS)
        if stream:
            response = None
            async for delta in provider.stream(request):
                if isinstance(delta, StreamEnd):
                    response = delta.response
            assert response is not None
        else:
            response = await provider.request(request)
        if not response.tool_calls:
            return
        messages.append({"role": "assistant", "content": response.text or None,
                         "tool_calls": [c.to_dict() for c in response.tool_calls]})
        for call in response.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": _add(call.arguments)})
    raise RuntimeError("run did not finish within the request bound")


async def run_one_sdk(client: openai.AsyncOpenAI, stream: bool) -> None:
    """The same run on the bare ``openai`` SDK (the reference)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Add 1 and 2, three times."}]
    for _ in range(MAX_REQUESTS):
        calls: list[dict[str, Any]] = []
        if stream:
            chunks = await client.chat.completions.create(
                model="stub-model", messages=messages, tools=TOOLS, stream=True,  # type: ignore[arg-type]
                stream_options={"include_usage": True})
            by_index: dict[int, dict[str, Any]] = {}
            async for chunk in chunks:
                for choice in chunk.choices:
                    for piece in choice.delta.tool_calls or []:
                        entry = by_index.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                        if piece.id:
                            entry["id"] = piece.id
                        if piece.function and piece.function.name:
                            entry["name"] = piece.function.name
                        if piece.function and piece.function.arguments:
                            entry["arguments"] += piece.function.arguments
            calls = [by_index[i] for i in sorted(by_index)]
        else:
            completion = await client.chat.completions.create(
                model="stub-model", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
            for tc in completion.choices[0].message.tool_calls or []:
                fn = tc.function  # type: ignore[union-attr]
                calls.append({"id": tc.id, "name": fn.name, "arguments": fn.arguments})
        if not calls:
            return
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls]})
        for c in calls:
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": _add(c["arguments"])})
    raise RuntimeError("run did not finish within the request bound")


def start_stub(delay_ms: float, tool_rounds: int, max_seconds: float) -> tuple[subprocess.Popen[str], str]:
    """Start the stub in its own process and return it with its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "standardagents.testing.openai_stub", "--port", "0",
         "--delay-ms", str(delay_ms), "--tool-rounds", str(tool_rounds),
         "--max-seconds", str(max_seconds)],
        stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"stub did not start: {line!r}")
    return proc, line.split()[1]


async def measure(run: Callable[[], Awaitable[None]], n: int, reps: int) -> dict[str, float]:
    """Median wall seconds and CPU ms per run over ``reps`` batches of ``n`` concurrent runs."""
    await asyncio.gather(*(run() for _ in range(n)))  # warm-up: connections, imports, caches
    walls, cpus = [], []
    for _ in range(reps):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(run() for _ in range(n)))
        walls.append(time.perf_counter() - wall0)
        cpus.append((time.process_time() - cpu0) * 1000.0 / n)
    return {"wall_s": statistics.median(walls), "cpu_ms_per_run": statistics.median(cpus)}


async def open_engine(base_url: str, stream: bool, workdir: str) -> Any:
    """The whole engine on the same load: threads, tools and every message on a SQLite file."""
    from standardagents import Runtime, define_agent, define_model, define_prompt, define_tool
    from standardagents.project import build_registry
    from standardagents.store import open_store

    @define_tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    registry = build_registry(
        define_agent(name="bench", side_a={"prompt": "bench_prompt", "max_steps": MAX_REQUESTS}),
        define_prompt(name="bench_prompt", prompt="You add numbers.", tools=["add"]),
        define_model(name="default", provider="openai", model="stub-model", base_url=base_url, stream=stream,
                     max_retries=0, timeout=60.0),
        add,
    )
    return await Runtime.open(registry, store=open_store(f"sqlite:///{workdir}/fanout-{int(stream)}.db"))


async def bench(base_url: str, n: int, reps: int, ideal: float) -> list[dict[str, Any]]:
    import tempfile

    rows: list[dict[str, Any]] = []
    workdir = tempfile.mkdtemp(prefix="fanout-")
    for stream in (False, True):
        rt = await open_engine(base_url, stream, workdir)
        try:
            async def engine_run(rt: Any = rt) -> None:
                result = await rt.run("bench", "Add 1 and 2, three times.")
                if result.stop_reason != "complete":
                    raise RuntimeError(f"run ended with {result.stop_reason}: {result.error}")

            result = await measure(engine_run, n, reps)
        finally:
            await rt.aclose()
        rows.append({"client": "standardagents Runtime (engine + SQLite)", "stream": stream, **result})
        provider = OpenAIProvider(base_url, api_key="sk-bench", timeout=60.0)
        try:
            result = await measure(lambda p=provider, s=stream: run_one(p, s), n, reps)  # type: ignore[misc]
        finally:
            await provider.aclose()
        rows.append({"client": "standardagents OpenAIProvider", "stream": stream, **result})
        client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", timeout=60.0, max_retries=0)
        try:
            result = await measure(lambda c=client, s=stream: run_one_sdk(c, s), n, reps)  # type: ignore[misc]
        finally:
            await client.close()
        rows.append({"client": "bare openai SDK", "stream": stream, **result})
    for row in rows:
        row["wall_over_ideal"] = row["wall_s"] / ideal
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=200, help="concurrent runs per batch")
    parser.add_argument("--reps", type=int, default=3, help="measured batches (after one warm-up)")
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--tool-rounds", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=300.0, help="stub lifetime bound")
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    args = parser.parse_args(argv)
    ideal = (args.tool_rounds + 1) * args.delay_ms / 1000.0
    proc, base_url = start_stub(args.delay_ms, args.tool_rounds, args.max_seconds)
    try:
        rows = asyncio.run(asyncio.wait_for(bench(base_url, args.n, args.reps, ideal), args.max_seconds))
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    if args.json:
        for row in rows:
            print(json.dumps({"n": args.n, "ideal_s": ideal, **row}))
        return
    print(f"{args.n} concurrent runs x {args.tool_rounds + 1} requests, {args.delay_ms:g} ms per request, "
          f"ideal {ideal:.2f} s, median of {args.reps} batches")
    print("| client | mode | wall s | wall/ideal | client CPU ms/run |")
    print("|---|---|---|---|---|")
    for row in rows:
        mode = "stream" if row["stream"] else "non-stream"
        print(f"| {row['client']} | {mode} | {row['wall_s']:.3f} | {row['wall_over_ideal']:.2f} | "
              f"{row['cpu_ms_per_run']:.2f} |")


if __name__ == "__main__":
    main()
