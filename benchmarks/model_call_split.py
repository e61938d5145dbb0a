"""Where a streamed model call's client-side CPU goes: the OpenAI-compatible provider's
streamed calls against the OpenAI wire stub (its own process, no delay), one after another,
profiled with cProfile; the profile's own time is grouped by where the code lives (the
``openai`` SDK's request machinery, httpx2 / httpcore2 / h11, the JSON libraries, this
provider's SSE parsing and delta assembly, asyncio, the rest). Also prints the CPU per call
without the profiler, and the bare SDK's for the same two requests.

Usage: ``python benchmarks/model_call_split.py [--calls 300]``
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from server_load import _start_stub
from turn_vs_sdk import TOOL, _sdk_turn

from standardagents.providers.base import ModelRequest, StreamEnd
from standardagents.providers.openai import OpenAIProvider

GROUPS = (
    ("openai SDK (request building, options, response wrapper)", ("/openai/",)),
    ("HTTP (httpx2, httpcore2, h11, anyio, sockets)", ("/httpx2/", "/httpcore2/", "/h11/", "/anyio/", "socket",
                                                       "_ssl", "selector")),
    ("JSON (orjson, json)", ("orjson", "/json/", "json.")),
    ("this provider (body, SSE lines, deltas)", ("providers/openai.py", "providers/base.py")),
    ("asyncio", ("/asyncio/", "_asyncio")),
)


async def _turn(provider: OpenAIProvider) -> None:
    messages = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Add 1 and 2."}]
    end = None
    async for delta in provider.stream(ModelRequest(model="stub-model", messages=messages, tools=[TOOL])):
        if isinstance(delta, StreamEnd):
            end = delta.response
    assert end is not None and end.tool_calls, end
    call = end.tool_calls[0]
    messages += [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "3"}]
    async for delta in provider.stream(ModelRequest(model="stub-model", messages=messages, tools=[TOOL])):
        if isinstance(delta, StreamEnd):
            end = delta.response
    assert end is not None and end.text.startswith("Done after 1"), end


async def amain(args: argparse.Namespace, base_url: str) -> None:
    import openai

    provider = OpenAIProvider(base_url, "sk-bench", max_retries=0)
    sdk = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
    turns = args.calls // 2
    for _ in range(10):
        await _turn(provider)
        await _sdk_turn(sdk)
    figures: dict[str, list[float]] = {"provider": [], "sdk": []}
    for _ in range(3):
        start = time.process_time()
        for _ in range(turns):
            await _turn(provider)
        figures["provider"].append((time.process_time() - start) / (2 * turns))
        start = time.process_time()
        for _ in range(turns):
            await _sdk_turn(sdk)
        figures["sdk"].append((time.process_time() - start) / (2 * turns))
    ours, theirs = min(figures["provider"]), min(figures["sdk"])
    print(f"CPU per streamed call (best of 3 runs of {2 * turns}): provider {ours * 1e6:.0f} µs, "
          f"bare SDK {theirs * 1e6:.0f} µs (x{ours / theirs:.2f})")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(turns):
        await _turn(provider)
    profile.disable()
    await provider.aclose()
    await sdk.close()
    stats = pstats.Stats(profile)
    totals: dict[str, float] = {}
    whole = 0.0
    for (filename, _, name), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{filename} {name}"
        whole += tottime
        group = next((label for label, marks in GROUPS if any(m in where for m in marks)), "the rest")
        totals[group] = totals.get(group, 0.0) + tottime
    print(f"split of the provider's calls under cProfile ({2 * turns} calls, profiled time {whole:.2f} s):")
    for label, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        print(f"  {label}: {seconds / whole:.0%}")
    print("the functions with the most own time:")
    ranked = sorted(stats.stats.items(), key=lambda item: -item[1][2])  # type: ignore[attr-defined]
    for (filename, line, name), (_, _, tottime, _, _) in ranked[:args.top]:
        short = "/".join(filename.split("/")[-2:])
        print(f"  {tottime / whole:5.1%}  {short}:{line} {name}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    stub, base_url = _start_stub(0.0, 1, 600)
    try:
        asyncio.run(amain(args, base_url))
    finally:
        stub.terminate()
        stub.wait(timeout=10)


if __name__ == "__main__":
    main()
