"""How long a turn whose worker is SIGKILLed takes to go on: ``serve --workers 2`` on PostgreSQL.

Each round: a thread, a client following its stream (reconnecting with ``Last-Event-ID``), one
message whose turn calls an idempotent tool and then waits for the model's answer (the stub
takes ``--delay-ms``); once the tool's result arrived, the worker that owns the execution (as
its record in the database says: not necessarily the one that accepted the message) is
SIGKILLed. The supervisor starts a new worker; whichever runtime sees first that the turn's
process is gone (the other worker on its heartbeat, every lease/3 seconds, or the new worker as
it opens) resumes it. Printed: from the kill to the record's takeover (its owner is another
runtime, ``resumedFrom`` the killed one), to the resumed turn's next event and to its
``done``, median and p95 over ``--kills`` rounds.

    python benchmarks/crash_resume.py --kills 10 --lease 30

Needs PostgreSQL (``STANDARDAGENTS_TEST_POSTGRES``, default the local test server).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from serve_procs import (
    WORKER,
    Follower,
    database,
    free_port,
    make_token,
    serve,
    stop_group,
    wait_ready,
)

from standardagents.store import open_store
from standardagents.testing.openai_stub import OpenAIStub, StubReply

FILES = {
    "agents/agents/bench.py": """
        from standardagents import define_agent
        bench = define_agent(name="bench", side_a={"prompt": "bench_prompt", "stop_on_response": True, "max_steps": 6})
    """,
    "agents/prompts/bench_prompt.py": """
        from standardagents import define_prompt
        bench_prompt = define_prompt(name="bench_prompt", prompt="Look it up.", model="stubbed", tools=["lookup"])
    """,
    "agents/tools/lookup.py": """
        from standardagents import define_tool

        @define_tool(idempotent=True)
        def lookup(key: str) -> str:
            '''Look a key up.

            Args:
                key: The key.
            '''
            return "value-of-" + key
    """,
}


def _model(delay: float) -> Any:
    def reply(body: dict[str, Any]) -> StubReply:
        if not any(m.get("role") == "tool" for m in body.get("messages", [])):
            return StubReply(tool_calls=[("lookup", json.dumps({"key": "k"}))])
        return StubReply(text="The value is value-of-k, as looked up.", delay=delay, chunk_size=4)
    return reply


def _quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered):.2f} s, p95 {p95:.2f} s (min {ordered[0]:.2f}, max {ordered[-1]:.2f})"


async def _both_workers(base: str, headers: dict[str, str], dead: set[str]) -> None:
    """Until two live workers answer (fresh connections land on either)."""
    seen: set[str] = set()
    for _ in range(3000):
        try:
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=5) as probe:
                pid = (await probe.get("/api/agents")).headers[WORKER]
            if pid not in dead:
                seen.add(pid)
        except httpx.TransportError:
            pass
        if len(seen) >= 2:
            return
        await asyncio.sleep(0.05)
    raise SystemExit("the killed worker was not replaced")


def _pid(owner: str) -> int:
    """The process of an owner id (``host:pid:nonce``)."""
    return int(owner.split(":")[-2])


async def _owner(store: Any, execution_id: str) -> str:
    record = await store.get_execution(execution_id)
    if record is None:
        raise SystemExit(f"execution {execution_id} has no record")
    return str(record.state.get("owner", ""))


async def _taken_over(store: Any, execution_id: str, killed: str) -> float:
    """When the execution's record names another owner, resumed from the killed one (polled)."""
    for _ in range(30_000):
        record = await store.get_execution(execution_id)
        if record is not None and record.state.get("owner") != killed:
            if record.state.get("resumedFrom") != killed:
                raise SystemExit(f"execution {execution_id} changed hands but not from {killed}: {record.state}")
            return time.perf_counter()
        await asyncio.sleep(0.01)
    raise SystemExit(f"execution {execution_id} was not taken over")


async def _rounds(base: str, headers: dict[str, str], kills: int, store: Any) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"claim": [], "event": [], "done": []}
    dead: set[str] = set()
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        for n in range(kills):
            await _both_workers(base, headers, dead)
            thread = (await client.post("/api/threads", json={"agent": "bench"})).json()["id"]
            follower = Follower(base, headers, thread)
            try:
                await asyncio.wait_for(follower.opened.wait(), 30)
                sent = await client.post(f"/api/threads/{thread}/messages", json={"content": "Look k up."})
                sent.raise_for_status()
                execution_id = sent.json()["executionId"]
                await asyncio.wait_for(follower.wait_for("tool_call_done"), 60)
                owner = await _owner(store, execution_id)
                pid = _pid(owner)
                killed_at = time.perf_counter()
                os.kill(pid, signal.SIGKILL)
                dead.add(str(pid))
                claimed = await _taken_over(store, execution_id, owner)
                first = await asyncio.wait_for(follower.wait_for("message_chunk", killed_at), 300)
                done = await asyncio.wait_for(follower.wait_for("done", killed_at), 300)
                for key, at in (("claim", claimed), ("event", first), ("done", done)):
                    times[key].append(at - killed_at)
                accepted = "" if sent.headers[WORKER] == str(pid) else " (another worker had accepted the message)"
                print(f"  kill {n + 1}: worker {pid}{accepted}; taken over after {claimed - killed_at:.2f} s, "
                      f"next event after {first - killed_at:.2f} s, done after {done - killed_at:.2f} s", flush=True)
            finally:
                await follower.close()
    return times


async def _run(args: argparse.Namespace) -> None:
    with OpenAIStub(_model(args.delay_ms / 1000)) as stub, tempfile.TemporaryDirectory(prefix="sa-crash-") as tmp:
        from serve_procs import write_project

        project = write_project(Path(tmp) / "project", stub.base_url, FILES)
        async with database() as url:
            token = await make_token(url)
            headers = {"Authorization": f"Bearer {token}"}
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            proc = serve(project, port, url, 2, {"STANDARDAGENTS_EXECUTION_LEASE": str(args.lease)},
                         log=Path(tmp) / "server.log")
            try:
                await wait_ready(base, headers)
                print(f"serve --workers 2 on PostgreSQL, lease {args.lease:g} s, model answer {args.delay_ms:g} ms")
                store = open_store(url)
                await store.open()
                try:
                    times = await _rounds(base, headers, args.kills, store)
                finally:
                    await store.close()
            finally:
                stop_group(proc)
    print(f"SIGKILL -> record taken over by a live runtime: {_quantiles(times['claim'])}")
    print(f"SIGKILL -> resumed turn's first text chunk:     {_quantiles(times['event'])}")
    print(f"SIGKILL -> resumed turn's done:                 {_quantiles(times['done'])}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--lease", type=float, default=30.0, help="STANDARDAGENTS_EXECUTION_LEASE for the server")
    parser.add_argument("--delay-ms", type=float, default=300.0, help="the model's latency for its answer")
    args = parser.parse_args(argv)
    if not 1 <= args.kills <= 200:
        parser.error("--kills must be between 1 and 200")
    asyncio.run(_run(args))


if __name__ == "__main__":
    main()
