"""Server load benchmark: many concurrent threads streaming replies through the HTTP server.

The OpenAI wire stub runs in one process on 127.0.0.1 as the model (a models file in a
temporary project points ``base_url`` at it); the server runs in another process with
uvicorn on 127.0.0.1; this process creates ``--threads`` threads and sends one message to
each at once with ``POST /api/threads/{id}/messages?stream=true``. It reports messages per
second (every message the turns stored, and turns per second) and the stream latency after
the POST: to the first event and to the first text chunk (median and p95).

    python benchmarks/server_load.py --threads 200 --delay-ms 50 --tool-rounds 1

Everything is bounded: loopback only, the stub exits after ``--max-seconds``, every request
has a timeout, and both child processes are stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from serve_procs import free_port, make_token, wait_ready

__all__ = ["main", "run_turn"]


@dataclass
class Turn:
    first_event: float
    first_text: float | None
    total: float
    messages: int
    stop_reason: str | None = None


def _write_project(root: Path, base_url: str, tool_rounds: int) -> None:
    files = {
        "agents/models/stub.py": f"""
            from standardagents import define_model
            stub = define_model(name="stub", provider="openai", model="stub-model",
                                base_url="{base_url}", api_key_env="STUB_API_KEY")
        """,
        "agents/prompts/bench_prompt.py": f"""
            from standardagents import define_prompt
            bench_prompt = define_prompt(name="bench_prompt", prompt="Answer briefly.", model="stub",
                                         tools={["add"] if tool_rounds else []!r})
        """,
        "agents/tools/add.py": """
            from standardagents import define_tool

            @define_tool
            def add(a: int = 1, b: int = 2) -> str:
                '''Add two integers.

                Args:
                    a: The first number.
                    b: The second number.
                '''
                return str(a + b)
        """,
        "agents/agents/bench.py": """
            from standardagents import define_agent
            bench = define_agent(name="bench", type="ai_human",
                                 side_a={"prompt": "bench_prompt", "stop_on_response": True, "max_steps": 6})
        """,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())


def _start_stub(delay_ms: float, tool_rounds: int, max_seconds: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "standardagents.testing.openai_stub", "--port", "0", "--delay-ms", str(delay_ms),
         "--tool-rounds", str(tool_rounds), "--max-seconds", str(max_seconds)],
        stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"the stub did not start: {line!r}")
    return proc, line.split(" ", 1)[1]


#: put before the server's start when it is profiled: SIGUSR1 starts a cProfile of the main
#: thread's CPU time (not wall time), SIGUSR2 stops it and writes the stats to the given file
_PROFILED = """
import cProfile, os, signal, time
_profile = cProfile.Profile(time.thread_time)
signal.signal(signal.SIGUSR1, lambda *_: _profile.enable())
signal.signal(signal.SIGUSR2, lambda *_: (_profile.disable(), _profile.dump_stats({out!r} + ".part"),
                                          os.replace({out!r} + ".part", {out!r})))
"""


def _start_server(root: Path, database_url: str, port: int, profile: str | None = None) -> subprocess.Popen[str]:
    """``run_server`` in a process of its own; with ``profile`` (a file), profiled on SIGUSR1/SIGUSR2."""
    code = ("from standardagents.server import run_server\n"
            f"run_server({str(root)!r}, host='127.0.0.1', port={port}, database_url={database_url!r}, log_level='warning')")
    if profile is not None:
        code = _PROFILED.format(out=profile) + code
    env = {**os.environ, "STUB_API_KEY": "sk-bench"}
    return subprocess.Popen([sys.executable, "-c", code], env=env, text=True)


async def run_turn(client: httpx.AsyncClient, thread_id: str) -> Turn:
    """Send one message with ``?stream=true`` and time its events until ``done``."""
    start = time.perf_counter()
    first_event = first_text = None
    messages = 0
    stop_reason = None
    async with client.stream("POST", f"/api/threads/{thread_id}/messages", params={"stream": "true"},
                             json={"content": "Add 1 and 2."}) as response:
        response.raise_for_status()
        buffer = ""
        async for text in response.aiter_text():
            now = time.perf_counter() - start
            buffer += text
            while "\n\n" in buffer:
                frame, buffer = buffer.split("\n\n", 1)
                data = next((line[6:] for line in frame.splitlines() if line.startswith("data: ")), None)
                if data is None:
                    continue
                event = json.loads(data)
                if first_event is None:
                    first_event = now
                if event["type"] == "message_chunk" and first_text is None:
                    first_text = now
                elif event["type"] == "message_created":
                    messages += 1
                elif event["type"] == "done":
                    stop_reason = event["data"].get("stopReason")
    total = time.perf_counter() - start
    return Turn(first_event if first_event is not None else total, first_text, total, messages, stop_reason)


def _ms(values: list[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms"


def _cpu_of(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads), from /proc (0 where there is none)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            line = next(x for x in f if x.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None
    return int(line.split()[1]) / 1024


async def _load(base: str, token: str, n: int, request_timeout: float, server_pid: int = 0) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    await wait_ready(base, headers)
    rss = _rss_mib(server_pid)
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=request_timeout, limits=limits) as client:
        threads = []
        for _ in range(n):
            r = await client.post("/api/threads", json={"agent": "bench"})
            r.raise_for_status()
            threads.append(r.json()["id"])
        warm = await client.post("/api/threads", json={"agent": "bench"})  # a thread of its own, so every
        warm.raise_for_status()                                             # measured turn is a first turn
        await run_turn(client, warm.json()["id"])  # warm-up: imports, provider connection
        start, cpu = time.perf_counter(), _cpu_of(server_pid)
        turns = await asyncio.gather(*(run_turn(client, tid) for tid in threads))
        wall, cpu = time.perf_counter() - start, _cpu_of(server_pid) - cpu
    messages = sum(t.messages for t in turns)
    reasons = collections.Counter(t.stop_reason for t in turns)
    odd = collections.Counter(t.messages for t in turns if t.messages != 4)
    print(f"threads: {n}, wall time {wall:.2f} s")
    print(f"messages created: {messages} ({messages / wall:.0f} messages/s), turns {n / wall:.1f}/s")
    print(f"turns by stop reason: {dict(reasons)}" + (f"; turns with other than 4 messages: {dict(odd)}" if odd else ""))
    print(f"first event after POST: {_ms([t.first_event for t in turns])}")
    print(f"first text chunk after POST: {_ms([t.first_text for t in turns if t.first_text is not None])}")
    print(f"whole turn: {_ms([t.total for t in turns])}")
    if server_pid:
        print(f"server CPU per turn: {cpu / n * 1000:.2f} ms; server RSS when ready: "
              + (f"{rss:.1f} MiB" if rss is not None else "n/a"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--delay-ms", type=float, default=50.0, help="the model's latency per request")
    parser.add_argument("--tool-rounds", type=int, default=1, help="tool-call rounds per turn before the answer")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--max-seconds", type=float, default=180.0)
    args = parser.parse_args(argv)
    if not 1 <= args.threads <= 2000:
        parser.error("--threads must be between 1 and 2000")
    with tempfile.TemporaryDirectory(prefix="sa-bench-") as tmp:
        root = Path(tmp) / "project"
        database_url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        stub, base_url = _start_stub(args.delay_ms, args.tool_rounds, args.max_seconds)
        server = None
        try:
            _write_project(root, base_url, args.tool_rounds)
            token = asyncio.run(make_token(database_url, root))
            port = free_port()
            server = _start_server(root, database_url, port)
            print(f"model stub {base_url} (delay {args.delay_ms:g} ms, {args.tool_rounds} tool rounds); "
                  f"server http://127.0.0.1:{port}")
            asyncio.run(asyncio.wait_for(_load(f"http://127.0.0.1:{port}", token, args.threads, args.timeout,
                                               server.pid),
                                         args.max_seconds))
        finally:
            for proc in (server, stub):
                if proc is not None:
                    proc.terminate()
                    try:
                        proc.wait(10)
                    except subprocess.TimeoutExpired:
                        proc.kill()


if __name__ == "__main__":
    main()
