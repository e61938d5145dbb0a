"""The first request each worker of ``serve --workers N`` answers, against its later ones.

A fresh server (PostgreSQL, a database of its own) with ``--workers N`` and the OpenAI wire
stub (no delay) as the model. Once every worker logged that it started, each round opens a new
connection, creates a thread and sends one message with ``?wait=true`` (a turn with one tool
round); the worker that answered is read from the ``x-standardagents-worker`` header. Rounds
go on until every worker answered ``--per-worker`` turns. Printed per worker: its first
turn's latency, the median of its later turns and their ratio (the cold-start pause is the
difference), and the same for the thread creation before it.

    python benchmarks/worker_warmup.py --workers 2 --per-worker 5

Figures on a shared 2-core machine, ``--workers 2 --per-worker 4``, two runs each, other work
running: before workers warmed up, each worker's first turn took 2066-3316 ms against
179-314 ms for its later ones (10.6-13.2x); warmed, 408-811 ms against 215-532 ms (1.1-2.3x).
What is left of the first turn's extra time is not imports (none happen on a warmed worker's
first requests): the first use of each SQL statement, connection and HTTP client.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from serve_procs import WORKER, database, free_port, make_token, serve, stop_group, write_project
from server_load import _start_stub

FILES = {
    "agents/agents/adder.py": """
        from standardagents import define_agent
        adder = define_agent(name="adder", side_a={"prompt": "adder_prompt", "stop_on_response": True})
    """,
    "agents/prompts/adder_prompt.py": """
        from standardagents import define_prompt
        adder_prompt = define_prompt(name="adder_prompt", prompt="Answer briefly.", model="stubbed", tools=["add"])
    """,
    "agents/tools/add.py": """
        from standardagents import define_tool

        @define_tool
        def add(a: int, b: int) -> str:
            '''Add two integers.'''
            return str(a + b)
    """,
}


def _started(log: Path) -> int:
    """How many workers logged that their application started."""
    return log.read_text(errors="replace").count("Application startup complete") if log.exists() else 0


async def _measure(base: str, token: str, workers: int, per_worker: int) -> dict[str, dict[str, list[float]]]:
    headers = {"Authorization": f"Bearer {token}"}
    seen: dict[str, dict[str, list[float]]] = {}
    for _ in range(workers * per_worker * 20):
        if len(seen) >= workers and all(len(s["turn"]) >= per_worker for s in seen.values()):
            break
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
            start = time.perf_counter()
            created = await client.post("/api/threads", json={"agent": "adder"})
            made = time.perf_counter() - start
            created.raise_for_status()
            pid = created.headers[WORKER]
            start = time.perf_counter()
            sent = await client.post(f"/api/threads/{created.json()['id']}/messages", params={"wait": "true"},
                                     json={"content": "Add 1 and 2."})
            took = time.perf_counter() - start
            sent.raise_for_status()
            if sent.headers[WORKER] != pid:
                continue  # the connection was answered by two workers: keep rounds whole
            entry = seen.setdefault(pid, {"create": [], "turn": []})
            entry["create"].append(made * 1000)
            entry["turn"].append(took * 1000)
    return seen


async def amain(args: argparse.Namespace) -> None:
    stub, base_url = _start_stub(0, 1, 600)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            project = write_project(Path(tmp) / "project", base_url, FILES)
            log = Path(tmp) / "serve.log"
            async with database() as url:
                token = await make_token(url)
                port = free_port()
                proc = serve(project, port, url, args.workers, log=log)
                try:
                    end = time.monotonic() + 180
                    while _started(log) < args.workers:
                        if time.monotonic() > end or proc.poll() is not None:
                            raise SystemExit(f"the workers did not start:\n{log.read_text(errors='replace')}")
                        await asyncio.sleep(0.1)
                    seen = await _measure(f"http://127.0.0.1:{port}", token, args.workers, args.per_worker)
                finally:
                    stop_group(proc)
    finally:
        stub.kill()
        stub.wait()
    print(f"serve --workers {args.workers}: first request per worker against its later ones (ms, medians)")
    print(f"{'worker':>8} {'1st turn':>9} {'later':>7} {'ratio':>6} {'1st create':>11} {'later':>7}")
    for pid, s in sorted(seen.items()):
        later_turn = statistics.median(s["turn"][1:]) if len(s["turn"]) > 1 else float("nan")
        later_make = statistics.median(s["create"][1:]) if len(s["create"]) > 1 else float("nan")
        print(f"{pid:>8} {s['turn'][0]:9.1f} {later_turn:7.1f} {s['turn'][0] / later_turn:5.1f}x "
              f"{s['create'][0]:11.1f} {later_make:7.1f}")
    if len(seen) < args.workers:
        print(f"only {len(seen)} of {args.workers} workers answered")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--per-worker", type=int, default=5)
    asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    main()
