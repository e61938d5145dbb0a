"""Faults on a schedule while turns run: does every accepted turn complete exactly once?

Two ``standardagents serve`` processes share one PostgreSQL database, each pid 1 of a PID
namespace of its own (``unshare --pid``, as two containers with one hostname would be; without
``unshare`` they share this one, and a stalled server's turns then wait for it instead of
moving), each reaching the database through a TCP proxy this script controls. Turns are sent
to both, one every ``--interval`` seconds, while this schedule runs (``L`` = the lease):

- after 2 s, server A is killed (SIGKILL), then started again;
- 2 s after it is ready, server B is stopped (SIGSTOP) for 1.5 L, then continued;
- 2 s later, server A is cut off from the database (its proxy drops every connection) for 1.5 L.

Each turn asks for a non-idempotent tool (it appends its call's tag to a ledger) and then
answers. Every thread is followed by an SSE client that reconnects with ``Last-Event-ID``.
Once every accepted turn has ended, it prints:

- accepted turns, completed once, run twice (more than one final reply), lost (no reply);
- tool runs per call (the ledger: at most one is the promise), and calls run more than once;
- ``done`` events per execution in the event log (exactly one is the promise);
- event-id order violations seen by the stream clients (an id not above the one before);
- for turns taken over from a faulted server: the time from the fault to the takeover
  (``resumedAt`` on the record) and to the turn's end, median and p95.

Usage: ``python benchmarks/fault_injection.py [--turns 60] [--interval 0.15] [--lease 2] [--model-delay 0.3]``
(PostgreSQL at ``STANDARDAGENTS_TEST_POSTGRES``, default the local test server). Bounded: the
stub and servers run on loopback only and are stopped at the end; every wait has a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_procs import EXE, Follower, database, free_port, make_token, wait_ready, write_project

from standardagents.testing.proxy import CuttableProxy

PROJECT = {
    "agents/agents/clerk.py": """
        from standardagents import define_agent
        clerk = define_agent(name="clerk", side_a={"prompt": "clerk_prompt", "stop_on_response": True,
                                                   "max_steps": 6})
    """,
    "agents/prompts/clerk_prompt.py": """
        from standardagents import define_prompt
        clerk_prompt = define_prompt(name="clerk_prompt", prompt="File it.", model="stubbed", tools=["record"])
    """,
    "agents/tools/record.py": """
        import asyncio, os

        from standardagents import define_tool


        @define_tool
        async def record(tag: str) -> str:
            '''Write the tag to the ledger (a side effect: not safe to repeat).

            Args:
                tag: The call's tag.
            '''
            await asyncio.sleep(0.3)
            with open(os.environ["SA_LEDGER"], "a") as ledger:
                ledger.write(tag + "\\n")
            return "recorded " + tag
    """,
}


def _model(delay: float) -> Any:
    from standardagents.testing.openai_stub import StubReply

    def respond(body: dict[str, Any]) -> StubReply:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return StubReply(text=f"filed: {last['content']}", delay=delay)
        tag = str(last["content"]).split()[-1]
        return StubReply(tool_calls=[("record", json.dumps({"tag": tag}))], delay=delay)

    return respond


class Server:
    """One ``serve`` process (pid 1 of a PID namespace of its own where ``unshare`` works)."""

    def __init__(self, name: str, project: Path, database_url: str, env: dict[str, str], log: Path,
                 namespaced: bool) -> None:
        self.name = name
        self.project = project
        self.database_url = database_url
        self.env = env
        self.log = log
        self.namespaced = namespaced
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [str(EXE), "serve", str(self.project), "--port", str(self.port), "--database-url", self.database_url]
        if self.namespaced:
            command = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", *command]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(command, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        if self.proc is not None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)
            self.proc.wait(20)


def _namespaces_work() -> bool:
    unshare = shutil.which("unshare")
    return unshare is not None and subprocess.run([unshare, "--pid", "--fork", "--mount-proc", "true"],
                                                  capture_output=True, check=False).returncode == 0


def _quantiles(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered):.2f} s, p95 {p95:.2f} s (n={len(ordered)})"


async def _schedule(a: Server, b: Server, proxies: dict[str, CuttableProxy], lease: float, headers: dict[str, str],
                    faults: list[tuple[float, str]]) -> None:
    """Kill A (and start it again), stop B past the lease, cut A off from the database; each
    fault once turns run on both servers."""
    await asyncio.sleep(2.0)
    faults.append((time.time(), a.name))
    a.kill()
    await asyncio.sleep(0.5)
    a.start()
    await wait_ready(a.base, headers)
    await asyncio.sleep(2.0)
    faults.append((time.time(), b.name))
    b.signal(signal.SIGSTOP)
    await asyncio.sleep(1.5 * lease)
    b.signal(signal.SIGCONT)
    await asyncio.sleep(2.0)
    faults.append((time.time(), a.name))
    proxies[a.name].drop()
    await asyncio.sleep(1.5 * lease)
    proxies[a.name].restore()
    await asyncio.sleep(2.0)


async def _run(args: argparse.Namespace) -> None:
    from standardagents.store import open_store
    from standardagents.testing.openai_stub import OpenAIStub

    namespaced = _namespaces_work()
    work = Path(tempfile.mkdtemp(prefix="sa-faults-"))
    ledger = work / "ledger.txt"
    ledger.touch()
    async with database() as db_url:
        url = httpx.URL(db_url.replace("postgresql://", "http://", 1))
        upstream = (url.host, url.port or 5432)
        with OpenAIStub(_model(args.model_delay)) as stub:
            project = write_project(work / "project", stub.base_url, PROJECT)
            token = await make_token(db_url)
            headers = {"Authorization": f"Bearer {token}"}
            env = {**os.environ, "STUB_API_KEY": "sk-bench", "SA_LEDGER": str(ledger),
                   "STANDARDAGENTS_EXECUTION_LEASE": str(args.lease)}
            proxies = {name: CuttableProxy(upstream) for name in ("A", "B")}
            servers: dict[str, Server] = {}
            for name, proxy in proxies.items():
                await proxy.start()
                through = db_url.replace(f"{url.host}:{url.port or 5432}", f"127.0.0.1:{proxy.port}", 1)
                servers[name] = Server(name, project, through, env, work / f"{name}.log", namespaced)
                servers[name].start()
            a, b = servers["A"], servers["B"]
            store = open_store(db_url)
            await store.open()
            followers: list[Follower] = []
            accepted: dict[str, tuple[str, str]] = {}  # execution id -> (thread id, tag)
            refused = 0
            faults: list[tuple[float, str]] = []
            try:
                for server in servers.values():
                    await wait_ready(server.base, headers)
                chaos = asyncio.create_task(_schedule(a, b, proxies, args.lease, headers, faults))
                async with httpx.AsyncClient(headers=headers, timeout=10) as client:
                    i = 0
                    while not chaos.done() or i < args.turns:
                        i += 1
                        await asyncio.sleep(args.interval)
                        order = random.sample(list(servers.values()), 2)
                        for attempt, server in enumerate(order):  # a client tries the other server too
                            tag = f"t{i}.{attempt}"
                            try:
                                thread = await client.post(f"{server.base}/api/threads", json={"agent": "clerk"})
                                if thread.status_code != 201:
                                    continue
                                thread_id = thread.json()["id"]
                                sent = await client.post(f"{server.base}/api/threads/{thread_id}/messages",
                                                         json={"content": f"file {tag}"})
                                if sent.status_code == 202:
                                    accepted[sent.json()["executionId"]] = (thread_id, tag)
                                    followers.append(Follower(order[-1 - attempt].base, headers, thread_id))
                                    break
                            except httpx.TransportError:
                                continue
                        else:
                            refused += 1
                await chaos
                deadline = time.monotonic() + args.timeout
                while time.monotonic() < deadline:
                    open_ = [e for e in accepted if (r := await store.get_execution(e)) is None
                             or r.status in ("running", "waiting")]
                    if not open_:
                        break
                    await asyncio.sleep(0.5)
                await asyncio.sleep(1.0)  # the last events reach the followers
                await _report(args, store, accepted, refused, ledger, followers, faults, namespaced)
            finally:
                for follower in followers:
                    await follower.close()
                for server in servers.values():
                    server.kill()
                for proxy in proxies.values():
                    await proxy.aclose()
                await store.close()


async def _report(args: argparse.Namespace, store: Any, accepted: dict[str, tuple[str, str]], refused: int,
                  ledger: Path, followers: list[Any], faults: list[tuple[float, str]], namespaced: bool) -> None:
    runs = collections.Counter(await asyncio.to_thread(lambda: ledger.read_text().split()))
    once = twice = lost = 0
    dones_off: list[str] = []
    takeover: list[float] = []
    to_end: list[float] = []
    for execution_id, (thread_id, tag) in accepted.items():
        messages = await store.list_messages(thread_id)
        finals = [m for m in messages if m.role == "assistant" and not m.tool_calls and m.status != "error"
                  and (m.content or "").startswith("filed")]
        if len(finals) == 1:
            once += 1
        elif len(finals) > 1:
            twice += 1
        else:
            lost += 1
        _floor, events = await store.read_events(thread_id, 0)
        dones = [e for e in events if e[1] == "done" and e[2].get("executionId") == execution_id]
        if len(dones) != 1:
            dones_off.append(f"{execution_id}: {len(dones)}")
        record = await store.get_execution(execution_id)
        if record is not None and isinstance(record.state.get("resumedAt"), int):
            resumed_at = record.state["resumedAt"] / 1000
            fault = max((t for t, _ in faults if t <= resumed_at), default=None)
            if fault is not None:
                takeover.append(resumed_at - fault)
                if dones:
                    to_end.append(dones[0][3] - fault)
        del tag
    calls = [runs.get(tag, 0) for _e, (_t, tag) in accepted.items()]
    violations = 0
    kinds: collections.Counter[str] = collections.Counter()
    for follower in followers:
        for (_a, x, before), (_b, y, after) in itertools.pairwise(follower.events):
            if y <= x:
                violations += 1
                kinds[f"{after['type']} after {before['type']}"] += 1
    print(f"fault injection: {args.turns} turns, lease {args.lease} s, model delay {args.model_delay} s, "
          f"servers in {'separate PID namespaces' if namespaced else 'this PID namespace'}")
    print(f"  accepted turns              {len(accepted)} (refused by both servers: {refused})")
    print(f"  completed once              {once}")
    print(f"  run twice                   {twice}")
    print(f"  lost                        {lost}")
    print(f"  tool runs per call          max {max(calls, default=0)}; calls run more than once: "
          f"{sum(1 for c in calls if c > 1)}; calls not run: {sum(1 for c in calls if c == 0)}")
    print(f"  done per execution          executions without exactly one: {len(dones_off)}"
          + (f" ({', '.join(dones_off[:5])})" if dones_off else ""))
    print(f"  event-id order violations   {violations} (over {len(followers)} streams)"
          + (f": {', '.join(f'{k} x{n}' for k, n in kinds.most_common())}" if kinds else ""))
    print(f"  fault -> takeover           {_quantiles(takeover)}")
    print(f"  fault -> turn's end         {_quantiles(to_end)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=60, help="at least this many turns (more while faults run)")
    parser.add_argument("--interval", type=float, default=0.15, help="seconds between two turns sent")
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--model-delay", type=float, default=0.3)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the turns to end")
    args = parser.parse_args(argv)
    asyncio.run(_run(args))


if __name__ == "__main__":
    main()
