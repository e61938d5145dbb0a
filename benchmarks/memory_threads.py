"""Memory of a long-lived runtime over many threads, each run once.

Runs N threads (default 10,000) one turn each with the offline ``test`` model (which calls
the prompt's tool once, then answers: three converted messages per turn) on a SQLite file and prints the process's resident memory after 1,000, 5,000 and N threads, with the
sizes of the runtime's per-message and per-thread maps. Flat figures mean a server's memory
does not grow with the number of threads it has served.

Usage: ``python benchmarks/memory_threads.py [--threads 10000]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import tempfile
from pathlib import Path

from standardagents import Runtime, define_agent, define_model, define_prompt, define_tool
from standardagents.project import build_registry
from standardagents.store import open_store


@define_tool
async def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return f"nothing found for {query}"


def rss_mb() -> float:
    """Current resident set size (Linux /proc), else the peak from getrusage."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main(threads: int) -> None:
    registry = build_registry(
        define_agent(name="helper", side_a={"prompt": "main", "stop_on_response": True}),
        define_prompt(name="main", prompt="You help.", tools=["lookup"]),
        lookup,
        define_model(name="default", provider="test", model="offline"),
    )
    marks = sorted({m for m in (1_000, 5_000, threads) if m <= threads})
    with tempfile.TemporaryDirectory() as tmp:
        rt = await Runtime.open(registry, store=open_store(f"sqlite:///{Path(tmp) / 'mem.db'}"))
        try:
            print(f"{'threads':>8} {'RSS MB':>8} {'cache entries':>14} {'thread locks':>13}")
            for i in range(1, threads + 1):
                thread = await rt.create_thread("helper")
                result = await rt.send(thread.id, f"hello number {i}, " + "x" * 200)
                assert result.stop_reason == "complete", result
                if i in marks:
                    gc.collect()
                    cache = len(rt.llm_cache)
                    print(f"{i:>8} {rss_mb():>8.1f} {cache:>14} {len(rt.inflight.locks):>13}", flush=True)
        finally:
            await rt.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10_000)
    asyncio.run(main(parser.parse_args().threads))
