"""run_code benchmark: cold and warm start of one call, and calls per second on this machine.

* cold: a new sandbox process (Deno starts, Pyodide loads) plus one call, as the first
  ``run_code`` of a server with no warm process pays it;
* warm: one call on a process started ahead (the pool keeps one ready), first use;
* reuse: one call on a process that already ran code for the same thread;
* throughput: ``--calls`` calls, ``--concurrency`` at a time (default 2, for 2 cores), each
  on a process that served the same thread before.

Each figure is the median of ``--reps`` repetitions (throughput: one run). Python and
JavaScript are measured separately. The Pyodide cache must be warm
(``python -m standardagents.sandbox warm``).

    python benchmarks/run_code.py --reps 3 --calls 40
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from standardagents.sandbox import SandboxPool

SNIPPETS = {
    "python": "sum(i * i for i in range(1000))",
    "javascript": "let s = 0; for (let i = 0; i < 1000; i++) s += i * i; export default s;",
}


async def _cold(language: str) -> float:
    pool = SandboxPool(size=0)
    try:
        started = time.perf_counter()
        result, _ = await pool.run(SNIPPETS[language], language=language, scope="bench")
        assert result.status == "completed", result.error
        return time.perf_counter() - started
    finally:
        await pool.close()


async def _warm(language: str) -> tuple[float, float]:
    pool = SandboxPool(size=1)
    try:
        await pool.warm()
        started = time.perf_counter()
        first, _ = await pool.run(SNIPPETS[language], language=language, scope="bench")
        warm = time.perf_counter() - started
        started = time.perf_counter()
        again, _ = await pool.run(SNIPPETS[language], language=language, scope="bench")
        reuse = time.perf_counter() - started
        assert first.status == again.status == "completed"
        return warm, reuse
    finally:
        await pool.close()


async def _throughput(language: str, calls: int, concurrency: int) -> float:
    pool = SandboxPool(size=0, max_idle=concurrency, max_running=concurrency)
    try:
        # one warm process per concurrent slot, all serving the same thread
        await asyncio.gather(*(pool.run(SNIPPETS[language], language=language, scope="bench")
                               for _ in range(concurrency)))
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate:
                result, _ = await pool.run(SNIPPETS[language], language=language, scope="bench")
                assert result.status == "completed", result.error

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(calls)))
        return calls / (time.perf_counter() - started)
    finally:
        await pool.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    print(f"cpus: {os.cpu_count()}, reps: {args.reps}, calls: {args.calls}, concurrency: {args.concurrency}")
    for language in SNIPPETS:
        cold = [await _cold(language) for _ in range(args.reps)]
        warm_pairs = [await _warm(language) for _ in range(args.reps)]
        rate = await _throughput(language, args.calls, args.concurrency)
        print(f"{language:10}  cold start + call {statistics.median(cold) * 1000:8.0f} ms   "
              f"warm call {statistics.median(w for w, _ in warm_pairs) * 1000:6.1f} ms   "
              f"reused call {statistics.median(r for _, r in warm_pairs) * 1000:6.1f} ms   "
              f"{rate:6.1f} calls/s")


if __name__ == "__main__":
    asyncio.run(main())
