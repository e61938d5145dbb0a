"""Where a model call's client-side CPU goes, for the OpenAI-compatible and the Anthropic
providers, streamed and not, against the bare SDK making the same requests.

Workload: a wire stub in its own process (the OpenAI stub, or the Anthropic Messages API stub;
no delay) asks for the ``add`` tool once, then answers: a "turn" is two calls, one after
another. For each provider and mode (``stream``: ``provider.stream``; ``request``:
``provider.request``) this prints

* the CPU per call without a profiler, ours and the bare SDK's (``openai.AsyncOpenAI`` or
  ``anthropic.AsyncAnthropic`` with typed objects, as a user of the SDK would read them):
  the median of ``--runs`` runs, ours and the SDK's alternating, and the ratio;
* with ``--callgrind N``: instructions per call counted by valgrind's callgrind over N calls
  (deterministic, unlike CPU time on a loaded machine), ours and the SDK's, and the ratio;
* the provider's calls under cProfile, own time grouped by where the code lives (the SDK's
  request machinery, httpx2 / httpcore2 / h11, JSON, this provider's code, asyncio, the rest),
  and the functions with the most own time.

Usage: ``python benchmarks/model_call_split.py [--calls 300] [--runs 5]
[--providers openai,anthropic] [--modes stream,request] [--callgrind 40]``. To measure
another tree, run this file with ``PYTHONPATH=<tree>/src``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from server_load import _start_stub
from turn_vs_sdk import TOOL, _sdk_turn

from standardagents.providers.base import ModelProvider, ModelRequest, StreamEnd

PROVIDERS = ("openai", "anthropic")
MODES = ("stream", "request")
GROUPS = (
    ("SDK (request building, options, response wrapper, typed objects)", ("/openai/", "/anthropic/", "pydantic")),
    ("HTTP (aiohttp, yarl, multidict, httpx2, httpcore2, h11, anyio, sockets)",
     ("/aiohttp/", "/yarl/", "/multidict/", "/httpx2/", "/httpcore2/", "/h11/", "/anyio/", "socket", "_ssl",
      "selector")),
    ("JSON (orjson, json)", ("orjson", "/json/", "json.")),
    ("this provider (body, SSE lines, deltas)", ("providers/",)),
    ("asyncio", ("/asyncio/", "_asyncio")),
)
ANSWER = "Done after 1 tool results."
MESSAGES: list[dict[str, Any]] = [{"role": "system", "content": "Answer briefly."},
                                  {"role": "user", "content": "Add 1 and 2."}]
Turn = Callable[[], Awaitable[None]]


# -- the Anthropic stub, in its own process -----------------------------------------------------

def _serve_anthropic() -> None:
    """The Messages API stub with the OpenAI stub's workload: the tool once, then the answer."""
    from standardagents.testing.anthropic_stub import AnthropicReply, AnthropicStub

    def respond(body: dict[str, Any]) -> AnthropicReply:
        seen = sum(1 for m in body["messages"] if m["role"] == "user" for b in m["content"]
                   if isinstance(b, dict) and b.get("type") == "tool_result")
        if body.get("tools") and not seen:
            return AnthropicReply(tool_calls=[("add", json.dumps({"a": 1, "b": 2}))], chunk_size=64)
        return AnthropicReply(text=f"Done after {seen} tool results.", chunk_size=64)

    with AnthropicStub(respond) as stub:
        print(f"READY {stub.base_url}", flush=True)
        threading.Event().wait(3600)


def _start_anthropic_stub() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve-anthropic"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"the Anthropic stub did not start: {line!r}")
    return proc, line.split(" ", 1)[1]


# -- one turn: ours and the SDK's ---------------------------------------------------------------

async def _provider_call(provider: ModelProvider, messages: list[dict[str, Any]], mode: str) -> Any:
    request = ModelRequest(model="stub-model", messages=messages, tools=[TOOL])
    if mode == "request":
        return await provider.request(request)
    end = None
    async for delta in provider.stream(request):
        if isinstance(delta, StreamEnd):
            end = delta.response
    return end


async def _provider_turn(provider: ModelProvider, mode: str) -> None:
    messages = list(MESSAGES)
    end = await _provider_call(provider, messages, mode)
    assert end is not None and end.tool_calls, end
    call = end.tool_calls[0]
    messages += [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "3"}]
    end = await _provider_call(provider, messages, mode)
    assert end is not None and end.text == ANSWER, end


async def _openai_sdk_request_turn(client: Any) -> None:
    messages: list[Any] = list(MESSAGES)
    first = await client.chat.completions.create(model="stub-model", messages=messages, tools=[TOOL])
    calls = first.choices[0].message.tool_calls
    assert calls, first
    messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
        for c in calls]})
    messages += [{"role": "tool", "tool_call_id": c.id, "content": "3"} for c in calls]
    second = await client.chat.completions.create(model="stub-model", messages=messages, tools=[TOOL])
    assert second.choices[0].message.content == ANSWER, second


ANTHROPIC_TOOL = {"name": "add", "description": "Add two integers.",
                  "input_schema": TOOL["function"]["parameters"]}  # type: ignore[index]


async def _anthropic_sdk_turn(client: Any, mode: str) -> None:
    messages: list[Any] = [{"role": "user", "content": "Add 1 and 2."}]
    common = {"model": "stub-model", "max_tokens": 4096, "system": "Answer briefly.", "tools": [ANTHROPIC_TOOL]}
    uses: list[dict[str, Any]] = []
    text: list[str] = []
    for round_ in (0, 1):
        uses, text = [], []
        if mode == "request":
            message = await client.messages.create(messages=messages, **common)
            for block in message.content:
                if block.type == "tool_use":
                    uses.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
                elif block.type == "text":
                    text.append(block.text)
        else:
            pieces: list[str] = []
            async for event in await client.messages.create(messages=messages, stream=True, **common):
                if event.type == "content_block_start" and event.content_block.type == "tool_use":
                    uses.append({"type": "tool_use", "id": event.content_block.id,
                                 "name": event.content_block.name})
                elif event.type == "content_block_delta":
                    if event.delta.type == "input_json_delta":
                        pieces.append(event.delta.partial_json)
                    elif event.delta.type == "text_delta":
                        text.append(event.delta.text)
            for use in uses:
                use["input"] = json.loads("".join(pieces) or "{}")
        if round_ == 0:
            assert uses, "the stub asked for no tool"
            messages += [{"role": "assistant", "content": uses},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": u["id"], "content": "3"}
                                                      for u in uses]}]
    assert "".join(text) == ANSWER, text


def _clients(provider_name: str, mode: str, base_url: str) -> tuple[ModelProvider, Any, Turn, Turn]:
    """Our provider, the bare SDK client, and a turn of each."""
    if provider_name == "openai":
        import openai

        from standardagents.providers.openai import OpenAIProvider

        ours: ModelProvider = OpenAIProvider(base_url, "sk-bench", max_retries=0)
        sdk: Any = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)

        async def sdk_turn() -> None:
            await (_sdk_turn(sdk) if mode == "stream" else _openai_sdk_request_turn(sdk))
    else:
        import anthropic

        from standardagents.providers.anthropic import AnthropicProvider

        ours = AnthropicProvider(base_url, "sk-bench", max_retries=0)
        sdk = anthropic.AsyncAnthropic(base_url=base_url, api_key="sk-bench", max_retries=0)

        async def sdk_turn() -> None:
            await _anthropic_sdk_turn(sdk, mode)

    async def our_turn() -> None:
        await _provider_turn(ours, mode)

    return ours, sdk, our_turn, sdk_turn


async def _close(ours: ModelProvider, sdk: Any) -> None:
    await ours.aclose()
    await sdk.close()


# -- measurements -------------------------------------------------------------------------------

async def _cpu_per_call(turn: Turn, turns: int) -> float:
    start = time.process_time()
    for _ in range(turns):
        await turn()
    return (time.process_time() - start) / (2 * turns)


async def _measure(provider_name: str, mode: str, base_url: str, args: argparse.Namespace) -> None:
    ours, sdk, our_turn, sdk_turn = _clients(provider_name, mode, base_url)
    turns = max(1, args.calls // 2)
    for _ in range(10):
        await our_turn()
        await sdk_turn()
    figures: dict[str, list[float]] = {"ours": [], "sdk": []}
    for _ in range(args.runs):
        figures["ours"].append(await _cpu_per_call(our_turn, turns))
        figures["sdk"].append(await _cpu_per_call(sdk_turn, turns))
    mine, theirs = statistics.median(figures["ours"]), statistics.median(figures["sdk"])
    print(f"[{provider_name} {mode}] CPU per call (median of {args.runs} runs of {2 * turns}): "
          f"provider {mine * 1e6:.0f} µs, bare SDK {theirs * 1e6:.0f} µs (x{mine / theirs:.2f})")
    profile = cProfile.Profile(time.process_time)  # CPU, not the time spent waiting in epoll
    profile.enable()
    for _ in range(turns):
        await our_turn()
    profile.disable()
    await _close(ours, sdk)
    _print_profile(profile, provider_name, mode, 2 * turns, args.top)


def _print_profile(profile: cProfile.Profile, provider_name: str, mode: str, calls: int, top: int) -> None:
    stats = pstats.Stats(profile)
    totals: dict[str, float] = {}
    whole = 0.0
    for (filename, _, name), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{filename} {name}"
        whole += tottime
        group = next((label for label, marks in GROUPS if any(m in where for m in marks)), "the rest")
        totals[group] = totals.get(group, 0.0) + tottime
    print(f"[{provider_name} {mode}] split of the provider's calls under cProfile ({calls} calls, "
          f"profiled time {whole:.2f} s):")
    for label, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        print(f"  {label}: {seconds / whole:.0%}")
    if top:
        print(f"[{provider_name} {mode}] the functions with the most own time:")
        ranked = sorted(stats.stats.items(), key=lambda item: -item[1][2])  # type: ignore[attr-defined]
        for (filename, line, name), (_, _, tottime, _, _) in ranked[:top]:
            short = "/".join(filename.split("/")[-2:])
            print(f"  {tottime / whole:5.1%}  {short}:{line} {name}")


def _mark() -> None:
    """Where measured calls begin and end, for ``--callgrind``: valgrind writes its counts when
    this calls ``getloadavg``, which nothing else here calls."""
    os.getloadavg()


async def _callgrind_worker(provider_name: str, mode: str, base_url: str, calls: int) -> None:
    """Under valgrind: warm both clients up, then our calls and the SDK's between marks."""
    ours, sdk, our_turn, sdk_turn = _clients(provider_name, mode, base_url)
    turns = max(1, calls // 2)
    for _ in range(5):
        await our_turn()
        await sdk_turn()
    _mark()
    for _ in range(turns):
        await our_turn()
    _mark()
    for _ in range(turns):
        await sdk_turn()
    _mark()
    await _close(ours, sdk)


def _instructions(provider_name: str, mode: str, base_url: str, calls: int) -> tuple[float, float]:
    """Instructions per call, ours and the SDK's, counted by callgrind in a fresh process."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(["valgrind", "--tool=callgrind", "--dump-before=getloadavg", f"--callgrind-out-file={out}",
                        sys.executable, __file__, "--callgrind-worker", provider_name, mode, base_url,
                        "--calls", str(calls)], env=env, capture_output=True, text=True, check=True)
        counts = []
        for part in (2, 3):
            found = re.search(r"^summary: (\d+)$", Path(f"{out}.{part}").read_text(), re.MULTILINE)
            if found is None:
                raise SystemExit(f"callgrind wrote no summary for {provider_name} {mode}")
            counts.append(int(found.group(1)) / (2 * max(1, calls // 2)))
    return counts[0], counts[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--providers", default=",".join(PROVIDERS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--callgrind", type=int, default=0, metavar="CALLS",
                        help="count instructions per call under callgrind over this many calls")
    parser.add_argument("--no-cpu", action="store_true", help="skip the CPU and profile figures")
    parser.add_argument("--serve-anthropic", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--callgrind-worker", nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_anthropic:
        _serve_anthropic()
        return
    if args.callgrind_worker:
        name, mode, url = args.callgrind_worker
        asyncio.run(_callgrind_worker(name, mode, url, args.calls))
        return
    providers = [p for p in args.providers.split(",") if p]
    modes = [m for m in args.modes.split(",") if m]
    stubs = {}
    try:
        for name in providers:
            stubs[name] = _start_stub(0.0, 1, 3600) if name == "openai" else _start_anthropic_stub()
        for name in providers:
            for mode in modes:
                base_url = stubs[name][1]
                if not args.no_cpu:
                    asyncio.run(_measure(name, mode, base_url, args))
                if args.callgrind:
                    mine, theirs = _instructions(name, mode, base_url, args.callgrind)
                    print(f"[{name} {mode}] instructions per call (callgrind, {args.callgrind} calls): "
                          f"provider {mine:,.0f}, bare SDK {theirs:,.0f} (x{mine / theirs:.2f})", flush=True)
    finally:
        for proc, _ in stubs.values():
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
