"""Experiments at scale and what online scoring costs a turn.

1. ``--cases`` cases (default 1,000) of the quickstart's assistant against the offline test
   model, ``--concurrency`` at a time (default 20), on a SQLite file: cases per second, the
   median turn (``send`` to its end) and the median runner overhead per case (creating the
   thread, reading the execution's record back, scoring), and their ratio; then
   ``--sequential`` cases (default 100) one at a time, where nothing waits on another case.
2. ``--turns`` turns (default 200) each way, one after another in alternating blocks of ten:
   without online scoring, and with a 10% sample scored (``contains`` and a latency budget)
   after each ``done``: the median turn of each and their ratio.

Run: ``.venv/bin/python benchmarks/evals.py [--cases N] [--concurrency N] [--turns N]``.
Figures are printed from one run; see docs/evals.md for those measured here.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from standardagents import Runtime
from standardagents.evals import Budget, Contains, define_dataset, run_experiment
from standardagents.evals.online import OnlineRule, attach_online
from standardagents.evals.runner import RunOptions

ROOT = Path(__file__).resolve().parents[1]


async def experiment(folder: Path, cases: int, concurrency: int) -> None:
    rt = await Runtime.open(ROOT / "examples" / "quickstart", database_url=f"sqlite:///{folder / f'cases{concurrency}.db'}",
                            take_over=False)
    try:
        dataset = define_dataset("bench", "assistant", [
            {"name": f"case_{i}", "input": f"What is {i} * 7?", "expect": {"contains": str(i * 7)}}
            for i in range(cases)])
        began = time.perf_counter()
        report = await run_experiment(rt, [dataset], RunOptions(concurrency=concurrency))
        elapsed = time.perf_counter() - began
    finally:
        await rt.aclose()
    turn = statistics.median(c["latencyMs"] for c in report["cases"])
    overhead = statistics.median(c["overheadMs"] for c in report["cases"])
    print(f"experiment: {cases} cases, concurrency {concurrency}: {report['passed']} passed, "
          f"{cases / elapsed:.1f} cases/s ({elapsed:.2f} s)")
    print(f"  median turn {turn:.2f} ms, median runner overhead {overhead:.2f} ms per case "
          f"({overhead / turn:.2f} of the turn)")


async def online(folder: Path, turns: int) -> None:
    rt = await Runtime.open(ROOT / "examples" / "quickstart", database_url=f"sqlite:///{folder / 'online.db'}",
                            take_over=False)
    try:
        async def timed(n: int) -> list[float]:
            out = []
            for i in range(n):
                thread = await rt.create_thread("assistant")
                started = time.perf_counter()
                await rt.send(thread.id, f"What is {i} * 3?")
                out.append((time.perf_counter() - started) * 1000)
            return out

        await timed(10)  # warm up
        plain: list[float] = []
        scored: list[float] = []
        total = 0
        # blocks of ten turns, alternating, so the database's growth and the machine's load
        # fall on both sides alike
        for block in range(max(1, turns // 10)):
            plain.extend(await timed(10))
            scoring = attach_online(rt, [OnlineRule("assistant", [Contains("3"), Budget(5000, "latency_ms")],
                                                    rate=0.1)], seed=block)
            scored.extend(await timed(10))
            await scoring.detach()
            total += scoring.scored
    finally:
        await rt.aclose()
    a, b = statistics.median(plain), statistics.median(scored)
    print(f"online scoring at 10%: {turns} turns each; median turn {a:.2f} ms without, {b:.2f} ms with "
          f"(ratio {b / a:.2f}); {total} turns scored")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--sequential", type=int, default=100, help="cases run one at a time")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="standardagents-bench-evals-"))
    try:
        asyncio.run(experiment(folder, args.cases, args.concurrency))
        asyncio.run(experiment(folder, args.sequential, 1))  # the same without waiting on each other
        asyncio.run(online(folder, args.turns))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
