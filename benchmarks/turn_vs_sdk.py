"""A whole turn's CPU against the bare ``openai`` SDK's two streamed calls, on one stub in one run.

Workload: the OpenAI wire stub (its own process, ``--delay-ms`` per request) asks for the
``add`` tool once, then answers: a turn is two streamed model calls and one tool call.
Three modes, each in a fresh process, alternating round by round so machine load hits them
alike; each round runs ``--turns`` turns at once (after one warm-up turn) and reports the
CPU (user + system, all threads) of the process doing the work, divided by the turns:

* ``sdk``: ``openai.AsyncOpenAI`` making just the two streamed calls of a turn (the tool call
  assembled from the deltas, the result appended, the answer read): the client's floor;
* ``inproc``: ``Runtime.open`` on a project whose model is the stub, SQLite file store,
  ``rt.run(...)``: engine, store, events, the model calls;
* ``served``: ``run_server`` in its own process (SQLite, auth, event log, metrics as
  ``serve`` has them), turns sent with ``POST /api/threads/{id}/messages?stream=true``
  from this process; the server process's CPU is counted.

Figures are medians over rounds, with each mode's ratio to ``sdk``.

Usage: ``python benchmarks/turn_vs_sdk.py [--rounds 3] [--turns 50] [--at-once N] [--delay-ms 50]``
(``--at-once 1``: one turn after another, the server's cost at concurrency 1, its idle work
between turns included; ``--profile FILE``: where a served turn's CPU goes)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from serve_procs import free_port, make_token, wait_ready
from server_load import _start_server, _start_stub, _write_project, run_turn

MODES = ("sdk", "inproc", "served")
TOOL = {"type": "function", "function": {
    "name": "add", "description": "Add two integers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}


def _cpu_of(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


async def _sdk_turn(client: Any) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Answer briefly."},
                                      {"role": "user", "content": "Add 1 and 2."}]
    calls: dict[int, dict[str, Any]] = {}
    stream = await client.chat.completions.create(model="stub-model", messages=messages, tools=[TOOL], stream=True,
                                                  stream_options={"include_usage": True})
    async for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or ():
                call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                if delta.id:
                    call["id"] = delta.id
                if delta.function is not None:
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
    assert calls, "the stub asked for no tool"
    messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
        for c in calls.values()]})
    for c in calls.values():
        args = json.loads(c["arguments"] or "{}")
        messages.append({"role": "tool", "tool_call_id": c["id"], "content": str(args.get("a", 1) + args.get("b", 2))})
    text = []
    stream = await client.chat.completions.create(model="stub-model", messages=messages, tools=[TOOL], stream=True,
                                                  stream_options={"include_usage": True})
    async for chunk in stream:
        for choice in chunk.choices:
            if choice.delta.content:
                text.append(choice.delta.content)
    assert "".join(text).startswith("Done after 1"), text


#: where a profiled served turn's CPU goes: the first group whose marker is in a function's file
#: takes its own time; the standard library's and builtins' time goes to the group of the
#: caller that called them (up the call edges, in proportion to each edge's time)
GROUPS = (
    ("HTTP server (uvicorn, httptools)", ("/uvicorn/", "/httptools/")),
    ("routing and middleware (Starlette, ours)", ("/starlette/", "server/errors.py", "observability/http.py",
                                                 "server/api.py", "server/state.py")),
    ("auth", ("server/auth.py", "server/authorization.py")),
    ("SSE out (streams)", ("server/streams.py", "/orjson")),
    ("event log", ("/eventlog.py",)),
    ("metrics and tracing", ("observability/", "/prometheus_client/", "/opentelemetry/")),
    ("store (SQLAlchemy, sqlite3)", ("/store/", "/sqlalchemy/", "/aiosqlite/", "/alembic/")),
    ("anyio (Starlette task groups, the model client's HTTP)", ("/anyio/", "/sniffio/")),
    ("model client (provider, SDK, HTTP)", ("/providers/", "/openai/", "/httpx", "/httpcore", "/h11/",
                                            "/sniffio/", "/certifi/", "/pydantic")),
    ("services (webhooks, schedules, effects)", ("/service/", "engine/effects.py", "engine/recovery.py")),
    ("engine and event bus", ("/standardagents/",)),
)


def _group_of(file: str) -> str | None:
    for name, markers in GROUPS:
        if any(m in file for m in markers):
            return name
    return None


def profile_split(path: str, turns: int) -> list[tuple[str, float]]:
    """CPU ms per turn by :data:`GROUPS` from a cProfile stats file (see ``--profile``)."""
    import pstats

    stats: dict[Any, Any] = pstats.Stats(path).stats  # type: ignore[attr-defined]
    totals: dict[str, float] = {}

    def charge(func: Any, amount: float, depth: int) -> None:
        group = _group_of(func[0])
        callers = stats.get(func, (0, 0, 0, 0, {}))[4]
        edge_total = sum(edge[2] for edge in callers.values())
        if group is None and depth < 8 and edge_total > 0:
            for caller, edge in callers.items():
                charge(caller, amount * edge[2] / edge_total, depth + 1)
            return
        key = group or "asyncio and the rest of the standard library"
        totals[key] = totals.get(key, 0.0) + amount

    for func, (_cc, _nc, own, _cum, _callers) in stats.items():
        charge(func, own, 0)
    return sorted(((k, v * 1000 / turns) for k, v in totals.items()), key=lambda kv: -kv[1])


async def _limited(coros: list[Any], at_once: int) -> list[Any]:
    """The coroutines' results, at most ``at_once`` of them running at a time."""
    gate = asyncio.Semaphore(at_once)

    async def one(coro: Any) -> Any:
        async with gate:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros))


async def _worker(mode: str, base_url: str, turns: int, profile: str | None = None, at_once: int = 0) -> float:
    """CPU seconds per turn of the process doing ``mode``'s work."""
    if mode == "sdk":
        import openai

        client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
        await _sdk_turn(client)
        before = time.process_time()
        await _limited([_sdk_turn(client) for _ in range(turns)], at_once or turns)
        spent = time.process_time() - before
        await client.close()
        return spent / turns
    root = Path(tempfile.mkdtemp(prefix="turn-vs-sdk-"))
    _write_project(root, base_url, 1)
    os.environ["STUB_API_KEY"] = "sk-bench"
    if mode == "inproc":
        from standardagents import Runtime

        rt = await Runtime.open(root, database_url=f"sqlite:///{root / 'bench.db'}")
        try:
            first = await rt.run("bench", "Add 1 and 2.")
            assert first.stop_reason is not None
            before = time.process_time()
            results = await _limited([rt.run("bench", "Add 1 and 2.") for _ in range(turns)], at_once or turns)
            spent = time.process_time() - before
            assert all(r.stop_reason == results[0].stop_reason for r in results)
        finally:
            await rt.aclose()
        return spent / turns
    database_url = f"sqlite:///{root / 'bench.db'}"
    token = await make_token(database_url)
    port = free_port()
    server = _start_server(root, database_url, port, profile)
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"}
    try:
        await wait_ready(base, headers)
        limits = httpx.Limits(max_connections=turns + 10, max_keepalive_connections=turns + 10)
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=120, limits=limits) as http:
            threads = []
            for _ in range(turns + 1):
                r = await http.post("/api/threads", json={"agent": "bench"})
                r.raise_for_status()
                threads.append(r.json()["id"])
            warm = await run_turn(http, threads.pop())
            assert warm.stop_reason is not None
            if profile is not None:
                server.send_signal(signal.SIGUSR1)
            before = _cpu_of(server.pid)
            done = await _limited([run_turn(http, t) for t in threads], at_once or turns)
            spent = _cpu_of(server.pid) - before
            if profile is not None:
                server.send_signal(signal.SIGUSR2)
                await _file_written(profile)
            assert all(t.messages == 4 for t in done), [t.messages for t in done]
    finally:
        server.terminate()
        server.wait(timeout=30)
    return spent / turns


async def _file_written(path: str, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not await asyncio.to_thread(os.path.exists, path):
        if time.monotonic() > deadline:
            raise SystemExit(f"the server wrote no profile to {path}")
        await asyncio.sleep(0.05)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--at-once", type=int, default=0,
                        help="at most this many turns running at a time (default: all of them; 1: one after another)")
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--baseline", default=None,
                        help="another tree's src folder: its inproc and served turns run beside these")
    parser.add_argument("--profile", default=None, metavar="FILE",
                        help="profile the server during one served round (its CPU time, under cProfile), write the "
                             "stats to FILE and print where a turn's CPU goes; slows that round several times over")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps({"cpu": asyncio.run(_worker(args.worker, args.base_url, args.turns, args.profile,
                                                     args.at_once))}))
        return
    if args.profile:
        _print_profile(args)
        return
    modes = [m for m in args.modes.split(",") if m]
    stub, base_url = _start_stub(args.delay_ms, 1, 3600)
    runs = [(m, None) for m in modes]
    if args.baseline:
        runs += [(m, args.baseline) for m in modes if m != "sdk"]
    samples: dict[str, list[float]] = {m if src is None else f"baseline {m}": [] for m, src in runs}
    try:
        for _ in range(args.rounds):
            for mode, src in runs:
                env = dict(os.environ)
                if src is not None:
                    env["PYTHONPATH"] = src
                out = subprocess.run([sys.executable, __file__, "--worker", mode, "--base-url", base_url,
                                      "--turns", str(args.turns), "--at-once", str(args.at_once)],
                                     capture_output=True, text=True, timeout=900,
                                     env=env)
                if out.returncode != 0:
                    raise SystemExit(f"{mode} failed:\n{out.stderr[-3000:]}")
                name = mode if src is None else f"baseline {mode}"
                samples[name].append(json.loads(out.stdout.strip().splitlines()[-1])["cpu"])
    finally:
        stub.terminate()
        stub.wait(timeout=10)
    floor = statistics.median(samples["sdk"]) if samples.get("sdk") else None
    print(f"turns: {args.turns}, at once: {args.at_once or args.turns}, model delay {args.delay_ms:g} ms, "
          f"rounds {args.rounds}")
    for mode in samples:
        median = statistics.median(samples[mode])
        ratio = f" (x{median / floor:.2f} of sdk)" if floor else ""
        low, high = min(samples[mode]) * 1000, max(samples[mode]) * 1000
        print(f"{mode}: CPU {median * 1000:.2f} ms/turn{ratio}, rounds {low:.2f}-{high:.2f}")


def _print_profile(args: argparse.Namespace) -> None:
    """One served round under cProfile, then the split of a turn's CPU by :data:`GROUPS`."""
    profile = str(Path(args.profile).resolve())
    with contextlib.suppress(FileNotFoundError):
        os.unlink(profile)
    stub, base_url = _start_stub(args.delay_ms, 1, 3600)
    try:
        out = subprocess.run([sys.executable, __file__, "--worker", "served", "--base-url", base_url,
                              "--turns", str(args.turns), "--at-once", str(args.at_once), "--profile", profile],
                             capture_output=True, text=True,
                             timeout=900)
    finally:
        stub.terminate()
        stub.wait(timeout=10)
    if out.returncode != 0:
        raise SystemExit(f"served failed:\n{out.stderr[-3000:]}")
    cpu = json.loads(out.stdout.strip().splitlines()[-1])["cpu"] * 1000
    split = profile_split(profile, args.turns)
    total = sum(ms for _, ms in split)
    print(f"served under cProfile: {args.turns} turns, {args.at_once or args.turns} at once, CPU {cpu:.2f} ms/turn (profiled; the profiler "
          f"inflates every Python call, so read the shares, not the milliseconds)")
    for name, ms in split:
        print(f"  {name:48s} {ms:7.2f} ms  {ms / total:6.1%}")


if __name__ == "__main__":
    main()
