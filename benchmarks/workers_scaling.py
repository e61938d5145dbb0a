"""Turns per second with ``serve --workers 2`` against ``--workers 1``, on PostgreSQL, same load.

Each run: a fresh server on a database of its own, ``--threads`` threads, one streamed message
each (``POST ...?stream=true``) at once, against the OpenAI wire stub in a process of its own
(``--delay-ms`` per model request, ``--tool-rounds`` tool rounds per turn). A turn counts
only when its final reply is stored (read back from the thread after the run), whatever its
stream said. The two configurations alternate for ``--rounds`` rounds (so drift of a shared
machine hits both); printed: every run's turns/s, the medians and their ratio.

    python benchmarks/workers_scaling.py --threads 200 --rounds 3

The load generator, the stub, PostgreSQL and the workers share the machine's cores: on two
cores the workers get less than two cores' worth between them. Each run also prints how busy
the whole machine was while the turns ran (``/proc/stat``): when it is near every core already
with one worker, a second worker has no core to run on, and the ratio says so rather than
anything about the workers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from serve_procs import WORKER, database, free_port, make_token, serve, stop_group, wait_ready
from server_load import _start_stub, _write_project, run_turn


async def _both_workers(base: str, headers: dict[str, str], workers: int) -> set[int]:
    """The pids of the workers, once each answered."""
    seen: set[str] = set()
    for _ in range(3000):
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=5) as probe:
            seen.add((await probe.get("/api/agents")).headers[WORKER])
        if len(seen) >= workers:
            return {int(p) for p in seen}
        await asyncio.sleep(0.05)
    raise SystemExit("not every worker answered")


def _cpu_seconds(pids: set[int]) -> float:
    """User + system CPU time the processes used so far."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _machine_busy() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine so far, every core summed (``/proc/stat``;
    I/O wait counts as idle): what PostgreSQL, the stub and everything else took too."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    user, nice, system, idle, iowait, irq, softirq = fields
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, (idle + iowait) / tick


async def _replied(base: str, headers: dict[str, str], thread_ids: list[str]) -> int:
    """How many of the threads hold their turn's final reply (an assistant message with text and
    no calls); read on new connections (the server may close the kept-alive ones of the run)."""
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        replied = 0
        for thread_id in thread_ids:
            response = await client.get(f"/api/threads/{thread_id}/messages")
            response.raise_for_status()
            replied += any(m["role"] == "assistant" and m.get("content") and not m.get("tool_calls")
                           for m in response.json()["messages"])
        return replied


async def _one_run(project: Path, workers: int, threads: int, request_timeout: float) -> float:
    async with database() as url:
        token = await make_token(url)
        headers = {"Authorization": f"Bearer {token}"}
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        proc = serve(project, port, url, workers)
        try:
            await wait_ready(base, headers)
            pids = await _both_workers(base, headers, workers)
            limits = httpx.Limits(max_connections=threads + 10, max_keepalive_connections=threads + 10)
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=request_timeout, limits=limits) as client:
                ids = []
                for _ in range(threads + 2 * workers):
                    r = await client.post("/api/threads", json={"agent": "bench"})
                    r.raise_for_status()
                    ids.append(r.json()["id"])
                warm, ids = ids[:2 * workers], ids[2 * workers:]
                await asyncio.gather(*(run_turn(client, t) for t in warm))  # imports, model connections
                start, cpu, own = time.perf_counter(), _cpu_seconds(pids), time.process_time()
                busy, idle = _machine_busy()
                turns = await asyncio.gather(*(run_turn(client, t) for t in ids), return_exceptions=True)
                wall = time.perf_counter() - start
                cpu, own = _cpu_seconds(pids) - cpu, time.process_time() - own
                busy, idle = (b - a for a, b in zip((busy, idle), _machine_busy(), strict=True))
            replied = await _replied(base, headers, ids)
            broken = sum(1 for t in turns if isinstance(t, BaseException))
            rate = replied / wall
            print(f"  --workers {workers}: {rate:6.1f} turns/s ({replied} of {threads} turns replied in {wall:.2f} s"
                  + (f", {broken} streams broke" if broken else "")
                  + f"; CPU: workers {cpu:.1f} s = {cpu / wall:.2f} cores, {replied / cpu:.0f} turns per worker "
                  f"CPU second, load generator {own:.1f} s; "
                  f"machine {busy / wall:.2f} of {os.cpu_count()} cores busy, {idle / wall:.2f} idle)", flush=True)
            return rate
        finally:
            stop_group(proc)


async def _run(args: argparse.Namespace, project: Path) -> None:
    rates: dict[int, list[float]] = {1: [], 2: []}
    for n in range(args.rounds):
        print(f"round {n + 1}:")
        for workers in ((1, 2) if n % 2 == 0 else (2, 1)):
            rates[workers].append(await _one_run(project, workers, args.threads, args.timeout))
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    spread = {w: f"{min(r):.1f}-{max(r):.1f}" for w, r in rates.items()}
    print(f"median turns/s: --workers 1 {one:.1f} (range {spread[1]}), --workers 2 {two:.1f} (range {spread[2]})")
    print(f"ratio of medians (2 workers / 1): {two / one:.2f}x; per-round ratios: "
          + ", ".join(f"{b / a:.2f}" for a, b in zip(rates[1], rates[2], strict=True)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay-ms", type=float, default=50.0, help="the model's latency per request")
    parser.add_argument("--tool-rounds", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    if not 1 <= args.threads <= 2000:
        parser.error("--threads must be between 1 and 2000")
    stub, base_url = _start_stub(args.delay_ms, args.tool_rounds, 3600)
    try:
        with tempfile.TemporaryDirectory(prefix="sa-scale-") as tmp:
            project = Path(tmp) / "project"
            _write_project(project, base_url, args.tool_rounds)
            print(f"PostgreSQL, {args.threads} concurrent streamed turns, model {args.delay_ms:g} ms per request, "
                  f"{args.tool_rounds} tool round(s)")
            asyncio.run(_run(args, project))
    finally:
        stub.terminate()
        stub.wait(10)


if __name__ == "__main__":
    main()
